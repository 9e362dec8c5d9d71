"""Fewer chart points without losing the spikes (pure).

Consecutive points are grouped into at most ``max_points`` buckets. Within a bucket the
p99 lines, the maxima (waiting max, KV max), the class and the SLO judgements keep their
*worst* value — the largest p99 (with its "≥ bound" flag), the most severe class, "over"
before "unproven" before "within" — so a one-window spike is
still drawn at its full height; p50 and averages take the mean; preemptions and request
counts are summed. A bucket is drawn at its last point's time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from app.read.points import Point
from app.ui import palette


def _max_ge(values: Sequence[tuple[float | None, bool]]) -> tuple[float | None, bool]:
    """The largest value and its flag; a lower bound wins a tie with an exact value."""
    best: tuple[float | None, bool] = (None, False)
    for v, ge in values:
        if v is None:
            continue
        if best[0] is None or v > best[0] or (v == best[0] and ge and not best[1]):
            best = (v, ge)
    return best


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return math.fsum(present) / len(present) if present else None


def _max(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _sum(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return math.fsum(present) if present else None


_VERDICT_RANK = {"over": 3, "unproven": 2, "within": 1}


def _worst_verdict(values: Sequence[str | None]) -> str | None:
    """The strongest SLO judgement of a group: over, then unproven, then within."""
    return max(values, key=lambda v: _VERDICT_RANK.get(v or "", 0), default=None)


def merge(group: Sequence[Point]) -> Point:
    """One point standing for a group of consecutive points."""
    if len(group) == 1:
        return group[0]
    worst = max(group, key=lambda p: palette.severity(p.cls))
    t99, t99_ge = _max_ge([(p.ttft_p99, p.ttft_p99_ge) for p in group])
    i99, i99_ge = _max_ge([(p.itl_p99, p.itl_p99_ge) for p in group])
    return Point(
        end=group[-1].end,
        cls=worst.cls,
        sub_cause=worst.sub_cause,
        ttft_p50=_mean([p.ttft_p50 for p in group]),
        ttft_p50_ge=any(p.ttft_p50_ge for p in group),
        ttft_p99=t99,
        ttft_p99_ge=t99_ge,
        itl_p50=_mean([p.itl_p50 for p in group]),
        itl_p50_ge=any(p.itl_p50_ge for p in group),
        itl_p99=i99,
        itl_p99_ge=i99_ge,
        running_avg=_mean([p.running_avg for p in group]),
        waiting_avg=_mean([p.waiting_avg for p in group]),
        waiting_max=_max([p.waiting_max for p in group]),
        kv_max=_max([p.kv_max for p in group]),
        preemptions=_sum([p.preemptions for p in group]),
        requests=math.fsum(p.requests for p in group),
        ttft_slo=_worst_verdict([p.ttft_slo for p in group]),
        itl_slo=_worst_verdict([p.itl_slo for p in group]),
        arrivals_per_s=_mean([p.arrivals_per_s for p in group]),
        completions_per_s=_mean([p.completions_per_s for p in group]),
        ttft_over=_sum([p.ttft_over for p in group]),
    )


def downsample(points: Sequence[Point], max_points: int) -> list[Point]:
    """At most ``max_points`` points; the input when it is already small enough."""
    if max_points < 1:
        raise ValueError("max_points must be at least 1")
    n = len(points)
    if n <= max_points:
        return list(points)
    size = math.ceil(n / max_points)
    return [merge(points[i : i + size]) for i in range(0, n, size)]
