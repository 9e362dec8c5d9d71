"""Windows from roll-ups: :func:`app.windows.aggregate.windows`, summed from
:class:`~app.windows.rollup.Rollup` spans instead of raw deltas — the same windows, bit
for bit, when every window's edges fall on the roll-ups' edges (a roll-up that straddles
one is refused). Sliding windows add and remove each roll-up once, as the raw ones do
with deltas; the maximum of a gauge is kept in a monotonic queue of the roll-ups'
maxima, the first and last samples are the oldest and newest roll-up's.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Iterator

from app.model import Window
from app.windows.rollup import Rollup, RollupPart
from app.windows.sliding import WindowSums, count

__all__ = ["iter_rollup_windows", "rollup_windows"]


class _Sliding(WindowSums):
    """The roll-ups in the window now, each a piece of every gauge it carries; they
    leave in the order they came in."""

    def add(self, p: Rollup) -> None:
        self._apply(p, 1)
        seq = self.seq
        self.seq += 1
        self.times.append((p.first_end, p.last_end))
        for name, g in p.gauges.items():
            acc = self.gauge(name)
            acc.total.merge(g.total)
            acc.add(seq, g.first, g.last, g.max, g.count)

    def remove(self, p: Rollup) -> None:
        self._apply(p, -1)
        self.times.popleft()
        for name, g in p.gauges.items():
            acc = self.gauges[name]
            acc.total.merge(g.total, -1)
            acc.remove_oldest(g.count)
            self.gauge_done(name)

    def _apply(self, p: Rollup, sign: int) -> None:
        self.intervals += sign * p.intervals
        self.resets += sign * p.resets
        self.covered.merge(p.covered, sign)
        for name, n in p.missing.items():
            count(self.missing, name, sign * n)
        for name, roll in p.histograms.items():
            for layout, part in roll.layouts.items():
                self.histogram(name, layout).merge(part, sign)
                self.drop_if_empty(name, layout)
            self.latest_layout(name, roll.latest, sign)
        for name, increase in p.counters.items():
            self.counter(name).merge(increase, sign)
            self.counted(name, sign * p.counter_members[name])


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
