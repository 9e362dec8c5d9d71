"""SGLang's metric families over a replica's state: a second exposition of what the
vLLM pages show (``app.sim.families``), for ``phasewatch sim --engine sglang``.

Names, HELP texts, labels and buckets follow SGLang's ``collector.py`` (the commit read:
``docs/sglang.md``) and the fixtures in ``tests/fixtures/sglang``: the scheduler's
families carry ``model_name``, ``engine_type``, ``tp_rank``, ``pp_rank`` and
``moe_ep_rank``, the tokenizer manager's ``model_name`` only; SGLang serves them through
prometheus_client's multiprocess collector, so no family has ``_created`` samples.

What the simulator keeps in vLLM's terms is said in SGLang's: the KV pool's share in use
is ``token_usage`` (and ``num_used_tokens`` of ``max_total_num_tokens``), preemptions are
retractions, finished requests are counted without a reason (``num_requests_total``),
cached prompt tokens appear once there is one (SGLang creates that child on its first
hit). The page is that of a server run with ``--collect-tokens-histogram`` (the prompt
and generation length histograms). ``cache_hit_rate`` is the replica's hit rate so far
(SGLang's is the last logged batch's; phasewatch reads neither).
"""

from __future__ import annotations

from app.sim.family_parts import Child, Family, Source, Value, const
from app.sim.metrics import Hist, MetricState

__all__ = ["sglang_families"]


def sglang_families(src: Source, model_name: str) -> list[Family]:
    """The families of an SGLang page (one scheduler, TP/PP/EP rank 0), scheduler's
    first, then the tokenizer manager's."""
    sched = {
        "engine_type": "unified",
        "model_name": model_name,
        "moe_ep_rank": "0",
        "pp_rank": "0",
        "tp_rank": "0",
    }
    out: list[Family] = []
    _scheduler(out, src, sched)
    _tokenizer(out, src.m, {"model_name": model_name})
    return out


def _one(kind: str, name: str, help_: str, labels: dict[str, str], value: Value) -> Family:
    return Family(kind, name, help_, [Child(dict(labels), value)], False)


def _hist(name: str, help_: str, labels: dict[str, str], h: Hist) -> Family:
    return Family("histogram", name, help_, [Child(dict(labels), lambda: h)], False)


def _scheduler(out: list[Family], src: Source, labels: dict[str, str]) -> None:
    """SchedulerMetricsCollector: load gauges, retractions, queue time."""
    m = src.m
    pool = _pool_tokens(src.cache_labels)
    gauges: list[tuple[str, str, Value]] = [
        ("sglang:num_running_reqs", "The number of running requests.", src.running),
        ("sglang:num_used_tokens", "The number of used tokens.", lambda: src.kv_usage() * pool),
        ("sglang:token_usage", "The token usage.", src.kv_usage),
        ("sglang:num_queue_reqs", "The number of requests in the waiting queue.", src.waiting),
        (
            "sglang:num_grammar_queue_reqs",
            "The number of requests in the grammar waiting queue.",
            const(0.0),
        ),
        ("sglang:cache_hit_rate", "The prefix cache hit rate.", lambda: _hit_rate(m)),
        (
            "sglang:max_total_num_tokens",
            "Maximum total number of tokens in the KV cache pool.",
            const(float(pool)),
        ),
    ]
    out.extend(_one("gauge", name, help_, labels, value) for name, help_, value in gauges)
    accept = _AcceptLength(m)
    out.append(
        _one(
            "gauge",
            "sglang:spec_accept_length",
            "The average acceptance length of speculative decoding.",
            labels,
            accept.read,
        )
    )
    out.append(
        _one(
            "counter",
            "sglang:num_retracted_requests",
            "Total number of retracted requests.",
            labels,
            lambda: m.preemptions,
        )
    )
    out.append(
        _hist(
            "sglang:queue_time_seconds", "Histogram of queueing time in seconds.", labels, m.queue
        )
    )


def _tokenizer(out: list[Family], m: MetricState, labels: dict[str, str]) -> None:
    """TokenizerMetricsCollector: token and request counters, latency histograms."""
    out.append(
        _one(
            "counter",
            "sglang:prompt_tokens",
            "Number of prefill tokens processed.",
            labels,
            lambda: m.prompt_tokens,
        )
    )
    out.append(
        _one(
            "counter",
            "sglang:generation_tokens",
            "Number of generation tokens processed.",
            labels,
            lambda: m.generation_tokens,
        )
    )
    cached = Child(dict(labels), lambda: m.prefix_hits, visible=lambda: m.prefix_hits > 0)
    out.append(
        Family(
            "counter", "sglang:cached_tokens", "Number of cached prompt tokens.", [cached], False
        )
    )
    out.append(
        _one(
            "counter",
            "sglang:num_requests",
            "Number of requests processed.",
            labels,
            lambda: sum(m.success.values()),
        )
    )
    out.append(
        _one(
            "counter",
            "sglang:num_aborted_requests",
            "Number of requests aborted.",
            labels,
            lambda: m.success["abort"],
        )
    )
    # As with --collect-tokens-histogram.
    out.append(
        _hist(
            "sglang:prompt_tokens_histogram",
            "Histogram of prompt token length.",
            labels,
            m.req_prompt_tokens,
        )
    )
    out.append(
        _hist(
            "sglang:generation_tokens_histogram",
            "Histogram of generation token length.",
            labels,
            m.req_gen_tokens,
        )
    )
    for name, help_, h in (
        ("time_to_first_token_seconds", "Histogram of time to first token in seconds.", m.ttft),
        ("inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", m.itl),
        (
            "e2e_request_latency_seconds",
            "Histogram of End-to-end request latency in seconds",
            m.e2e,
        ),
    ):
        out.append(_hist("sglang:" + name, help_, labels, h))


def _pool_tokens(cache_labels: dict[str, str]) -> int:
    """The KV pool in tokens (the blocks × block size the vLLM page reports)."""
    try:
        return int(cache_labels["num_gpu_blocks"]) * int(cache_labels["block_size"])
    except (KeyError, ValueError):
        return 0


class _AcceptLength:
    """SGLang's ``spec_accept_length``: tokens a decode step yields per request (1 +
    accepted drafts) over its last decode log; here over the steps since the page was
    last read (SGLang logs every 40 decode steps). 0 without speculative decoding; the
    last value while no step drafted."""

    def __init__(self, m: MetricState) -> None:
        self.m = m
        self.drafts = 0.0
        self.accepted = 0.0
        self.value = 0.0

    def read(self) -> float:
        m = self.m
        drafts = m.spec_drafts - self.drafts
        if m.spec_tokens and drafts > 0:
            self.value = 1.0 + (m.spec_accepted_tokens - self.accepted) / drafts
        self.drafts, self.accepted = m.spec_drafts, m.spec_accepted_tokens
        return self.value


def _hit_rate(m: MetricState) -> float:
    return m.prefix_hits / m.prefix_queries if m.prefix_queries else 0.0
