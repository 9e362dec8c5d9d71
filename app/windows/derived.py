"""Numbers derived from a window: the canonical names the diagnosis compares and names.

:func:`derive` fills a window's ``derived`` record (``app.model.Derived``) when the
window is built (``app.windows.aggregate``, ``app.fleet.aggregate``); the small helpers
below it read one number of a window each. Pure; every missing input gives None.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from app.model import Derived, GaugeStats, Quantile, Window

__all__ = [
    "derive",
    "finished_requests",
    "mean_gen_len",
    "mean_prompt_len",
    "prefix_hit_ratio",
    "quantile",
]


def prefix_hit_ratio(w: Window) -> float | None:
    """Prefix-cache hit ratio in the window: Δprefix_hits / Δprefix_queries.

    ``None`` when no query was counted. Without the counters (vLLM V0) it falls back to
    the last value of the V0 gauge ``prefix_hit_rate`` when that is ≥ 0 (-1 = caching
    off → ``None``). Unit-free, so the 0.8.x block-based counters give a ratio too.
    """
    return _hit_ratio(w.increases, w.gauges)


def _hit_ratio(increases: Mapping[str, float], gauges: Mapping[str, GaugeStats]) -> float | None:
    queries = increases.get("prefix_queries")
    hits = increases.get("prefix_hits")
    if queries is not None and hits is not None:
        return hits / queries if queries > 0 else None
    gauge = gauges.get("prefix_hit_rate")
    if gauge is not None and gauge.last is not None and gauge.last >= 0:
        return gauge.last
    return None


def _ratio(num: float | None, den: float | None) -> float | None:
    """num / den; None when either is unknown or den is not positive."""
    if num is None or den is None or not den > 0:
        return None
    return num / den


def _avg(gauges: Mapping[str, GaugeStats], name: str) -> float | None:
    g = gauges.get(name)
    return None if g is None else g.avg


def _queue_change(running: GaugeStats | None, waiting: GaugeStats | None) -> float | None:
    """(running + waiting) at the last gauge sample minus at the first; None if unknown."""
    if running is None or waiting is None:
        return None
    r0, r1, w0, w1 = running.first, running.last, waiting.first, waiting.last
    if r0 is None or r1 is None or w0 is None or w1 is None:
        return None
    return (r1 + w1) - (r0 + w0)


def _accepted_per_draft(
    increases: Mapping[str, float], gauges: Mapping[str, GaugeStats]
) -> float | None:
    """Accepted draft tokens per draft: vLLM's counters, else SGLang's accept length
    gauge (1 + accepted per step, its last decode log's) averaged over the window."""
    counted = _ratio(increases.get("spec_accepted_tokens"), increases.get("spec_drafts"))
    if counted is not None or "spec_drafts" in increases:
        return counted
    length = _avg(gauges, "spec_accept_length")
    return None if length is None or length < 1 else length - 1.0


def derive(
    *,
    covered: float,
    quantiles: Mapping[str, Mapping[str, Quantile]],
    means: Mapping[str, float | None],
    observations: Mapping[str, float],
    increases: Mapping[str, float],
    rates: Mapping[str, float | None],
    gauges: Mapping[str, GaugeStats],
    gauge_span: float,
) -> Derived:
    """The derived numbers of a window (``app.model.Derived``) from its parts.

    Every number is None when one of its inputs is missing, and a ratio is None when its
    denominator is 0 (no request finished, no prefix query, no draft, no time covered).
    Edge cases and estimates:

    * ``completion_rate``: the ``finished:*`` increases (every reason) per second; None
      when the page has no ``request_success`` series.
    * ``arrival_rate`` (an estimate, never read from the page: vLLM counts no arrivals):
      completions/s + rejections/s + Δ(running + waiting) / ``gauge_span``, the queue
      change taken between the window's first and last gauge samples (so it needs two
      samples of both gauges) while the completions cover the whole window; floored at
      0. Rejections count only where the page has ``admission_rejections`` (0.33+); older
      vLLM had no queue limit, so nothing was rejected. A stalled engine freezes its
      gauges (they are set from engine outputs), so a hang reads as no arrivals.
    * ``uncached_prompt_tokens_*``: prompt tokens that were computed, not found in the
      prefix cache: from ``prompt_tokens_local_compute`` (0.16+; the mean is per request
      that got its first token, Δ TTFT count), else the prompt tokens times
      (1 − ``prefix_cache_hit_rate``).
    * ``prefix_cache_hit_rate``: as :func:`prefix_hit_ratio`.
    * ``spec_decode_acceptance``: accepted / draft tokens; ``spec_decode_accepted_per_draft``
      accepted tokens per draft (vLLM's "mean acceptance length" is 1 + it); on SGLang,
      which counts no drafts, its ``spec_accept_length`` gauge's window average − 1 (the
      gauge is the last decode log's, every 40 steps by default: a sample, not a count),
      and no ``spec_decode_acceptance`` (the draft tokens per step are not on the page).
    * ``steps_per_s``, ``tokens_per_step_mean``, ``step_tokens_p99``: from the
      ``step_tokens`` histogram (``vllm:iteration_tokens_total``), one observation per
      engine step: its Δcount per second, its mean and its p99 (its buckets mislead
      under chunked prefill: ``docs/concepts.md``, "Fitting a server's step time").
    """
    completion, arrival, rejection = _flow(covered, rates, gauges, gauge_span)
    hit = _hit_ratio(increases, gauges)
    prompt_rate = rates.get("prompt_tokens")
    prompt_mean = means.get("prompt_len")
    uncached_rate, uncached_mean = _uncached(increases, observations, rates, means, hit)
    steps = observations.get("step_tokens")
    step_p99 = quantiles.get("step_tokens", {}).get("p99")
    kv = gauges.get("kv_usage")
    return Derived(
        completion_rate=completion,
        arrival_rate=arrival,
        rejection_rate=rejection,
        prompt_tokens_mean=prompt_mean,
        output_tokens_mean=means.get("gen_len"),
        prompt_tokens_per_s=prompt_rate,
        generation_tokens_per_s=rates.get("generation_tokens"),
        uncached_prompt_tokens_per_s=uncached_rate,
        uncached_prompt_tokens_mean=uncached_mean,
        prefix_cache_hit_rate=hit,
        external_prefix_cache_hit_rate=_ratio(
            increases.get("external_prefix_hits"), increases.get("external_prefix_queries")
        ),
        spec_decode_acceptance=_ratio(
            increases.get("spec_accepted_tokens"), increases.get("spec_draft_tokens")
        ),
        spec_decode_accepted_per_draft=_accepted_per_draft(increases, gauges),
        steps_per_s=_ratio(steps, covered),
        tokens_per_step_mean=means.get("step_tokens"),
        step_tokens_p99=None if step_p99 is None else step_p99.value,
        preemptions_rate=rates.get("preemptions"),
        running_avg=_avg(gauges, "running"),
        waiting_avg=_avg(gauges, "waiting"),
        waiting_capacity_avg=_avg(gauges, "waiting_capacity"),
        waiting_deferred_avg=_avg(gauges, "waiting_deferred"),
        kv_usage_avg=None if kv is None else kv.avg,
        kv_usage_max=None if kv is None else kv.max,
    )


def _flow(
    covered: float,
    rates: Mapping[str, float | None],
    gauges: Mapping[str, GaugeStats],
    gauge_span: float,
) -> tuple[float | None, float | None, float | None]:
    """(completions/s, estimated arrivals/s, rejections/s) as :func:`derive` says."""
    finished = [r for name, r in rates.items() if name.startswith("finished:")]
    completion = None
    if finished and covered > 0:
        completion = math.fsum(r for r in finished if r is not None)
    rejection = rates.get("admission_rejections")
    queued = _queue_change(gauges.get("running"), gauges.get("waiting"))
    arrival = None
    if completion is not None and queued is not None and gauge_span > 0:
        arrival = max(0.0, completion + (rejection or 0.0) + queued / gauge_span)
    return completion, arrival, rejection


def _uncached(
    increases: Mapping[str, float],
    observations: Mapping[str, float],
    rates: Mapping[str, float | None],
    means: Mapping[str, float | None],
    hit: float | None,
) -> tuple[float | None, float | None]:
    """The uncached prompt tokens (per second, per request) as :func:`derive` says."""
    computed = increases.get("prompt_tokens_local_compute")
    if computed is not None:
        return rates.get("prompt_tokens_local_compute"), _ratio(computed, observations.get("ttft"))
    prompt_rate, prompt_mean = rates.get("prompt_tokens"), means.get("prompt_len")
    rate = None if prompt_rate is None or hit is None else prompt_rate * (1 - hit)
    mean = None if prompt_mean is None or hit is None else prompt_mean * (1 - hit)
    return rate, mean


def mean_prompt_len(w: Window) -> float | None:
    """Mean prompt length (tokens) of requests finished in the window: Δsum / Δcount."""
    return w.means.get("prompt_len")


def mean_gen_len(w: Window) -> float | None:
    """Mean generation length (tokens) of requests finished in the window."""
    return w.means.get("gen_len")


def finished_requests(w: Window) -> float | None:
    """Requests finished in the window, all reasons (``finished:*``); None if unseen."""
    values = [v for name, v in w.increases.items() if name.startswith("finished:")]
    return math.fsum(values) if values else None


def quantile(w: Window, signal: str, label: str) -> Quantile | None:
    """``w.quantiles[signal][label]``, or None when the signal is not in the window."""
    return w.quantiles.get(signal, {}).get(label)
