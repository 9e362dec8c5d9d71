"""Windows: the sum of a stream's interval deltas, with quantiles, means, rates, gauges.

**Alignment.** An interval delta belongs to the window that contains its *end* time:
a window ``(start, end]`` sums the deltas with ``start < delta.end <= end`` — like
``increase(x[w])`` evaluated at ``end``, whose range is left-open (Prometheus 3). A
delta that straddles ``start`` counts in full (no extrapolation or clipping), and its
whole length counts in ``covered``; so ``covered`` may exceed ``end - start`` by up to
one scrape interval, and rates divide by ``covered``, not by the window length.

**Resets.** ``reset`` is set when any included delta was a restart
(:mod:`app.windows.delta`), or when a histogram's deltas in the window have more than
one bucket layout: only those with the layout of the latest delta carrying the signal
are summed; the others are skipped.

**Gauges.** ``avg`` and ``max`` over the samples in the window (one per delta, its
``gauges`` at its end; or the explicit ``gauge_samples``), ``last`` the latest. NaN
samples are ignored (as if absent).

**Missing.** The union of the included deltas' ``missing``, plus every core signal
(``CORE_SIGNALS``) that no included delta or gauge sample carried at all.

**Exactness.** Every sum is exact and rounded once (:mod:`app.windows.exact`), so a
window's numbers do not depend on the order of summation, and the sliding
:func:`windows` gives bit-identical results to :func:`window` on each window, however
long the history.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from app.model import GaugeStats, IntervalDelta, Window
from app.windows.assemble import window_of_sums
from app.windows.derived import (
    derive,
    finished_requests,
    mean_gen_len,
    mean_prompt_len,
    prefix_hit_ratio,
    quantile,
)
from app.windows.exact import ExactSum, HistogramSum

# A gauge sample: (time, {signal: value}).
GaugeSample = tuple[float, Mapping[str, float]]

__all__ = [
    "GaugeSample",
    "derive",
    "finished_requests",
    "mean_gen_len",
    "mean_prompt_len",
    "prefix_hit_ratio",
    "quantile",
    "window",
    "windows",
]


@dataclass
class _GaugeAcc:
    """Samples of one gauge in the window: FIFO of (seq, value), running sum, max deque."""

    samples: deque[tuple[int, float]] = field(default_factory=deque)
    total: ExactSum = field(default_factory=ExactSum)
    maxq: deque[tuple[int, float]] = field(default_factory=deque)

    def add(self, seq: int, v: float) -> None:
        self.samples.append((seq, v))
        self.total.add(v)
        while self.maxq and self.maxq[-1][1] <= v:
            self.maxq.pop()
        self.maxq.append((seq, v))

    def remove_oldest(self) -> None:
        seq, v = self.samples.popleft()
        self.total.sub(v)
        if self.maxq and self.maxq[0][0] == seq:
            self.maxq.popleft()

    def stats(self) -> GaugeStats:
        samples = self.samples
        return GaugeStats(
            avg=self.total.value() / len(samples),
            max=self.maxq[0][1],
            last=samples[-1][1],
            first=samples[0][1],
        )


class _Accumulator:
    """What is in the window now. Deltas and samples leave in the order they came in."""

    def __init__(self) -> None:
        # signal -> layout -> summed deltas; signal -> FIFO of the layouts of its deltas
        self.hist: dict[str, dict[tuple[float, ...], HistogramSum]] = {}
        self.hist_order: dict[str, deque[tuple[float, ...]]] = {}
        self.counters: dict[str, ExactSum] = {}
        self.counter_members: Counter[str] = Counter()
        self.missing: Counter[str] = Counter()
        self.covered = ExactSum()
        self.intervals = 0
        self.resets = 0
        self.gauges: dict[str, _GaugeAcc] = {}
        self.gauge_seq = 0
        self.gauge_times: deque[float] = deque()

    # -- deltas ---------------------------------------------------------------------
    def add_delta(self, d: IntervalDelta) -> None:
        self._apply(d, 1)

    def remove_delta(self, d: IntervalDelta) -> None:
        self._apply(d, -1)

    def _apply(self, d: IntervalDelta, sign: int) -> None:
        self.intervals += sign * d.members
        self.resets += sign if d.reset else 0
        self.covered.update(d.end - d.start, sign)
        for name in d.missing:
            self._count(self.missing, name, sign)
        for name, hd in d.histograms.items():
            layouts = self.hist.setdefault(name, {})
            order = self.hist_order.setdefault(name, deque())
            acc = layouts.get(hd.bounds)
            if acc is None:
                acc = layouts[hd.bounds] = HistogramSum()
            acc.apply(hd, sign)
            if sign > 0:
                order.append(hd.bounds)
            else:
                order.popleft()
                if acc.members == 0:
                    del layouts[hd.bounds]
                if not order:
                    del self.hist[name], self.hist_order[name]
        for name, value in d.counters.items():
            c = self.counters.get(name)
            if c is None:
                c = self.counters[name] = ExactSum()
            c.update(value, sign)
            self._count(self.counter_members, name, sign)
            if name not in self.counter_members:
                del self.counters[name]

    @staticmethod
    def _count(counter: Counter[str], name: str, sign: int) -> None:
        counter[name] += sign
        if counter[name] == 0:
            del counter[name]

    # -- gauges ---------------------------------------------------------------------
    def add_gauges(self, ts: float, values: Mapping[str, float]) -> None:
        seq = self.gauge_seq
        self.gauge_seq += 1
        self.gauge_times.append(ts)
        for name, v in values.items():
            if math.isnan(v):
                continue
            g = self.gauges.get(name)
            if g is None:
                g = self.gauges[name] = _GaugeAcc()
            g.add(seq, v)

    def remove_gauges(self, values: Mapping[str, float]) -> None:
        self.gauge_times.popleft()
        for name, v in values.items():
            if math.isnan(v):
                continue
            g = self.gauges[name]
            g.remove_oldest()
            if not g.samples:
                del self.gauges[name]

    # -- result ---------------------------------------------------------------------
    def window(self, *, target: str, model_name: str, start: float, end: float) -> Window:
        times = self.gauge_times
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
            gauge_span=times[-1] - times[0] if len(times) > 1 else 0.0,
        )


def _sorted_deltas(deltas: Iterable[IntervalDelta]) -> list[IntervalDelta]:
    return sorted(deltas, key=lambda d: d.end)


def _gauge_source(
    deltas: Sequence[IntervalDelta], gauge_samples: Sequence[GaugeSample] | None
) -> list[GaugeSample]:
    if gauge_samples is None:
        return [(d.end, d.gauges) for d in deltas]
    return sorted(gauge_samples, key=lambda s: s[0])


def window(
    deltas: Sequence[IntervalDelta],
    *,
    start: float,
    end: float,
    target: str,
    model_name: str,
    gauge_samples: Sequence[GaugeSample] | None = None,
) -> Window:
    """One stream's window ``(start, end]``: the sum of the deltas ending inside it.

    ``deltas`` are one stream's interval deltas in any order (others are filtered out
    by their end time only). Gauge statistics come from the deltas' ``gauges`` unless
    ``gauge_samples`` (``(time, {signal: value})``, e.g. stored scrape samples, which
    also exist for a first scrape that has no delta) are given; then only those whose
    time lies in ``(start, end]`` are used. See the module docstring for the rules.
    """
    inside = _sorted_deltas(d for d in deltas if start < d.end <= end)
    acc = _Accumulator()
    for d in inside:
        acc.add_delta(d)
    for ts, values in _gauge_source(inside, gauge_samples):
        if start < ts <= end:
            acc.add_gauges(ts, values)
    return acc.window(target=target, model_name=model_name, start=start, end=end)


def windows(
    deltas: Sequence[IntervalDelta],
    *,
    start: float,
    end: float,
    length: float,
    step: float,
    target: str,
    model_name: str,
    gauge_samples: Sequence[GaugeSample] | None = None,
) -> list[Window]:
    """Sliding windows of ``length`` seconds ending at ``start + length + k*step <= end``.

    Window ``k`` is ``(e_k - length, e_k]`` with ``e_k = start + length + k*step``, and
    equals ``window(deltas, start=e_k - length, end=e_k, ...)`` bit for bit. Each delta
    and gauge sample is added and removed once (O(n) plus O(signals·buckets) per
    window emitted), so long histories are cheap; when ``step >= length`` no delta is in
    two windows, and each window starts from an empty sum instead of removing the last.
    """
    if not (math.isfinite(length) and length > 0):
        raise ValueError(f"length must be a positive number of seconds, got {length}")
    if not (math.isfinite(step) and step > 0):
        raise ValueError(f"step must be a positive number of seconds, got {step}")
    ordered = _sorted_deltas(deltas)
    samples = _gauge_source(ordered, gauge_samples)
    acc = _Accumulator()
    disjoint = step >= length  # no delta is in two windows: add only, never remove
    out: list[Window] = []
    d_lo = d_hi = 0
    g_lo = g_hi = 0
    k = 0
    while True:
        w_end = start + length + k * step
        if not w_end <= end:
            break
        w_start = w_end - length
        if disjoint and acc.intervals + acc.gauge_seq:  # nothing carries over: start afresh
            acc = _Accumulator()
            while d_hi and ordered[d_hi - 1].end > w_start:  # a rounded edge: re-add
                d_hi -= 1
            while g_hi and samples[g_hi - 1][0] > w_start:
                g_hi -= 1
            d_lo, g_lo = d_hi, g_hi
        # deltas: drop those ending at or before w_start, add those ending by w_end
        while d_lo < d_hi and ordered[d_lo].end <= w_start:
            acc.remove_delta(ordered[d_lo])
            d_lo += 1
        if d_lo == d_hi:
            while d_hi < len(ordered) and ordered[d_hi].end <= w_start:
                d_hi += 1
            d_lo = d_hi
        while d_hi < len(ordered) and ordered[d_hi].end <= w_end:
            acc.add_delta(ordered[d_hi])
            d_hi += 1
        # gauge samples: the same two pointers
        while g_lo < g_hi and samples[g_lo][0] <= w_start:
            acc.remove_gauges(samples[g_lo][1])
            g_lo += 1
        if g_lo == g_hi:
            while g_hi < len(samples) and samples[g_hi][0] <= w_start:
                g_hi += 1
            g_lo = g_hi
        while g_hi < len(samples) and samples[g_hi][0] <= w_end:
            acc.add_gauges(*samples[g_hi])
            g_hi += 1
        out.append(acc.window(target=target, model_name=model_name, start=w_start, end=w_end))
        k += 1
    return out
