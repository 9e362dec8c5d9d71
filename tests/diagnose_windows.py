"""Hand-built ``Window`` records for the diagnosis tests.

``make_window()`` with no arguments is a healthy, busy 60 s window of a V1 server: TTFT
p99 0.8 s, ITL p50 30 ms / p99 60 ms, 8 running, nothing waiting, KV at half. Each test
changes only what its class is about, so the test reads as the symptom it pins down.
"""

from __future__ import annotations

from app.model import GaugeStats, HistogramDelta, Quantile, Window

# (p50, p99, observations, mean); p99 may be a Quantile to mark "≥ top bucket".
Hist = tuple[float, float | Quantile, float, float]


# vLLM 0.33 bucket bounds (docs/vllm-signals.md, "When vLLM observes").
BOUNDS = {
    "ttft": (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
             7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0),
    "itl": (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
            10.0, 20.0, 40.0, 80.0),
}  # fmt: skip


def _index(bounds: tuple[float, ...], value: float) -> int:
    return next((i for i, b in enumerate(bounds) if value <= b), len(bounds))


def _hist(sig: str, p50: float | None, p99: float | Quantile | None, n: float, mean: float):
    """Buckets whose p99 rank falls in the bucket holding ``p99`` (98.5 % at p50)."""
    bounds = BOUNDS.get(sig, (1.0,))
    buckets: dict[int, float] = {}
    if n:
        top = p99.value if isinstance(p99, Quantile) else p99
        i99 = len(bounds) if isinstance(p99, Quantile) and p99.ge_top_bucket else None
        i99 = i99 if i99 is not None else _index(bounds, top if top is not None else 0.0)
        i50 = _index(bounds, p50 if p50 is not None else 0.0)
        buckets[i50] = 0.985 * n
        buckets[i99] = buckets.get(i99, 0.0) + 0.015 * n
    return HistogramDelta(bounds=bounds, buckets=buckets, sum=n * mean, count=n)


def make_window(
    *,
    ttft: Hist | None = (0.25, 0.8, 120, 0.3),
    itl: Hist | None = (0.03, 0.06, 24000, 0.032),
    queue_time: tuple[float, float] | None = (0.01, 120),  # (mean, observations)
    prefill_time: float | None = 0.2,
    prompt_len: float | None = 600.0,
    gen_len: float | None = 200.0,
    step_tokens: tuple[float, float, float] | None = (9.0, 600.0, 3000),  # p50, p99, n
    running: tuple[float, float] | None = (8.0, 10.0),
    waiting: tuple[float, float, float] | None = (0.0, 0.0, 0.0),
    kv: tuple[float, float] | None = (0.45, 0.5),
    preemptions: float | None = 0.0,
    prompt_tokens: float | None = 72000.0,
    generation_tokens: float | None = 24000.0,
    prefix: tuple[float, float] | None = (72000.0, 36000.0),  # (queries, hits)
    finished: float | None = 120.0,
    covered: float = 60.0,
    intervals: int = 12,
    reset: bool = False,
    missing: tuple[str, ...] = (),
    buckets: dict[str, dict[int, float]] | None = None,
    target: str = "http://vllm:8000/metrics",
    model_name: str = "llama",
) -> Window:
    """A window with the given readings; ``None`` leaves a signal out entirely.

    ``buckets`` replaces a histogram's bucket increments (index → count; vLLM bounds).
    """
    quantiles: dict[str, dict[str, Quantile]] = {}
    means: dict[str, float | None] = {}
    observations: dict[str, float] = {}
    histograms: dict[str, HistogramDelta] = {}

    def add(sig: str, p50: float | None, p99: float | Quantile | None, n: float, mean: float):
        q99 = p99 if isinstance(p99, Quantile) else Quantile(p99 if n else None)
        quantiles[sig] = {
            "p50": Quantile(p50 if n else None),
            "p90": Quantile(p50 if n else None),
            "p99": q99,
        }
        means[sig] = mean if n else None
        observations[sig] = n
        histograms[sig] = _hist(sig, p50, p99, n, mean)

    if ttft is not None:
        add("ttft", *ttft)
    if itl is not None:
        add("itl", *itl)
    if queue_time is not None:
        add("queue_time", None, None, queue_time[1], queue_time[0])
    if prefill_time is not None and ttft is not None:
        add("prefill_time", None, None, ttft[2], prefill_time)
    if prompt_len is not None and ttft is not None:
        add("prompt_len", None, None, ttft[2], prompt_len)
    if gen_len is not None and ttft is not None:
        add("gen_len", None, None, ttft[2], gen_len)
    if step_tokens is not None:
        add("step_tokens", step_tokens[0], step_tokens[1], step_tokens[2], step_tokens[0])
    for sig, counts in (buckets or {}).items():
        hd = histograms[sig]
        histograms[sig] = HistogramDelta(hd.bounds, counts, hd.sum, sum(counts.values()))
    gauges: dict[str, GaugeStats] = {}
    if running is not None:
        gauges["running"] = GaugeStats(running[0], running[1], running[0])
    if waiting is not None:
        gauges["waiting"] = GaugeStats(*waiting)
    if kv is not None:
        gauges["kv_usage"] = GaugeStats(kv[0], kv[1], kv[0])
    increases: dict[str, float] = {}
    for name, value in (
        ("preemptions", preemptions),
        ("prompt_tokens", prompt_tokens),
        ("generation_tokens", generation_tokens),
    ):
        if value is not None:
            increases[name] = value
    if prefix is not None:
        increases["prefix_queries"], increases["prefix_hits"] = prefix
    if finished is not None:
        increases["finished:stop"] = finished
    rates: dict[str, float | None] = {k: v / covered for k, v in increases.items()}
    return Window(
        target=target,
        model_name=model_name,
        start=1_000.0,
        end=1_060.0,
        quantiles=quantiles,
        means=means,
        observations=observations,
        increases=increases,
        rates=rates,
        gauges=gauges,
        histograms=histograms,
        covered=covered,
        intervals=intervals,
        reset=reset,
        missing=missing,
    )
