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
from collections.abc import Iterable, Mapping, Sequence

from app.model import IntervalDelta, Window
from app.windows.derived import (
    derive,
    finished_requests,
    mean_gen_len,
    mean_prompt_len,
    prefix_hit_ratio,
    quantile,
)
from app.windows.sliding import WindowSums, count

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


class _Accumulator(WindowSums):
    """What is in the window now: deltas, and gauge samples (one per delta, or given),
    each sample a piece of its gauge. They leave in the order they came in."""

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
            count(self.missing, name, sign)
        for name, hd in d.histograms.items():
            self.histogram(name, hd.bounds).apply(hd, sign)
            if sign < 0:
                self.drop_if_empty(name, hd.bounds)
            self.latest_layout(name, hd.bounds, sign)
        for name, value in d.counters.items():
            self.counter(name).update(value, sign)
            self.counted(name, sign)

    # -- gauges ---------------------------------------------------------------------
    def add_gauges(self, ts: float, values: Mapping[str, float]) -> None:
        seq = self.seq
        self.seq += 1
        self.times.append((ts, ts))
        for name, v in values.items():
            if math.isnan(v):
                continue
            g = self.gauge(name)
            g.total.add(v)
            g.add(seq, v, v, v, 1)

    def remove_gauges(self, values: Mapping[str, float]) -> None:
        self.times.popleft()
        for name, v in values.items():
            if math.isnan(v):
                continue
            g = self.gauges[name]
            g.total.sub(v)
            g.remove_oldest(1)
            self.gauge_done(name)


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
        if disjoint and acc.intervals + acc.seq:  # nothing carries over: start afresh
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
