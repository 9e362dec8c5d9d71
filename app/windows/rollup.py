"""Roll-ups: what a window needs of the deltas ending in a span, summed once and kept.

A :class:`Rollup` of the span ``(start, end]`` (a minute or an hour; its edges are
multiples of its length) holds, of the deltas ending inside it, what
:func:`app.windows.aggregate.window` sums — not its rounded results:

* **histograms**: per signal, the exact sums by bucket layout (bucket increases, sum,
  count, and how many deltas had that layout), and the layout of the latest delta that
  carried the signal. A window sums only the latest layout and marks ``reset`` when it
  saw another, so a roll-up that held only the latest would change the answer.
* **counters**: exact sums, and how many deltas carried each (a counter that was
  present but did not move is still listed, with 0).
* **gauges**: one sample per delta (NaN ones ignored, as the window does): the exact
  sum and how many (the average), the maximum, the first and the last.
* the number of deltas and of resets, the covered seconds (exact), the ends of the
  first and last delta (the window's gauge span), and the missing signals.

Every sum stays exact (:class:`~app.windows.exact.ExactSum`): a minute's sums rounded
and then added over an hour would not be the hour's sum rounded once. So the window of
roll-ups whose spans tile ``(start, end]`` is the raw window **bit for bit** — resets,
layout changes, ``missing``, ``covered`` and the gauges' first, last and maximum
included (the latest sample wins a tie for the maximum, as in the raw window): one
roll-up's is :meth:`Rollup.window`, sliding windows over many are
:mod:`app.windows.from_rollups`' (which refuses a roll-up that straddles a window's
edge: it cannot be split).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from app.model import GaugeStats, IntervalDelta, Window
from app.windows.assemble import window_of_sums
from app.windows.exact import ExactSum, HistogramSum

__all__ = [
    "GaugeRoll",
    "HistRoll",
    "Rollup",
    "RollupPart",
    "rollups_of",
    "span_end",
]

Layout = tuple[float, ...]


def span_end(ts: float, res: float) -> float:
    """The end of the ``res``-second span holding a delta that ends at ``ts``."""
    return math.ceil(ts / res) * res


@dataclass(slots=True)
class GaugeRoll:
    """A gauge's samples in a roll-up: exact sum, how many, maximum, first, last."""

    total: ExactSum
    count: int
    max: float
    first: float
    last: float

    def stats(self) -> GaugeStats:
        return GaugeStats(
            avg=self.total.value() / self.count, max=self.max, last=self.last, first=self.first
        )


@dataclass(slots=True)
class HistRoll:
    """A histogram signal's sums by bucket layout, and its latest delta's layout."""

    layouts: dict[Layout, HistogramSum]
    latest: Layout


@dataclass(slots=True)
class Rollup:
    """What the window needs of the deltas ending in ``(start, end]`` (module docstring).

    Built by adding deltas (:meth:`add`) or later roll-ups (:meth:`merge`) in time order.
    ``first_end``/``last_end`` are NaN while it holds no delta.
    """

    start: float
    end: float
    intervals: int = 0
    resets: int = 0
    covered: ExactSum = field(default_factory=ExactSum)
    first_end: float = math.nan
    last_end: float = math.nan
    histograms: dict[str, HistRoll] = field(default_factory=dict)
    counters: dict[str, ExactSum] = field(default_factory=dict)
    counter_members: dict[str, int] = field(default_factory=dict)
    missing: dict[str, int] = field(default_factory=dict)
    gauges: dict[str, GaugeRoll] = field(default_factory=dict)

    def add(self, d: IntervalDelta) -> None:
        """Add one delta ending inside the span, later than those already added."""
        if not self.start < d.end <= self.end:
            raise ValueError(f"delta ending at {d.end} is outside ({self.start}, {self.end}]")
        if self.intervals == 0:
            self.first_end = d.end
        self.last_end = d.end
        self.intervals += 1
        self.resets += 1 if d.reset else 0
        self.covered.add(d.end - d.start)
        for name in d.missing:
            self.missing[name] = self.missing.get(name, 0) + 1
        for name, hd in d.histograms.items():
            roll = self.histograms.get(name)
            if roll is None:
                roll = self.histograms[name] = HistRoll({}, hd.bounds)
            acc = roll.layouts.get(hd.bounds)
            if acc is None:
                acc = roll.layouts[hd.bounds] = HistogramSum()
            acc.apply(hd, 1)
            roll.latest = hd.bounds
        for name, value in d.counters.items():
            c = self.counters.get(name)
            if c is None:
                c = self.counters[name] = ExactSum()
            c.add(value)
            self.counter_members[name] = self.counter_members.get(name, 0) + 1
        for name, v in d.gauges.items():
            if math.isnan(v):
                continue
            g = self.gauges.get(name)
            if g is None:
                total = ExactSum()
                total.add(v)
                self.gauges[name] = GaugeRoll(total, 1, v, v, v)
                continue
            g.total.add(v)
            g.count += 1
            if v >= g.max:
                g.max = v
            g.last = v

    def merge(self, other: Rollup) -> None:
        """Add a later roll-up whose span lies inside this one's (minutes into an hour)."""
        if not (self.start <= other.start and other.end <= self.end):
            raise ValueError(f"({other.start}, {other.end}] is outside this roll-up's span")
        if other.intervals == 0:
            return
        if self.intervals == 0:
            self.first_end = other.first_end
        self.last_end = other.last_end
        self.intervals += other.intervals
        self.resets += other.resets
        self.covered.merge(other.covered)
        for name, n in other.missing.items():
            self.missing[name] = self.missing.get(name, 0) + n
        for name, roll in other.histograms.items():
            mine = self.histograms.get(name)
            if mine is None:
                mine = self.histograms[name] = HistRoll({}, roll.latest)
            for layout, part in roll.layouts.items():
                acc = mine.layouts.get(layout)
                if acc is None:
                    acc = mine.layouts[layout] = HistogramSum()
                acc.merge(part)
            mine.latest = roll.latest
        for name, increase in other.counters.items():
            c = self.counters.get(name)
            if c is None:
                c = self.counters[name] = ExactSum()
            c.merge(increase)
            self.counter_members[name] = (
                self.counter_members.get(name, 0) + other.counter_members[name]
            )
        for name, g in other.gauges.items():
            mine_g = self.gauges.get(name)
            if mine_g is None:
                total = ExactSum()
                total.merge(g.total)
                self.gauges[name] = GaugeRoll(total, g.count, g.max, g.first, g.last)
                continue
            mine_g.total.merge(g.total)
            mine_g.count += g.count
            if g.max >= mine_g.max:
                mine_g.max = g.max
            mine_g.last = g.last

    def rollup(self) -> Rollup:
        return self

    def window(
        self, *, target: str, model_name: str, start: float, end: float, lean: bool = False
    ) -> Window:
        """The window ``(start, end]`` holding exactly this roll-up's deltas (``lean``:
        ``app.windows.assemble.window_of_values``)."""
        return window_of_sums(
            target=target,
            model_name=model_name,
            start=start,
            end=end,
            hist={name: roll.layouts for name, roll in self.histograms.items()},
            latest={name: roll.latest for name, roll in self.histograms.items()},
            counters=self.counters,
            gauges={name: g.stats() for name, g in self.gauges.items()},
            missing=self.missing.keys(),
            covered=self.covered,
            intervals=self.intervals,
            resets=self.resets,
            gauge_span=self.last_end - self.first_end if self.intervals > 1 else 0.0,
            lean=lean,
        )


class RollupPart(Protocol):
    """A roll-up as :func:`iter_rollup_windows` reads it: its span, whether it holds a
    delta, itself (:meth:`rollup`) and the window of it alone. A :class:`Rollup` is one;
    a stored one may answer :meth:`window` without building the sums (the same window)."""

    @property
    def start(self) -> float: ...

    @property
    def end(self) -> float: ...

    @property
    def intervals(self) -> int: ...

    def rollup(self) -> Rollup: ...

    def window(
        self, *, target: str, model_name: str, start: float, end: float, lean: bool = False
    ) -> Window: ...


def rollups_of(deltas: Iterable[IntervalDelta], res: float) -> list[Rollup]:
    """The deltas (one stream's, any order) rolled up into ``res``-second spans, oldest
    first; spans without a delta are left out."""
    out: dict[float, Rollup] = {}
    for d in sorted(deltas, key=lambda d: d.end):
        end = span_end(d.end, res)
        r = out.get(end)
        if r is None:
            r = out[end] = Rollup(end - res, end)
        r.add(d)
    return list(out.values())
