"""Interval deltas: what changed in a stream between two consecutive scrapes.

Rules (docs/architecture.md, "How the numbers are made"), chosen to give the numbers
Prometheus' ``increase()`` gives when summed over a range (without its extrapolation to
the range edges):

* **Counters.** ``delta = cur - prev``. A decrease is a restart (counter reset): the delta
  is the current value, as ``increase()`` assumes the counter started again from 0, and
  the interval is marked ``reset``.
* **Histograms** are handled as one unit: a decrease of ``count``, of ``sum`` or of any
  cumulative bucket is a restart, and the whole histogram's delta is then its current
  cumulative state (converted to per-bucket increments), with ``reset``. This deliberately
  differs from Prometheus, which detects resets per ``_bucket``/``_sum``/``_count`` series
  and can therefore mix "since restart" and "since previous" buckets into a
  non-monotonic histogram; after a real restart every series restarted, so treating
  them together is the faithful reading. (``_sum`` is a counter series to Prometheus
  too, which is why its decrease counts; vLLM never observes negative values.)
* **Bucket layout change** (bounds differ): like a restart — the delta is the current
  state and ``reset`` is set. :func:`layout_changed` names the affected signals so the
  caller can report it (e.g. ``ErrorKind.BUCKET_LAYOUT_CHANGED``).
* **Gauges** are the values at ``cur``.
* **A series present in ``cur`` but not in ``prev``** counts from zero (its delta is its
  full current value) when ``prev`` carried at least one other series of the stream:
  the process was up and scraped, so the series simply had no observation yet (vLLM
  creates some series lazily at first observation — V0's per-``finished_reason``
  counters, for instance — and their first value is real work done in this interval).
  When ``prev`` carried no series at all there is no baseline and the series is left out
  of this interval (its value becomes the next interval's baseline), as ``increase()``
  needs two samples. Override with ``new_series_from_zero``.
* **A series present in ``prev`` but not in ``cur``** yields nothing; ``cur.missing``
  (copied to ``IntervalDelta.missing``) is where the scrape layer reports it.
* **An engine that left.** Engines are folded into the stream before deltas are taken
  (``app.scrape.normalize``), so when an engine disappears (``engines`` of ``cur`` lacks
  one of ``prev``) its counts leave the folded sums: a fall is then no restart, and the
  remaining engines' increase cannot be told from it. Such a signal is left out of this
  interval (its value becomes the next baseline) and the interval is marked ``reset``;
  counting the current value, as for a restart, would add every remaining engine's whole
  history to one interval. Signals that did not fall are taken as usual (they may miss
  what the leaving engine had added since the previous scrape). An engine that joins
  counts from zero like any new series, which is what a new engine process does.

Per-bucket increments are stored sparse: only non-zero ones, keyed by bucket index
(``len(bounds)`` is the ``+Inf`` bucket).
"""

from __future__ import annotations

from collections.abc import Sequence

from app.model import Histogram, HistogramDelta, IntervalDelta, Snapshot, StreamSnapshot
from app.windows.quantile import cumulative_counts

__all__ = [
    "cumulative_counts",
    "histogram_delta",
    "interval_delta",
    "layout_changed",
    "snapshot_deltas",
    "to_increments",
]


def to_increments(counts: Sequence[float]) -> dict[int, float]:
    """Cumulative counts → sparse per-bucket increments (non-zero entries only).

    The inverse of :func:`cumulative_counts` (``cumulative_counts(len(c),
    to_increments(c)) == c`` exactly for integer counts below 2**53).
    """
    out: dict[int, float] = {}
    prev = 0.0
    for i, c in enumerate(counts):
        inc = c - prev
        if inc != 0:
            out[i] = inc
        prev = c
    return out


def _check(name: str, h: Histogram) -> None:
    if len(h.counts) != len(h.bounds) + 1:
        raise ValueError(
            f"histogram {name!r}: {len(h.counts)} counts for {len(h.bounds)} bounds "
            "(need one more, for +Inf)"
        )


def _as_delta(h: Histogram) -> HistogramDelta:
    return HistogramDelta(
        bounds=h.bounds, buckets=to_increments(h.counts), sum=h.sum, count=h.count
    )


def histogram_delta(prev: Histogram | None, cur: Histogram) -> tuple[HistogramDelta, bool]:
    """Increase of one histogram since ``prev``: ``(delta, reset)``.

    ``prev=None`` counts from zero (delta = current, not a reset). A restart (any
    decrease) or a bucket layout change gives the current state and ``reset=True``.
    """
    _check("cur", cur)
    if prev is None:
        return _as_delta(cur), False
    _check("prev", prev)
    if prev.bounds != cur.bounds:
        return _as_delta(cur), True
    decreased = (
        cur.count < prev.count
        or cur.sum < prev.sum
        or any(c < p for c, p in zip(cur.counts, prev.counts, strict=True))
    )
    if decreased:
        return _as_delta(cur), True
    diff = [c - p for c, p in zip(cur.counts, prev.counts, strict=True)]
    return (
        HistogramDelta(
            bounds=cur.bounds,
            buckets=to_increments(diff),
            sum=cur.sum - prev.sum,
            count=cur.count - prev.count,
        ),
        False,
    )


def layout_changed(prev: StreamSnapshot, cur: StreamSnapshot) -> list[str]:
    """Histogram signals present in both snapshots whose bucket bounds differ."""
    return [
        name
        for name, h in cur.histograms.items()
        if name in prev.histograms and prev.histograms[name].bounds != h.bounds
    ]


def _has_series(s: StreamSnapshot) -> bool:
    return bool(s.histograms or s.counters or s.gauges)


def interval_delta(
    prev: StreamSnapshot,
    cur: StreamSnapshot,
    *,
    target: str,
    start: float,
    end: float,
    new_series_from_zero: bool | None = None,
) -> IntervalDelta:
    """The :class:`IntervalDelta` of one stream between two scrapes (module rules).

    ``new_series_from_zero`` decides whether series absent from ``prev`` count their
    full current value; by default they do when ``prev`` carried any series at all.
    """
    from_zero = _has_series(prev) if new_series_from_zero is None else new_series_from_zero
    engine_left = bool(prev.engines) and not prev.engines.keys() <= cur.engines.keys()
    reset = False
    histograms: dict[str, HistogramDelta] = {}
    for name, h in cur.histograms.items():
        before = prev.histograms.get(name)
        if before is None and not from_zero:
            _check(name, h)
            continue
        hd, was_reset = histogram_delta(before, h)
        reset = reset or was_reset
        if was_reset and engine_left and before is not None and before.bounds == h.bounds:
            continue
        histograms[name] = hd
    counters: dict[str, float] = {}
    for name, value in cur.counters.items():
        if name not in prev.counters:
            if from_zero:
                counters[name] = value
            continue
        before_value = prev.counters[name]
        if value < before_value:
            reset = True
            if not engine_left:
                counters[name] = value
        else:
            counters[name] = value - before_value
    return IntervalDelta(
        target=target,
        model_name=cur.model_name,
        start=start,
        end=end,
        histograms=histograms,
        counters=counters,
        gauges=dict(cur.gauges),
        reset=reset,
        missing=cur.missing,
    )


def snapshot_deltas(prev: Snapshot, cur: Snapshot) -> list[IntervalDelta]:
    """Interval deltas of every stream of one target between two successful scrapes.

    ``start``/``end`` are the snapshots' ``ts``. Streams in both snapshots get
    :func:`interval_delta`. A stream new in ``cur`` counts from zero when ``prev``
    carried any other stream with series (the target was up and scraped: the stream's
    first values are work done since); when ``prev`` had no series at all there is no
    baseline and the stream is skipped this time. Streams gone from ``cur`` yield
    nothing. Ordered by model name.
    """
    if prev.target != cur.target:
        raise ValueError(f"snapshots of different targets: {prev.target!r} vs {cur.target!r}")
    if not cur.ts > prev.ts:
        raise ValueError(f"snapshot times must increase: {prev.ts} then {cur.ts}")
    prev_up = any(_has_series(s) for s in prev.streams.values())
    out: list[IntervalDelta] = []
    for key in sorted(cur.streams):
        stream = cur.streams[key]
        before = prev.streams.get(key)
        if before is None:
            if not prev_up:
                continue
            before = StreamSnapshot(model_name=stream.model_name)
            out.append(
                interval_delta(
                    before,
                    stream,
                    target=cur.target,
                    start=prev.ts,
                    end=cur.ts,
                    new_series_from_zero=True,
                )
            )
            continue
        out.append(interval_delta(before, stream, target=cur.target, start=prev.ts, end=cur.ts))
    return out
