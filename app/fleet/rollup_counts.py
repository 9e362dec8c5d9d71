"""SLO counts read from roll-ups: a closed hour is one row, not 720 deltas.

A store keeps, beside a stream's raw deltas, per-minute and per-hour roll-ups
(:mod:`app.windows.rollup`) whose bucket sums are exact, and keeps them longer than the
raw deltas (``storage.rollup_retention_days``). SLO counts are linear in the bucket
counts (:mod:`app.fleet.slo`), so the counts of a span are the counts of its roll-ups'
summed histograms — the same numbers :func:`~app.fleet.slo.delta_counts` gives for the
deltas the roll-ups hold (each histogram summed per bucket layout, then judged; the
``finished:*`` counters and the covered seconds summed exactly). A source that has
:meth:`RollupSource.rollups` lets :class:`~app.fleet.count_cache.CountCache` fill a
month's budget from hour roll-ups and keep counting once the raw deltas are gone.

Pure apart from reading through the source.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol

from app.fleet.slo import OBJECTIVES, SloCounts, SloSpec, counts_of_sums
from app.windows.exact import ExactSum, HistogramSum
from app.windows.rollup import Layout, Rollup, RollupPart

__all__ = ["RollupSource", "part_counts", "rollup_counts", "rollups_of_source"]


class RollupSource(Protocol):
    """A source of roll-ups (``Store`` has this): the parts covering ``(start, end]``,
    oldest first — whole ``res`` spans (60 or 3600 s) where written, minutes elsewhere."""

    def rollups(
        self, target: str, model_name: str, start: float, end: float, res: float
    ) -> Iterator[RollupPart]: ...


def rollups_of_source(source: object) -> RollupSource | None:
    """The source as a roll-up source, or None when it only has deltas."""
    return source if callable(getattr(source, "rollups", None)) else None  # type: ignore[return-value]


def part_counts(part: RollupPart, spec: SloSpec) -> SloCounts:
    """The SLO counts of one roll-up part; a stored one builds only the histograms and
    counters the counts read (its ``rollup_of``), not the whole roll-up."""
    select = getattr(part, "rollup_of", None)
    if callable(select):
        wanted = {OBJECTIVES[n] for n in spec.bounds()} | {"tpot"}
        return rollup_counts([select(wanted, "finished:")], spec)
    return rollup_counts([part.rollup()], spec)


def rollup_counts(rolls: Iterable[Rollup], spec: SloSpec) -> SloCounts:
    """The SLO counts of the deltas some roll-ups of one stream hold (none: empty)."""
    wanted = {OBJECTIVES[n] for n in spec.bounds()} | {"tpot"}
    rolls = list(rolls)
    if len(rolls) == 1:  # one roll-up: its sums as they are
        (roll,) = rolls
        if roll.intervals == 0:
            return SloCounts()
        histograms = {
            name: [acc.result(layout) for layout, acc in hroll.layouts.items() if acc.members]
            for name, hroll in roll.histograms.items()
            if name in wanted
        }
        increases = {k: v.value() for k, v in roll.counters.items() if k.startswith("finished:")}
        return counts_of_sums(histograms, increases, spec, roll.covered.value())
    hists: dict[str, dict[Layout, HistogramSum]] = {}
    finished: dict[str, ExactSum] = {}
    covered = ExactSum()
    seen = False
    for roll in rolls:
        if roll.intervals == 0:
            continue
        seen = True
        covered.merge(roll.covered)
        for name, hroll in roll.histograms.items():
            if name not in wanted:
                continue
            mine = hists.setdefault(name, {})
            for layout, part in hroll.layouts.items():
                acc = mine.get(layout)
                if acc is None:
                    acc = mine[layout] = HistogramSum()
                acc.merge(part)
        for name, value in roll.counters.items():
            if name.startswith("finished:"):
                acc_c = finished.get(name)
                if acc_c is None:
                    acc_c = finished[name] = ExactSum()
                acc_c.merge(value)
    if not seen:
        return SloCounts()
    histograms = {
        name: [acc.result(layout) for layout, acc in by_layout.items() if acc.members]
        for name, by_layout in hists.items()
    }
    increases = {name: acc.value() for name, acc in finished.items()}
    return counts_of_sums(histograms, increases, spec, covered.value())
