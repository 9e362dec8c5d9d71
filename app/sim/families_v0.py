"""vLLM 0.6.3 (V0) metric families: ``model_name`` only, no ``_created``, lazy children.

V0 creates a label child on first use, so until the first stats log a family prints only
its HELP and TYPE lines, a histogram has no samples until its first observation, and
``request_success`` shows only the reasons seen (``docs/vllm-signals.md``).
"""

from __future__ import annotations

from collections.abc import Callable

from app.sim.family_parts import Child, Family, Source, Value, const, reader
from app.sim.metrics import SUCCESS_REASONS, Hist, MetricState


def v0_families(src: Source, model_name: str) -> list[Family]:
    """vLLM 0.6.3 V0: ``model_name`` only; children appear after the first stats log."""
    page = _Page(src.m, {"model_name": model_name})
    _scheduler(page, src)
    _tokens(page, src.m)
    _histograms(page, src.m)
    _requests(page, src.m)
    _spec_decode_and_throughput(page, src.m)
    page.out.append(
        Family(
            "gauge",
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            [Child(dict(src.cache_labels), const(1.0))],
            False,
        )
    )
    return page.out


class _Page:
    """A V0 page's families as they are registered: one child of the ``base`` labels
    each, shown once the engine logged its first stats (a histogram: once observed)."""

    def __init__(self, m: MetricState, base: dict[str, str]) -> None:
        self.m = m
        self.base = base
        self.out: list[Family] = []

    def started(self) -> bool:
        return self.m.started

    def simple(
        self,
        kind: str,
        name: str,
        help_: str,
        value: Value | None,
        visible: Callable[[], bool] | None = None,
    ) -> None:
        shown = self.started if visible is None else visible
        kids = [] if value is None else [Child(dict(self.base), value, shown)]
        self.out.append(Family(kind, name, help_, kids, False))

    def hist(self, name: str, help_: str, h: Hist) -> None:
        kid = Child(dict(self.base), lambda: h, lambda: h.count > 0)
        self.out.append(Family("histogram", name, help_, [kid], False))


def _scheduler(page: _Page, src: Source) -> None:
    """The scheduler's and the caches' gauges."""
    m = src.m
    caching = src.cache_labels.get("enable_prefix_caching") == "True"

    def hit_rate() -> float:
        if not caching:
            return -1.0
        q = m.prefix_block_queries
        return m.prefix_block_hits / q if q else 0.0

    simple = page.simple
    simple(
        "gauge",
        "vllm:num_requests_running",
        "Number of requests currently running on GPU.",
        src.running,
    )
    simple(
        "gauge",
        "vllm:num_requests_waiting",
        "Number of requests waiting to be processed.",
        src.waiting,
    )
    simple("gauge", "vllm:num_requests_swapped", "Number of requests swapped to CPU.", const(0.0))
    simple(
        "gauge",
        "vllm:gpu_cache_usage_perc",
        "GPU KV-cache usage. 1 means 100 percent usage.",
        src.kv_usage,
    )
    simple(
        "gauge",
        "vllm:cpu_cache_usage_perc",
        "CPU KV-cache usage. 1 means 100 percent usage.",
        const(0.0),
    )
    simple(
        "gauge", "vllm:cpu_prefix_cache_hit_rate", "CPU prefix cache block hit rate.", const(-1.0)
    )
    simple("gauge", "vllm:gpu_prefix_cache_hit_rate", "GPU prefix cache block hit rate.", hit_rate)


def _tokens(page: _Page, m: MetricState) -> None:
    """Preemptions and the token counters."""
    page.simple(
        "counter",
        "vllm:num_preemptions",
        "Cumulative number of preemption from the engine.",
        lambda: m.preemptions,
    )
    page.simple(
        "counter",
        "vllm:prompt_tokens",
        "Number of prefill tokens processed.",
        lambda: m.prompt_tokens,
    )
    page.simple(
        "counter",
        "vllm:generation_tokens",
        "Number of generation tokens processed.",
        lambda: m.generation_tokens,
    )


def _histograms(page: _Page, m: MetricState) -> None:
    """Latencies, then request sizes and parameters."""
    hist = page.hist
    hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", m.ttft)
    hist(
        "vllm:time_per_output_token_seconds",
        "Histogram of time per output token in seconds.",
        m.itl,
    )
    hist(
        "vllm:e2e_request_latency_seconds",
        "Histogram of end to end request latency in seconds.",
        m.e2e,
    )
    hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", m.req_prompt_tokens)
    hist(
        "vllm:request_generation_tokens", "Number of generation tokens processed.", m.req_gen_tokens
    )
    hist("vllm:request_params_n", "Histogram of the n request parameter.", m.req_params_n)


def _requests(page: _Page, m: MetricState) -> None:
    """Requests finished, one child per reason once one finished for it."""
    kids = [
        Child({**page.base, "finished_reason": r}, reader(m.success, r), _seen(m.success, r))
        for r in SUCCESS_REASONS[:3]
    ]
    page.out.append(
        Family(
            "counter",
            "vllm:request_success",
            "Count of successfully processed requests.",
            kids,
            False,
        )
    )


def _spec_decode_and_throughput(page: _Page, m: MetricState) -> None:
    """Spec decode's families, HELP and TYPE only (no child on the simulated page), and
    the average throughputs, shown once the engine logged one."""
    simple = page.simple
    simple(
        "gauge", "vllm:spec_decode_draft_acceptance_rate", "Speulative token acceptance rate.", None
    )
    simple("gauge", "vllm:spec_decode_efficiency", "Speculative decoding system efficiency.", None)
    for what in ("accepted", "draft", "emitted"):
        simple("counter", f"vllm:spec_decode_num_{what}_tokens", f"Number of {what} tokens.", None)
    simple(
        "gauge",
        "vllm:avg_prompt_throughput_toks_per_s",
        "Average prefill throughput in tokens/s.",
        lambda: m.avg_prompt_throughput or 0.0,
        lambda: m.avg_prompt_throughput is not None,
    )
    simple(
        "gauge",
        "vllm:avg_generation_throughput_toks_per_s",
        "Average generation throughput in tokens/s.",
        lambda: m.avg_generation_throughput or 0.0,
        lambda: m.avg_generation_throughput is not None,
    )


def _seen(d: dict[str, float], key: str) -> Callable[[], bool]:
    return lambda: d[key] > 0
