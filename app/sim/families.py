"""vLLM's metric families per version, as data over a replica's state.

Names, HELP texts, labels, buckets and order follow ``docs/vllm-signals.md`` and the
generated fixtures: ``0.33`` (V1, ``engine`` label, ``_created`` families), ``0.10`` (V1
plus the deprecated ``gpu_cache_usage_perc``, ``gpu_prefix_cache_*`` and
``time_per_output_token_seconds`` twins, as 0.10.2 printed them), ``0.6`` (V0 names,
``model_name`` only, children created lazily: a family has no samples until its first
observation, and no ``_created`` families; its list is ``app.sim.families_v0``). What a
family is made of: ``app.sim.family_parts``.
"""

from __future__ import annotations

from app.sim.connector import KV_FETCH_HELP, connector_families
from app.sim.engine import Replica
from app.sim.families_sglang import sglang_families
from app.sim.families_v0 import v0_families
from app.sim.family_parts import Child, Family, Source, Value, const, reader
from app.sim.metrics import REJECTION_REASONS, SUCCESS_REASONS, Hist, MetricState


def families(src: Source, version: str, model_name: str) -> list[Family]:
    """The families of ``version`` in the order vLLM registers them ("sglang": SGLang's
    families, ``app.sim.families_sglang``)."""
    if version == "0.6":
        return v0_families(src, model_name)
    if version == "sglang":
        return sglang_families(src, model_name)
    v10 = version == "0.10"
    page = _Page({"engine": "0", "model_name": model_name})
    _spec_decode(page, src.m)
    if src.connector is not None and not v10:
        # The KV connector's families come next (``PrometheusStatLogger.__init__``).
        page.out.extend(connector_families(src.connector, page.base))
    _scheduler(page, src, v10)
    _prefix_cache(page, src.m, v10)
    _tokens(page, src.m, v10)
    _requests(page, src.m, v10, model_name)
    _histograms(page, src.m, v10)
    info = {**src.cache_labels, "engine": "0"}
    page.out.append(
        Family(
            "gauge",
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            [Child(info, const(1.0))],
            False,
        )
    )
    return page.out


class _Page:
    """A V1 page's families as they are registered: one child per family of the
    ``base`` labels (``engine``, ``model_name``), or one per label value; counters and
    histograms with their ``_created`` families."""

    def __init__(self, base: dict[str, str]) -> None:
        self.base = base
        self.created = True
        self.out: list[Family] = []

    def gauge(self, name: str, help_: str, value: Value) -> None:
        self.out.append(Family("gauge", name, help_, [Child(dict(self.base), value)], False))

    def counter(self, name: str, help_: str, value: Value) -> None:
        kids = [Child(dict(self.base), value)]
        self.out.append(Family("counter", name, help_, kids, self.created))

    def labelled(self, kind: str, name: str, help_: str, key: str, items: dict[str, Value]) -> None:
        kids = [Child({**self.base, key: k}, v) for k, v in items.items()]
        self.out.append(Family(kind, name, help_, kids, self.created and kind == "counter"))

    def hist(self, name: str, help_: str, h: Hist) -> None:
        kids = [Child(dict(self.base), lambda: h)]
        self.out.append(Family("histogram", name, help_, kids, self.created))


def _spec_decode(page: _Page, m: MetricState) -> None:
    """vLLM registers its spec-decode counters first (vllm/v1/spec_decode/metrics.py),
    when the server speculates."""
    if not m.spec_tokens:
        return
    page.counter(
        "vllm:spec_decode_num_drafts",
        "Number of spec decoding drafts.",
        lambda: m.spec_drafts,
    )
    page.counter(
        "vllm:spec_decode_num_draft_tokens",
        "Number of draft tokens.",
        lambda: m.spec_draft_tokens,
    )
    page.counter(
        "vllm:spec_decode_num_accepted_tokens",
        "Number of accepted tokens.",
        lambda: m.spec_accepted_tokens,
    )
    page.labelled(
        "counter",
        "vllm:spec_decode_num_accepted_tokens_per_pos",
        "Accepted tokens per draft position.",
        "position",
        {str(i): _position(m, i) for i in range(m.spec_tokens)},
    )


def _scheduler(page: _Page, src: Source, v10: bool) -> None:
    """The scheduler's gauges: running, waiting (by reason; 0.10: the deprecated cache
    twins instead), KV fetches in flight, sleep state, KV usage."""
    m = src.m
    page.gauge(
        "vllm:num_requests_running", "Number of requests in model execution batches.", src.running
    )
    page.gauge(
        "vllm:num_requests_waiting", "Number of requests waiting to be processed.", src.waiting
    )
    if v10:
        page.gauge(
            "vllm:gpu_cache_usage_perc",
            "GPU KV-cache usage. 1 means 100 percent usage."
            "DEPRECATED: Use vllm:kv_cache_usage_perc instead.",
            src.kv_usage,
        )
        page.counter(
            "vllm:gpu_prefix_cache_queries",
            "GPU prefix cache queries, in terms of number "
            "of queriedtokens. DEPRECATED: Use vllm:prefix_cache_queries instead.",
            lambda: m.prefix_queries,
        )
        page.counter(
            "vllm:gpu_prefix_cache_hits",
            "GPU prefix cache hits, in terms of number of "
            "cached tokens. DEPRECATED: Use vllm:prefix_cache_hits instead.",
            lambda: m.prefix_hits,
        )
    else:
        page.labelled(
            "gauge",
            "vllm:num_requests_waiting_by_reason",
            _WAITING_BY_REASON_HELP,
            "reason",
            {
                "capacity": lambda: src.waiting() - src.deferred(),
                "deferred": src.deferred,
            },
        )
        if src.kv_fetch is not None:
            # Only on a KV consumer (``kv_transfer_config.is_kv_consumer``).
            page.labelled(
                "gauge", "vllm:num_requests_kv_fetch_by_stage", KV_FETCH_HELP, "stage", src.kv_fetch
            )
        page.labelled(
            "gauge",
            "vllm:engine_sleep_state",
            _SLEEP_HELP,
            "sleep_state",
            {"awake": const(1.0), "weights_offloaded": const(0.0), "discard_all": const(0.0)},
        )
    page.gauge(
        "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", src.kv_usage
    )


def _prefix_cache(page: _Page, m: MetricState, v10: bool) -> None:
    """The prefix cache's counters (after 0.10 also the external and multi-modal ones)."""
    page.counter(
        "vllm:prefix_cache_queries",
        "Prefix cache queries, in terms of number of queried tokens.",
        lambda: m.prefix_queries,
    )
    page.counter(
        "vllm:prefix_cache_hits",
        "Prefix cache hits, in terms of number of cached tokens.",
        lambda: m.prefix_hits,
    )
    if v10:
        return
    zero = const(0.0)
    page.counter(
        "vllm:external_prefix_cache_queries",
        "External prefix cache queries from KV "
        "connector cross-instance cache sharing, in terms of number of queried tokens.",
        lambda: m.external_queries,
    )
    page.counter(
        "vllm:external_prefix_cache_hits",
        "External prefix cache hits from KV "
        "connector cross-instance cache sharing, in terms of number of cached tokens.",
        lambda: m.external_hits,
    )
    page.counter(
        "vllm:mm_cache_queries",
        "Multi-modal cache queries, in terms of number of queried items.",
        zero,
    )
    page.counter(
        "vllm:mm_cache_hits",
        "Multi-modal cache hits, in terms of number of cached items.",
        zero,
    )


def _tokens(page: _Page, m: MetricState, v10: bool) -> None:
    """Preemptions and the token counters: prompt (after 0.10 by source and cached, by
    cache tier), generation."""
    page.counter(
        "vllm:num_preemptions",
        "Cumulative number of preemption from the engine.",
        lambda: m.preemptions,
    )
    page.counter(
        "vllm:prompt_tokens", "Number of prefill tokens processed.", lambda: m.prompt_tokens
    )
    if not v10:
        page.labelled(
            "counter",
            "vllm:prompt_tokens_by_source",
            "Number of prompt tokens by source.",
            "source",
            {
                "local_compute": lambda: m.prompt_local_compute,
                "local_cache_hit": lambda: m.prompt_cache_hit,
                "external_kv_transfer": lambda: m.prompt_external,
            },
        )
        page.counter(
            "vllm:prompt_tokens_cached",
            "Number of cached prompt tokens (local + external).",
            lambda: m.prompt_cache_hit + m.prompt_external,
        )
        # The NIXL connector attributes its hits to p2p (``NixlConnector._cache_hit_source``).
        tiers: dict[str, Value] = {"device": lambda: m.prompt_cache_hit}
        for tier in ("host", "p2p", "disk", "external_unspecified"):
            tiers[tier] = (lambda: m.prompt_external) if tier == "p2p" else const(0.0)
        page.labelled(
            "counter",
            "vllm:prompt_tokens_cached_by_source",
            _CACHED_BY_SOURCE_HELP,
            "source",
            tiers,
        )
    page.counter(
        "vllm:generation_tokens",
        "Number of generation tokens processed.",
        lambda: m.generation_tokens,
    )


def _requests(page: _Page, m: MetricState, v10: bool, model_name: str) -> None:
    """Requests finished, by reason, and (after 0.10) admissions refused, by reason."""
    reasons = SUCCESS_REASONS[:3] if v10 else SUCCESS_REASONS
    page.labelled(
        "counter",
        "vllm:request_success",
        "Count of successfully processed requests.",
        "finished_reason",
        {r: reader(m.success, r) for r in reasons},
    )
    if v10:
        return
    kids = [
        Child({"model_name": model_name, "reason": r}, reader(m.rejections, r))
        for r in REJECTION_REASONS
    ]
    page.out.append(
        Family(
            "counter",
            "vllm:admission_rejections",
            "Number of admission attempts rejected by a queue limit, by reason.",
            kids,
            page.created,
        )
    )


def _histograms(page: _Page, m: MetricState, v10: bool) -> None:
    """The histograms: request sizes and parameters, then latencies, then the time in
    each phase of a request."""
    hist = page.hist
    hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", m.req_prompt_tokens)
    hist(
        "vllm:request_generation_tokens", "Number of generation tokens processed.", m.req_gen_tokens
    )
    hist(
        "vllm:iteration_tokens_total",
        "Histogram of number of tokens per engine_step.",
        m.iteration_tokens,
    )
    hist(
        "vllm:request_max_num_generation_tokens",
        "Histogram of maximum number of requested generation tokens.",
        m.req_max_gen_tokens,
    )
    hist("vllm:request_params_n", "Histogram of the n request parameter.", m.req_params_n)
    hist(
        "vllm:request_params_max_tokens",
        "Histogram of the max_tokens request parameter.",
        m.req_params_max_tokens,
    )
    hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", m.ttft)
    if v10:
        hist(
            "vllm:time_per_output_token_seconds",
            "Histogram of time per output token in "
            "seconds.DEPRECATED: Use vllm:inter_token_latency_seconds instead.",
            m.itl,
        )
    hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", m.itl)
    if not v10:
        hist(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            m.tpot,
        )
    hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", m.e2e)
    for key, h in (
        ("queue", m.queue),
        ("inference", m.inference),
        ("prefill", m.prefill),
        ("decode", m.decode),
    ):
        phase = {"queue": "WAITING", "inference": "RUNNING"}.get(key, key.upper())
        hist(
            f"vllm:request_{key}_time_seconds",
            f"Histogram of time spent in {phase} phase for request.",
            h,
        )
    if not v10:
        hist(
            "vllm:request_num_preemptions",
            "Histogram of the number of times a request was preempted.",
            m.req_num_preemptions,
        )
        hist(
            "vllm:request_prefill_kv_computed_tokens",
            "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
            m.req_prefill_kv_computed,
        )


def _position(m: MetricState, i: int) -> Value:
    """A reader of the accepted tokens at draft position ``i``."""
    return lambda: m.spec_accepted_per_pos[i]


_WAITING_BY_REASON_HELP = (
    "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for "
    "scheduling capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV "
    "transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting."
)
_SLEEP_HELP = (
    "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is "
    "awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2."
)
_CACHED_BY_SOURCE_HELP = (
    "Prefix-cache hit tokens by the cache tier that supplied them: device (local HBM), host "
    "(offloaded to DRAM), disk, p2p (transferred from another vLLM instance) or "
    "external_unspecified. Counted at admission; sums to vllm:prefix_cache_hits + "
    "vllm:external_prefix_cache_hits."
)


def cache_labels(replica: Replica) -> dict[str, str]:
    """``vllm:cache_config_info`` labels (V1 as in the 0.33 fixture; V0 adds its swap fields)."""
    cfg = replica.config
    e = cfg.engine
    labels = {
        "block_size": str(e.block_size),
        "cache_dtype": "auto" if cfg.model.kv_bits == 16 else "fp8",
        "enable_prefix_caching": str(e.enable_prefix_caching),
        "gpu_memory_utilization": str(float(e.gpu_memory_utilization)),
        "num_gpu_blocks": str(cfg.num_gpu_blocks),
    }
    if replica.version == "0.6":
        swap = 4 * 2**30
        labels.update(
            cpu_offload_gb="0",
            num_cpu_blocks=str(swap // (e.block_size * cfg.model.kv_bytes_per_token)),
            num_gpu_blocks_override=str(e.num_gpu_blocks_override),
            sliding_window="None",
            swap_space_bytes=str(float(swap)),
        )
    return labels


def replica_families(replica: Replica, model_name: str | None = None) -> list[Family]:
    """The families of ``replica``'s page; ``model_name`` replaces its served name."""
    src = Source(
        replica.metrics,
        running=lambda: float(replica.num_running),
        waiting=lambda: float(replica.num_waiting),
        kv_usage=lambda: replica.kv_usage,
        cache_labels=cache_labels(replica),
        deferred=lambda: float(replica.num_deferred),
        connector=replica.connector,
        kv_fetch=replica.kv_fetch,
    )
    return families(src, replica.version, model_name or replica.config.served_model_name)
