"""Which vLLM families carry each canonical signal (DESIGN.md, "Canonical signals").

Where vLLM renamed a metric, a signal lists its families newest name first (the newest
one a stream carries wins). ``DISPATCH`` maps every sample name phasewatch reads to
what it is: its kind, its family and, for a histogram, which part (bucket, sum, count).
"""

from __future__ import annotations

from app.model import CORE_SIGNALS, COUNTER_SIGNALS, GAUGE_SIGNALS, HISTOGRAM_SIGNALS

__all__ = [
    "ALL_SIGNALS",
    "CACHE_CONFIG_FAMILY",
    "COUNTER",
    "COUNTER_SOURCES",
    "DISPATCH",
    "FINISHED",
    "FINISHED_FAMILY",
    "GAUGE",
    "GAUGE_SOURCES",
    "HIST",
    "HISTOGRAM_SOURCES",
    "INFO",
    "VLLM",
    "Spec",
]

VLLM = "vllm:"

# Canonical signal → vLLM families, newest name first.
HISTOGRAM_SOURCES: dict[str, tuple[str, ...]] = {
    "ttft": ("vllm:time_to_first_token_seconds",),
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    "tpot": ("vllm:request_time_per_output_token_seconds",),
    "e2e": ("vllm:e2e_request_latency_seconds",),
    "queue_time": ("vllm:request_queue_time_seconds",),
    "prefill_time": ("vllm:request_prefill_time_seconds",),
    "decode_time": ("vllm:request_decode_time_seconds",),
    "prompt_len": ("vllm:request_prompt_tokens",),
    "gen_len": ("vllm:request_generation_tokens",),
    # A histogram although its name ends in _total.
    "step_tokens": ("vllm:iteration_tokens_total",),
}
GAUGE_SOURCES: dict[str, tuple[str, ...]] = {
    "running": ("vllm:num_requests_running",),
    "waiting": ("vllm:num_requests_waiting",),
    "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    "prefix_hit_rate": ("vllm:gpu_prefix_cache_hit_rate",),
}
COUNTER_SOURCES: dict[str, tuple[str, ...]] = {
    "preemptions": ("vllm:num_preemptions_total",),
    "prompt_tokens": ("vllm:prompt_tokens_total",),
    "generation_tokens": ("vllm:generation_tokens_total",),
    "prefix_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prefix_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
}
FINISHED_FAMILY = "vllm:request_success_total"
CACHE_CONFIG_FAMILY = "vllm:cache_config_info"
# Core signals first, then the others in the order of app.model.
ALL_SIGNALS: tuple[str, ...] = CORE_SIGNALS + tuple(
    s for s in HISTOGRAM_SIGNALS + GAUGE_SIGNALS + COUNTER_SIGNALS if s not in CORE_SIGNALS
)

# What a sample name is: (kind, family, part); part is "bucket", "sum" or "count" for a
# histogram, "" otherwise.
Spec = tuple[int, str, str]
HIST, GAUGE, COUNTER, FINISHED, INFO = range(5)


def _dispatch_table() -> dict[str, Spec]:
    """Map every sample name we read to (kind, family, part)."""
    table: dict[str, Spec] = {}
    for families in HISTOGRAM_SOURCES.values():
        for family in families:
            for part in ("bucket", "sum", "count"):
                table[f"{family}_{part}"] = (HIST, family, part)
    for families in GAUGE_SOURCES.values():
        for family in families:
            table[family] = (GAUGE, family, "")
    for families in COUNTER_SOURCES.values():
        for family in families:
            table[family] = (COUNTER, family, "")
    table[FINISHED_FAMILY] = (FINISHED, FINISHED_FAMILY, "")
    table[CACHE_CONFIG_FAMILY] = (INFO, CACHE_CONFIG_FAMILY, "")
    return table


DISPATCH: dict[str, Spec] = _dispatch_table()
