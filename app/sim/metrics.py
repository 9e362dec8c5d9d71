"""The simulator's own metric state: plain counters and bucket arrays.

The hot loop observes into ``Hist`` (a bisect into a bound list) instead of
prometheus_client objects; ``app.sim.exposition`` renders the state as vLLM would.
Bucket bounds per vLLM version come from ``docs/vllm-signals.md`` (§1.3 for V1,
§2.3 for V0 0.6.3).
"""

from __future__ import annotations

from bisect import bisect_left

from app.sim.sglang_buckets import (
    SGLANG_E2E,
    SGLANG_ITL,
    SGLANG_QUEUE,
    SGLANG_TOKENS,
    SGLANG_TTFT,
)

TIME_TO_FIRST_TOKEN_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
INTER_TOKEN_LATENCY_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
REQUEST_LATENCY_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
ITERATION_TOKENS_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
REQUEST_PARAMS_N_BUCKETS = (1, 2, 5, 10, 20)
REQUEST_NUM_PREEMPTIONS_BUCKETS = (1, 2, 3, 4, 5, 10, 20)

V0_TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
)
V0_TPOT_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
V0_E2E_BUCKETS = (1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0)

VERSIONS = ("0.33", "0.10", "0.6")
# What a replica's page can be: one of vLLM's VERSIONS, or SGLang's (``--engine sglang``).
PAGE_KINDS = (*VERSIONS, "sglang")


def build_1_2_5_buckets(max_value: int) -> tuple[int, ...]:
    """1, 2, 5, 10, 20, 50, ... up to ``max_value`` (vLLM's request_tokens buckets)."""
    out: list[int] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_value:
                return tuple(out)
            out.append(value)
        exponent += 1


class Hist:
    """A Prometheus histogram as bucket counts (non-cumulative; the last is +Inf)."""

    __slots__ = ("bounds", "counts", "sum", "count")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = tuple(float(b) for b in bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1

    def observe_n(self, value: float, n: int) -> None:
        """Observe ``value`` ``n`` times (one step's identical inter-token gaps)."""
        self.counts[bisect_left(self.bounds, value)] += n
        self.sum += value * n
        self.count += n

    def cumulative(self) -> list[int]:
        out, acc = [], 0
        for c in self.counts:
            acc += c
            out.append(acc)
        return out


SUCCESS_REASONS = ("stop", "length", "abort", "error", "repetition")
REJECTION_REASONS = ("max_num_queued_reqs", "max_num_queued_tokens")


class MetricState:
    """Cumulative counters and histograms of one replica, in vLLM's units."""

    def __init__(self, version: str, max_model_len: int, spec_tokens: int = 0) -> None:
        if version not in PAGE_KINDS:
            raise ValueError(f"unknown vLLM version {version!r}")
        self.version = version
        v0 = version == "0.6"
        tokens = build_1_2_5_buckets(max_model_len)
        self.ttft = Hist(V0_TTFT_BUCKETS if v0 else TIME_TO_FIRST_TOKEN_BUCKETS)
        self.itl = Hist(V0_TPOT_BUCKETS if v0 else INTER_TOKEN_LATENCY_BUCKETS)
        self.e2e = Hist(V0_E2E_BUCKETS if v0 else REQUEST_LATENCY_BUCKETS)
        self.tpot = Hist(INTER_TOKEN_LATENCY_BUCKETS)
        self.queue = Hist(REQUEST_LATENCY_BUCKETS)
        if version == "sglang":  # the same observations in SGLang's bucket layouts
            self.ttft = Hist(SGLANG_TTFT)
            self.itl = Hist(SGLANG_ITL)
            self.e2e = Hist(SGLANG_E2E)
            self.queue = Hist(SGLANG_QUEUE)
        self.inference = Hist(REQUEST_LATENCY_BUCKETS)
        self.prefill = Hist(REQUEST_LATENCY_BUCKETS)
        self.decode = Hist(REQUEST_LATENCY_BUCKETS)
        lengths: tuple[float, ...] = SGLANG_TOKENS if version == "sglang" else tokens
        self.req_prompt_tokens = Hist(lengths)
        self.req_gen_tokens = Hist(lengths)
        self.req_max_gen_tokens = Hist(tokens)
        self.req_params_max_tokens = Hist(tokens)
        self.req_prefill_kv_computed = Hist(tokens)
        self.req_params_n = Hist(REQUEST_PARAMS_N_BUCKETS)
        self.req_num_preemptions = Hist(REQUEST_NUM_PREEMPTIONS_BUCKETS)
        self.iteration_tokens = Hist(ITERATION_TOKENS_BUCKETS)
        self.prompt_tokens = 0.0
        self.generation_tokens = 0.0
        self.preemptions = 0.0
        self.prefix_queries = 0.0
        self.prefix_hits = 0.0
        self.prompt_local_compute = 0.0
        self.prompt_cache_hit = 0.0
        # KV brought by a KV connector (a disaggregated decode instance): prompt tokens,
        # and the connector's prefix-cache queries and hits.
        self.prompt_external = 0.0
        self.external_queries = 0.0
        self.external_hits = 0.0
        self.success = dict.fromkeys(SUCCESS_REASONS, 0.0)
        self.rejections = dict.fromkeys(REJECTION_REASONS, 0.0)
        # Speculative decoding (vllm/v1/spec_decode/metrics.py), when configured.
        self.spec_tokens = spec_tokens
        self.spec_drafts = 0.0
        self.spec_draft_tokens = 0.0
        self.spec_accepted_tokens = 0.0
        self.spec_accepted_per_pos = [0.0] * spec_tokens
        # V0 only: blocks queried/hit for the hit-rate gauge, throughput over the last log.
        self.prefix_block_queries = 0.0
        self.prefix_block_hits = 0.0
        self.avg_prompt_throughput: float | None = None
        self.avg_generation_throughput: float | None = None
        self.started = False
