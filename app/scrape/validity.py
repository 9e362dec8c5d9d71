"""Which values of the signals phasewatch uses are possible, and which series repeat.

The exposition format allows any float (``NaN``, ``±Inf``, negative numbers) in any
family, and the parser takes them all. Only the families ``app.scrape.normalize`` turns
into signals are judged here, by what each one means (docs/vllm-signals.md):

* Histograms (latencies and token counts): every cumulative bucket finite, at least 0 and
  not below the bucket before it (the ``+Inf`` bucket last); ``_count`` finite and at
  least 0; ``_sum`` finite and at least 0 (vLLM observes no negative durations or token
  counts, and a delta takes a falling ``_sum`` for a restart, as Prometheus does).
* Counters (``*_total``, ``request_success_total``): finite and at least 0.
* ``running`` and ``waiting``: request counts, finite and at least 0.
* ``kv_usage``: ``kv_cache_usage_perc`` (and the older ``gpu_cache_usage_perc``) is the
  fraction of KV blocks in use, 0..1 ("1 means 100 percent usage"); a value outside is
  not a usage.
* ``prefix_hit_rate`` (V0): a fraction 0..1, or -1 for "prefix caching disabled".

A NaN counter or gauge is invalid too: it says nothing, and a window would carry it on.

Duplicate series: the same metric name and label set twice on one page (labels compare
sorted, so the order they are written in does not matter). Prometheus refuses such a
scrape ("duplicate sample for timestamp"); phasewatch uses the first copy when the copies
agree (a page written out twice) and leaves the signal out when they do not (there is no
telling which copy is true).
"""

from __future__ import annotations

import math
from collections.abc import Container, Sequence
from operator import itemgetter, le

from app.model import Sample

__all__ = ["counter_ok", "cumulative_ok", "gauge_ok", "repeated"]

_SERIES = itemgetter(0, 1)  # a sample's name and labels


def counter_ok(value: float) -> bool:
    """Whether a counter (or a histogram's ``_count``) value is possible."""
    return 0.0 <= value < math.inf  # False for NaN


def gauge_ok(signal: str, value: float) -> bool:
    """Whether ``value`` is possible for the canonical gauge ``signal``."""
    if signal == "kv_usage":
        return 0.0 <= value <= 1.0
    if signal == "prefix_hit_rate":
        return 0.0 <= value <= 1.0 or value == -1.0
    return 0.0 <= value < math.inf


def cumulative_ok(counts: Sequence[float], total: float, count: float) -> bool:
    """Whether one histogram series is possible: ``counts`` are its cumulative buckets in
    ascending bound order, the ``+Inf`` bucket last; ``total`` its ``_sum``."""
    if not counts:
        return False
    return (
        counts[0] >= 0.0
        and math.isfinite(counts[-1])
        and all(map(le, counts, counts[1:]))  # ascending; False at a NaN
        and 0.0 <= total < math.inf
        and 0.0 <= count < math.inf
    )


def repeated(samples: Sequence[Sample], used: Container[str]) -> list[tuple[int, int]]:
    """Return ``(index, index of its first copy)`` of every later copy of a series whose
    name is in ``used``, in page order; [] when no series repeats (the usual page, told
    by one set built in C)."""
    keys = list(map(_SERIES, samples))
    if len(set(keys)) == len(keys):
        return []
    first: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {}
    out: list[tuple[int, int]] = []
    for index, key in enumerate(keys):
        if key[0] in used:
            seen = first.setdefault(key, index)
            if seen != index:
                out.append((index, seen))
    return out
