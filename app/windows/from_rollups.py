"""Windows from roll-ups: :func:`app.windows.aggregate.windows`, summed from
:class:`~app.windows.rollup.Rollup` spans instead of raw deltas — the same windows, bit
for bit, when every window's edges fall on the roll-ups' edges (a roll-up that straddles
one is refused). Sliding windows add and remove each roll-up once, as the raw ones do
with deltas; the maximum of a gauge is kept in a monotonic queue of the roll-ups'
maxima, the first and last samples are the oldest and newest roll-up's.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from app.model import GaugeStats, Window
from app.windows.assemble import window_of_sums
from app.windows.exact import ExactSum, HistogramSum
from app.windows.rollup import GaugeRoll, Layout, Rollup, RollupPart

__all__ = ["iter_rollup_windows", "rollup_windows"]


@dataclass
class _GaugeParts:
    """One gauge over the roll-ups in a sliding window (as ``aggregate._GaugeAcc``)."""

    parts: deque[tuple[int, GaugeRoll]] = field(default_factory=deque)
    total: ExactSum = field(default_factory=ExactSum)
    count: int = 0
    maxq: deque[tuple[int, float]] = field(default_factory=deque)

    def add(self, seq: int, g: GaugeRoll) -> None:
        self.parts.append((seq, g))
        self.total.merge(g.total)
        self.count += g.count
        while self.maxq and self.maxq[-1][1] <= g.max:
            self.maxq.pop()
        self.maxq.append((seq, g.max))

    def remove_oldest(self) -> None:
        seq, g = self.parts.popleft()
        self.total.merge(g.total, -1)
        self.count -= g.count
        if self.maxq and self.maxq[0][0] == seq:
            self.maxq.popleft()

    def stats(self) -> GaugeStats:
        return GaugeStats(
            avg=self.total.value() / self.count,
            max=self.maxq[0][1],
            last=self.parts[-1][1].last,
            first=self.parts[0][1].first,
        )


class _Sliding:
    """The roll-ups in the window now; they leave in the order they came in."""

    def __init__(self) -> None:
        self.hist: dict[str, dict[Layout, HistogramSum]] = {}
        self.hist_order: dict[str, deque[Layout]] = {}
        self.counters: dict[str, ExactSum] = {}
        self.counter_members: Counter[str] = Counter()
        self.missing: Counter[str] = Counter()
        self.covered = ExactSum()
        self.intervals = 0
        self.resets = 0
        self.gauges: dict[str, _GaugeParts] = {}
        self.seq = 0
        self.times: deque[tuple[float, float]] = deque()

    def add(self, p: Rollup) -> None:
        self._apply(p, 1)
        seq = self.seq
        self.seq += 1
        self.times.append((p.first_end, p.last_end))
        for name, g in p.gauges.items():
            acc = self.gauges.get(name)
            if acc is None:
                acc = self.gauges[name] = _GaugeParts()
            acc.add(seq, g)

    def remove(self, p: Rollup) -> None:
        self._apply(p, -1)
        self.times.popleft()
        for name in p.gauges:
            acc = self.gauges[name]
            acc.remove_oldest()
            if not acc.parts:
                del self.gauges[name]

    def _apply(self, p: Rollup, sign: int) -> None:
        self.intervals += sign * p.intervals
        self.resets += sign * p.resets
        self.covered.merge(p.covered, sign)
        for name, n in p.missing.items():
            _count(self.missing, name, sign * n)
        for name, roll in p.histograms.items():
            layouts = self.hist.setdefault(name, {})
            order = self.hist_order.setdefault(name, deque())
            for layout, part in roll.layouts.items():
                acc = layouts.get(layout)
                if acc is None:
                    acc = layouts[layout] = HistogramSum()
                acc.merge(part, sign)
                if acc.members == 0:
                    del layouts[layout]
            if sign > 0:
                order.append(roll.latest)
            else:
                order.popleft()
                if not order:
                    del self.hist[name], self.hist_order[name]
        for name, increase in p.counters.items():
            c = self.counters.get(name)
            if c is None:
                c = self.counters[name] = ExactSum()
            c.merge(increase, sign)
            _count(self.counter_members, name, sign * p.counter_members[name])
            if name not in self.counter_members:
                del self.counters[name]

    def window(
        self, *, target: str, model_name: str, start: float, end: float, lean: bool = False
    ) -> Window:
        times = self.times
        return window_of_sums(
            target=target,
            model_name=model_name,
            start=start,
            end=end,
            hist=self.hist,
            latest={name: order[-1] for name, order in self.hist_order.items()},
            counters=self.counters,
            gauges={name: g.stats() for name, g in self.gauges.items()},
            missing=self.missing.keys(),
            covered=self.covered,
            intervals=self.intervals,
            resets=self.resets,
            gauge_span=times[-1][1] - times[0][0] if self.intervals > 1 else 0.0,
            lean=lean,
        )


def _count(counter: Counter[str], name: str, n: int) -> None:
    counter[name] += n
    if counter[name] == 0:
        del counter[name]


def rollup_windows(
    parts: Iterable[Rollup],
    *,
    start: float,
    end: float,
    length: float,
    step: float,
    target: str,
    model_name: str,
) -> list[Window]:
    """:func:`app.windows.aggregate.windows` over roll-ups (any order) instead of raw
    deltas: :func:`iter_rollup_windows` of them sorted, as a list."""
    return list(
        iter_rollup_windows(
            sorted(parts, key=lambda p: p.end),
            start=start,
            end=end,
            length=length,
            step=step,
            target=target,
            model_name=model_name,
        )
    )


def iter_rollup_windows(
    parts: Iterable[RollupPart],
    *,
    start: float,
    end: float,
    length: float,
    step: float,
    target: str,
    model_name: str,
    lean: bool = False,
) -> Iterator[Window]:
    """The windows of :func:`app.windows.aggregate.windows` from roll-ups, one at a time.

    Window ``k`` is ``(e_k - length, e_k]`` with ``e_k = start + length + k*step <= end``
    and holds the roll-ups whose span ends inside it; it equals the raw window of the
    deltas they hold, bit for bit, when no roll-up straddles a window's edge (ValueError
    otherwise: the edges must be multiples of the roll-ups' length). ``parts`` must come
    oldest first (ValueError otherwise) and are read as the windows need them, so a
    long range is never held in memory at once: only the roll-ups of the current window.
    A window of one roll-up is built from it directly; sliding windows add and remove
    each roll-up once. ``lean``: windows only to be flattened into the API's object
    (``app.windows.assemble.window_of_values``).
    """
    if not (math.isfinite(length) and length > 0):
        raise ValueError(f"length must be a positive number of seconds, got {length}")
    if not (math.isfinite(step) and step > 0):
        raise ValueError(f"step must be a positive number of seconds, got {step}")
    source = iter(parts)
    pending = next(source, None)
    last_end = -math.inf
    inside: deque[RollupPart] = deque()
    disjoint = step >= length  # no roll-up is in two windows: add only, never remove
    acc = _Sliding()
    k = 0
    while True:
        w_end = start + length + k * step
        if not w_end <= end:
            return
        w_start = w_end - length
        k += 1
        if disjoint:
            inside.clear()
        else:
            while inside and inside[0].end <= w_start:
                acc.remove(inside.popleft().rollup())
        fresh_from = len(inside)
        while pending is not None and pending.end <= w_end:
            part, pending = pending, next(source, None)
            if not part.end > last_end:
                raise ValueError("roll-ups must come oldest first, one per span")
            last_end = part.end
            if part.end > w_start and part.intervals:
                inside.append(part if disjoint else part.rollup())
        if inside and inside[0].start < w_start:
            p = inside[0]
            raise ValueError(f"roll-up ({p.start}, {p.end}] straddles the window's start {w_start}")
        if disjoint:
            if len(inside) == 1:  # the window is this roll-up
                yield inside[0].window(
                    target=target, model_name=model_name, start=w_start, end=w_end, lean=lean
                )
                continue
            acc = _Sliding()
            fresh_from = 0
        for i in range(fresh_from, len(inside)):
            acc.add(inside[i].rollup())
        yield acc.window(target=target, model_name=model_name, start=w_start, end=w_end, lean=lean)
