"""What a sliding window holds, for raw deltas (:mod:`app.windows.aggregate`) and for
roll-ups (:mod:`app.windows.from_rollups`) alike: the exact sums by histogram layout,
the counters with how many pieces carried each, the missing signals, the covered seconds
and the gauges (:class:`SlidingGauge`). Pieces leave in the order they came in, so a
window slid over a long history adds and removes each one once and stays bit-identical
to the window summed afresh.

A piece is a delta (one gauge sample each) or a roll-up (many); :class:`WindowSums`
keeps what both are summed into, the two callers add what a piece of theirs holds.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field

from app.model import GaugeStats, Window
from app.windows.assemble import window_of_sums
from app.windows.exact import ExactSum, HistogramSum

__all__ = ["Layout", "SlidingGauge", "WindowSums", "count"]

Layout = tuple[float, ...]


def count(counter: Counter[str], name: str, n: int) -> None:
    """Add ``n`` (negative: remove) to ``name``'s count; a count of 0 is dropped."""
    counter[name] += n
    if counter[name] == 0:
        del counter[name]


@dataclass
class SlidingGauge:
    """One gauge over the pieces in the window: the exact sum of their samples and how
    many, the maximum in a monotonic queue of the pieces' maxima (the latest wins a tie),
    the first sample of the oldest piece and the last of the newest."""

    parts: deque[tuple[int, float, float]] = field(default_factory=deque)  # seq, first, last
    total: ExactSum = field(default_factory=ExactSum)
    count: int = 0
    maxq: deque[tuple[int, float]] = field(default_factory=deque)

    def add(self, seq: int, first: float, last: float, maximum: float, n: int) -> None:
        """Add a piece (its samples already in ``total``): ``n`` samples, their maximum."""
        self.parts.append((seq, first, last))
        self.count += n
        maxq = self.maxq
        while maxq and maxq[-1][1] <= maximum:
            maxq.pop()
        maxq.append((seq, maximum))

    def remove_oldest(self, n: int) -> None:
        """Remove the oldest piece (its ``n`` samples already out of ``total``)."""
        seq = self.parts.popleft()[0]
        self.count -= n
        if self.maxq and self.maxq[0][0] == seq:
            self.maxq.popleft()

    def stats(self) -> GaugeStats:
        return GaugeStats(
            avg=self.total.value() / self.count,
            max=self.maxq[0][1],
            last=self.parts[-1][2],
            first=self.parts[0][1],
        )


class WindowSums:
    """The sums of the pieces in the window now (module docstring)."""

    def __init__(self) -> None:
        # signal -> layout -> summed pieces; signal -> FIFO of the latest layout of each
        self.hist: dict[str, dict[Layout, HistogramSum]] = {}
        self.hist_order: dict[str, deque[Layout]] = {}
        self.counters: dict[str, ExactSum] = {}
        self.counter_members: Counter[str] = Counter()
        self.missing: Counter[str] = Counter()
        self.covered = ExactSum()
        self.intervals = 0
        self.resets = 0
        self.gauges: dict[str, SlidingGauge] = {}
        self.seq = 0  # the next piece's number (the gauges' queues)
        # each piece's first and last gauge time: the window's gauge span
        self.times: deque[tuple[float, float]] = deque()

    def histogram(self, name: str, layout: Layout) -> HistogramSum:
        """The sum of ``name``'s pieces of that bucket ``layout`` (created empty)."""
        layouts = self.hist.get(name)
        if layouts is None:
            layouts = self.hist[name] = {}
            self.hist_order[name] = deque()
        acc = layouts.get(layout)
        if acc is None:
            acc = layouts[layout] = HistogramSum()
        return acc

    def drop_if_empty(self, name: str, layout: Layout) -> None:
        """Drop ``name``'s sum of that ``layout`` once no piece in the window holds it."""
        layouts = self.hist[name]
        if layouts[layout].members == 0:
            del layouts[layout]

    def latest_layout(self, name: str, layout: Layout, sign: int) -> None:
        """A piece carrying ``name`` entered (``sign`` 1, ``layout`` its latest) or the
        oldest left (-1); the signal is dropped once no piece carries it."""
        if sign > 0:
            self.hist.setdefault(name, {})
            self.hist_order.setdefault(name, deque()).append(layout)
            return
        order = self.hist_order[name]
        order.popleft()
        if not order:
            del self.hist[name], self.hist_order[name]

    def counter(self, name: str) -> ExactSum:
        """The sum of counter ``name`` (created empty)."""
        c = self.counters.get(name)
        if c is None:
            c = self.counters[name] = ExactSum()
        return c

    def counted(self, name: str, n: int) -> None:
        """``n`` more (or fewer) pieces carry counter ``name``; dropped when none does."""
        count(self.counter_members, name, n)
        if name not in self.counter_members:
            del self.counters[name]

    def gauge(self, name: str) -> SlidingGauge:
        """Gauge ``name``'s pieces (created empty)."""
        g = self.gauges.get(name)
        if g is None:
            g = self.gauges[name] = SlidingGauge()
        return g

    def gauge_done(self, name: str) -> None:
        """After a piece left gauge ``name``: dropped when no piece carries it."""
        if not self.gauges[name].parts:
            del self.gauges[name]

    def window(
        self, *, target: str, model_name: str, start: float, end: float, lean: bool = False
    ) -> Window:
        """The window ``(start, end]`` of these sums (``lean``: only to be flattened,
        ``app.windows.assemble.window_of_values``)."""
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
            gauge_span=times[-1][1] - times[0][0] if times else 0.0,
            lean=lean,
        )
