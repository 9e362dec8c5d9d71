"""Which vLLM families carry each canonical signal (docs/vllm-signals.md).

Where vLLM renamed a metric, a signal lists its families newest name first (the newest
one a stream carries wins). ``DISPATCH`` maps every sample name phasewatch reads to
what it is: its kind, its family and, for a histogram, which part (bucket, sum, count).

A family whose label splits it into different quantities (``reason`` of
``vllm:num_requests_waiting_by_reason``, ``source`` of
``vllm:prompt_tokens_by_source_total``) is read per label value: each value is a
signal of its own, gathered under the key ``family{label="value"}`` (``labelled_key``),
which is what ``GAUGE_SOURCES``/``COUNTER_SOURCES`` list for it. Label values not listed
are ignored (a newer vLLM may add one). Names, labels and versions of every family:
``docs/vllm-signals.md``.

SGLang's families (``sglang:``, ``python/sglang/srt/metrics/collector.py``) are further
names of the same signals, listed after vLLM's: a page carries one engine's families, so
the first a stream carries is its engine's. What each maps to: ``docs/sglang.md``.
"""

from __future__ import annotations

from collections.abc import Iterable

from app.model import (
    CORE_SIGNALS,
    COUNTER_SIGNALS,
    GAUGE_SIGNALS,
    HISTOGRAM_SIGNALS,
    OPTIONAL_COUNTER_SIGNALS,
    OPTIONAL_GAUGE_SIGNALS,
    OPTIONAL_HISTOGRAM_SIGNALS,
)

__all__ = [
    "ALL_SIGNALS",
    "CACHE_CONFIG_FAMILY",
    "COUNTER",
    "COUNTER_SOURCES",
    "DISPATCH",
    "ENGINE_PREFIXES",
    "FINISHED",
    "FINISHED_FAMILY",
    "GAUGE",
    "GAUGE_SOURCES",
    "HIST",
    "HISTOGRAM_SOURCES",
    "INFO",
    "COUNTERS_BY_LABEL",
    "GAUGES_BY_LABEL",
    "LCOUNTER",
    "LGAUGE",
    "OPTIONAL_SIGNALS",
    "SGLANG",
    "SGLANG_FINISHED_FAMILY",
    "VLLM",
    "Spec",
    "engine_kind_of",
    "labelled_key",
    "page_engine",
]

VLLM = "vllm:"
SGLANG = "sglang:"
ENGINE_PREFIXES: tuple[str, ...] = (VLLM, SGLANG)


def engine_kind_of(name: str) -> str | None:
    """The engine whose family ``name`` is ("vllm", "sglang"), or None."""
    if name.startswith(VLLM):
        return "vllm"
    if name.startswith(SGLANG):
        return "sglang"
    return None


def page_engine(types: Iterable[str], first_sample: str | None) -> str:
    """A page's engine: that of its first declared engine family (TYPE lines), else of
    its first sample; "" when neither says (no engine family on the page)."""
    for name in types:
        kind = engine_kind_of(name)
        if kind is not None:
            return kind
    if first_sample is not None:
        return engine_kind_of(first_sample) or ""
    return ""


# Canonical signal → vLLM families, newest name first.
HISTOGRAM_SOURCES: dict[str, tuple[str, ...]] = {
    "ttft": ("vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds"),
    "itl": (
        "vllm:inter_token_latency_seconds",
        "vllm:time_per_output_token_seconds",
        # SGLang: the newer name first; before it, time_per_output_token.
        "sglang:inter_token_latency_seconds",
        "sglang:time_per_output_token_seconds",
    ),
    "tpot": ("vllm:request_time_per_output_token_seconds",),
    "e2e": ("vllm:e2e_request_latency_seconds", "sglang:e2e_request_latency_seconds"),
    "queue_time": ("vllm:request_queue_time_seconds", "sglang:queue_time_seconds"),
    "prefill_time": ("vllm:request_prefill_time_seconds",),
    "decode_time": ("vllm:request_decode_time_seconds",),
    # SGLang: only with --collect-tokens-histogram.
    "prompt_len": ("vllm:request_prompt_tokens", "sglang:prompt_tokens_histogram"),
    "gen_len": ("vllm:request_generation_tokens", "sglang:generation_tokens_histogram"),
    # A histogram although its name ends in _total.
    "step_tokens": ("vllm:iteration_tokens_total",),
    # The NIXL KV connector (vllm/distributed/kv_transfer/kv_connector/v1/nixl/stats.py).
    "kv_xfer_time": ("vllm:nixl_xfer_time_seconds",),
    "kv_post_time": ("vllm:nixl_post_time_seconds",),
    "kv_xfer_bytes": ("vllm:nixl_bytes_transferred",),
    "kv_xfer_descriptors": ("vllm:nixl_num_descriptors",),
}
# Families read per label value: family → (label, {label value: signal}).
GAUGES_BY_LABEL: dict[str, tuple[str, dict[str, str]]] = {
    # 0.20+; the reasons sum to vllm:num_requests_waiting.
    "vllm:num_requests_waiting_by_reason": (
        "reason",
        {"capacity": "waiting_capacity", "deferred": "waiting_deferred"},
    ),
    # Only on a KV consumer (kv_role kv_consumer or kv_both): waiting requests by the
    # stage of their asynchronous KV load; the stages sum to the ones waiting for KV.
    "vllm:num_requests_kv_fetch_by_stage": (
        "stage",
        {
            "waiting_to_start": "kv_fetch_waiting_to_start",
            "in_progress": "kv_fetch_in_progress",
            "completed_waiting": "kv_fetch_completed_waiting",
        },
    ),
}
COUNTERS_BY_LABEL: dict[str, tuple[str, dict[str, str]]] = {
    # 0.16+; the sources sum to vllm:prompt_tokens_total.
    "vllm:prompt_tokens_by_source_total": (
        "source",
        {
            "local_compute": "prompt_tokens_local_compute",
            "local_cache_hit": "prompt_tokens_local_cache_hit",
            "external_kv_transfer": "prompt_tokens_external_kv_transfer",
        },
    ),
}


def labelled_key(family: str, label: str, value: str) -> str:
    """The key one label value of a labelled family is gathered under."""
    return f'{family}{{{label}="{value}"}}'


def _by_label(table: dict[str, tuple[str, dict[str, str]]]) -> dict[str, tuple[str, ...]]:
    return {
        signal: (labelled_key(family, label, value),)
        for family, (label, signals) in table.items()
        for value, signal in signals.items()
    }


GAUGE_SOURCES: dict[str, tuple[str, ...]] = {
    "running": ("vllm:num_requests_running", "sglang:num_running_reqs"),
    "waiting": ("vllm:num_requests_waiting", "sglang:num_queue_reqs"),
    # SGLang: the share of the KV pool's tokens in use.
    "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"),
    "prefix_hit_rate": ("vllm:gpu_prefix_cache_hit_rate",),
    # SGLang's accept length of speculative decoding (its spec_accept_rate is not read:
    # releases differ on whether it counts the bonus token).
    "spec_accept_length": ("sglang:spec_accept_length",),
    **_by_label(GAUGES_BY_LABEL),
}
COUNTER_SOURCES: dict[str, tuple[str, ...]] = {
    # SGLang: requests retracted (sent back to the queue for KV room), as a counter.
    "preemptions": ("vllm:num_preemptions_total", "sglang:num_retracted_requests_total"),
    "prompt_tokens": ("vllm:prompt_tokens_total", "sglang:prompt_tokens_total"),
    "generation_tokens": ("vllm:generation_tokens_total", "sglang:generation_tokens_total"),
    # SGLang's radix cache: prompt tokens are the queries, cached prompt tokens the hits
    # (its cache_hit_rate gauge is the last logged batch's, 0 on a decode log: not read).
    "prefix_queries": (
        "vllm:prefix_cache_queries_total",
        "vllm:gpu_prefix_cache_queries_total",
        "sglang:prompt_tokens_total",
    ),
    "prefix_hits": (
        "vllm:prefix_cache_hits_total",
        "vllm:gpu_prefix_cache_hits_total",
        "sglang:cached_tokens_total",
    ),
    **_by_label(COUNTERS_BY_LABEL),
    "external_prefix_queries": ("vllm:external_prefix_cache_queries_total",),
    "external_prefix_hits": ("vllm:external_prefix_cache_hits_total",),
    # V1 (vllm/v1/spec_decode/metrics.py) when speculative decoding is configured; V0
    # printed the draft and accepted token counters under the same names.
    "spec_drafts": ("vllm:spec_decode_num_drafts_total",),
    "spec_draft_tokens": ("vllm:spec_decode_num_draft_tokens_total",),
    "spec_accepted_tokens": ("vllm:spec_decode_num_accepted_tokens_total",),
    # 0.33+, labels model_name and reason only (no engine): summed over reasons.
    "admission_rejections": ("vllm:admission_rejections_total",),
    # The NIXL KV connector: failed transfers include failed handshakes and
    # notifications; expired KV is counted on the prefill (producer) instance.
    "kv_xfer_failures": ("vllm:nixl_num_failed_transfers_total",),
    "kv_failed_notifications": ("vllm:nixl_num_failed_notifications_total",),
    "kv_expired": ("vllm:nixl_num_kv_expired_reqs_total",),
    "kv_notifications_after_expiry": ("vllm:nixl_num_notifications_after_expiry_total",),
}
FINISHED_FAMILY = "vllm:request_success_total"
# SGLang counts finished requests without a reason: read as finished:any.
SGLANG_FINISHED_FAMILY = "sglang:num_requests_total"
SGLANG_FINISHED_REASON = "any"
CACHE_CONFIG_FAMILY = "vllm:cache_config_info"
# Core signals first, then the others in the order of app.model.
ALL_SIGNALS: tuple[str, ...] = CORE_SIGNALS + tuple(
    s for s in HISTOGRAM_SIGNALS + GAUGE_SIGNALS + COUNTER_SIGNALS if s not in CORE_SIGNALS
)
# Read when present, never reported missing (app.model).
OPTIONAL_SIGNALS: tuple[str, ...] = (
    OPTIONAL_HISTOGRAM_SIGNALS + OPTIONAL_GAUGE_SIGNALS + OPTIONAL_COUNTER_SIGNALS
)

# What a sample name is: (kind, family, part); part is "bucket", "sum" or "count" for a
# histogram, the label that splits it for a labelled family, "" otherwise.
Spec = tuple[int, str, str]
HIST, GAUGE, COUNTER, FINISHED, INFO, LGAUGE, LCOUNTER = range(7)


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
    # A labelled family's samples are sorted by label value while gathering; its keys
    # (family{label="value"}) are never sample names, so they leave the table.
    for kind, labelled in ((LGAUGE, GAUGES_BY_LABEL), (LCOUNTER, COUNTERS_BY_LABEL)):
        for family, (label, signals) in labelled.items():
            for value in signals:
                table.pop(labelled_key(family, label, value), None)
            table[family] = (kind, family, label)
    table[FINISHED_FAMILY] = (FINISHED, FINISHED_FAMILY, "")
    # The part of a FINISHED spec: the reason of a series without finished_reason.
    table[SGLANG_FINISHED_FAMILY] = (FINISHED, SGLANG_FINISHED_FAMILY, SGLANG_FINISHED_REASON)
    table[CACHE_CONFIG_FAMILY] = (INFO, CACHE_CONFIG_FAMILY, "")
    return table


DISPATCH: dict[str, Spec] = _dispatch_table()
