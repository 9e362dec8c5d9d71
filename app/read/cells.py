"""Interval deltas → per-step cells, so long ranges window quickly.

A window on the grid ``(e - length, e]`` with ``e`` a multiple of ``step`` and ``length``
a multiple of ``step`` is the sum of whole grid cells ``((k-1)·step, k·step]`` (a delta
belongs to the cell holding its *end*, as it belongs to the window holding its end). So
the deltas of a cell can be summed once, and the sliding windows then add and remove one
cell instead of every scrape: a day of 5 s scrapes at a 60 s step is 1,440 cells instead
of 17,280 deltas.

The result equals :func:`app.windows.aggregate.windows` over the raw deltas (a cell's
delta says how many it sums, so a window's ``intervals`` counts scrape intervals), except that
non-integer sums (a histogram's ``_sum``) are added in plain floating point inside a cell
and may differ in the last bits; bucket counts are integers, so quantiles are identical.
Gauge statistics must come from the raw samples (:func:`gauge_samples`), not the cells.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from app.model import HistogramDelta, IntervalDelta
from app.windows.aggregate import GaugeSample


def cell_of(ts: float, step: float) -> int:
    """The index ``k`` of the cell ``((k-1)·step, k·step]`` holding ``ts``."""
    return math.ceil(ts / step)


def gauge_samples(deltas: Sequence[IntervalDelta]) -> list[GaugeSample]:
    """The gauge samples the raw deltas carry (one per delta, at its end)."""
    return [(d.end, d.gauges) for d in deltas]


class _Cell:
    __slots__ = ("first", "last", "covered", "hist", "counters", "reset", "missing", "n", "keep")

    def __init__(self, d: IntervalDelta, keep: frozenset[str] | None) -> None:
        self.keep = keep
        self.first = d
        self.last = d
        self.covered = d.end - d.start
        self.hist: dict[str, tuple[tuple[float, ...], dict[int, float], float, float]] = {
            name: (h.bounds, dict(h.buckets), h.sum, h.count)
            for name, h in d.histograms.items()
            if keep is None or name in keep
        }
        self.counters = dict(d.counters)
        self.reset = d.reset
        self.missing = set(d.missing)
        self.n = d.members

    def add(self, d: IntervalDelta) -> None:
        self.last = d
        self.n += d.members
        self.covered += d.end - d.start
        self.reset = self.reset or d.reset
        self.missing.update(d.missing)
        keep = self.keep
        for name, h in d.histograms.items():
            if keep is not None and name not in keep:
                continue
            prev = self.hist.get(name)
            if prev is None or prev[0] != h.bounds:
                # A new layout replaces the old one, as a window keeps only the latest
                # layout; the delta that changed it is marked reset by the delta rules.
                self.hist[name] = (h.bounds, dict(h.buckets), h.sum, h.count)
                self.reset = self.reset or prev is not None
                continue
            buckets = prev[1]
            for index, inc in h.buckets.items():
                buckets[index] = buckets.get(index, 0.0) + inc
            self.hist[name] = (prev[0], buckets, prev[2] + h.sum, prev[3] + h.count)
        counters = self.counters
        for name, value in d.counters.items():
            counters[name] = counters.get(name, 0.0) + value

    def delta(self) -> IntervalDelta:
        last = self.last
        return IntervalDelta(
            target=last.target,
            model_name=last.model_name,
            start=last.end - self.covered,
            end=last.end,
            histograms={
                name: HistogramDelta(bounds=b, buckets=buckets, sum=s, count=c)
                for name, (b, buckets, s, c) in self.hist.items()
            },
            counters=self.counters,
            gauges=last.gauges,
            reset=self.reset,
            missing=tuple(sorted(self.missing)),
            members=self.n,
        )


def merge_cells(
    deltas: Sequence[IntervalDelta], step: float | None, *, keep: Iterable[str] | None = None
) -> list[IntervalDelta]:
    """Sum the deltas of each grid cell into one delta ending at the cell's last scrape.

    ``deltas`` are one stream's, in any order. The merged delta's ``start`` is chosen so
    that ``end - start`` is the summed duration of its members (``covered`` stays exact).
    ``keep`` limits the histograms carried over (the others are dropped: a window's
    quantiles cost time per histogram). ``step`` None keeps one cell per delta.
    """
    wanted = None if keep is None else frozenset(keep)
    if step is not None and step <= 0:
        raise ValueError("step must be positive")
    cells: dict[int, _Cell] = {}
    for i, d in enumerate(sorted(deltas, key=lambda x: x.end)):
        k = i if step is None else cell_of(d.end, step)
        cell = cells.get(k)
        if cell is None:
            cells[k] = _Cell(d, wanted)
        else:
            cell.add(d)
    return [cells[k].delta() for k in sorted(cells)]
