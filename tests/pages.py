"""Build small vLLM 0.33-style pages whose windowed quantiles are easy to compute by hand."""

from __future__ import annotations

from collections.abc import Sequence

# Per-scrape increments of the cumulative buckets (the last entry is +Inf).
TTFT_BOUNDS = (0.1, 0.5, 1.0, 2.5)
TTFT_STEP = (6, 9, 10, 10, 10)  # 10 requests, sum 3.0 s
ITL_BOUNDS = (0.01, 0.025, 0.05, 0.1)
ITL_STEP = (0, 50, 90, 98, 100)  # 100 tokens, sum 4.0 s


def _hist(
    name: str, bounds: Sequence[float], cum: Sequence[float], total: float, labels: str
) -> str:
    lines = [f"# HELP {name} h", f"# TYPE {name} histogram"]
    for b, c in zip([*map(str, map(float, bounds)), "+Inf"], cum, strict=True):
        lines.append(f'{name}_bucket{{{labels},le="{b}"}} {float(c)}')
    lines.append(f"{name}_count{{{labels}}} {float(cum[-1])}")
    lines.append(f"{name}_sum{{{labels}}} {total}")
    return "\n".join(lines)


def page(
    n: int, *, model: str = "llama", running: float = 4, waiting: float = 1, kv: float = 0.5
) -> str:
    """The page after ``n`` scrape steps: every counter is ``n`` times its step."""
    labels = f'engine="0",model_name="{model}"'
    parts = [
        _hist(
            "vllm:time_to_first_token_seconds",
            TTFT_BOUNDS,
            [n * c for c in TTFT_STEP],
            n * 3.0,
            labels,
        ),
        _hist(
            "vllm:inter_token_latency_seconds",
            ITL_BOUNDS,
            [n * c for c in ITL_STEP],
            n * 4.0,
            labels,
        ),
        "# HELP vllm:num_requests_running r\n# TYPE vllm:num_requests_running gauge",
        f"vllm:num_requests_running{{{labels}}} {float(running)}",
        "# HELP vllm:num_requests_waiting w\n# TYPE vllm:num_requests_waiting gauge",
        f"vllm:num_requests_waiting{{{labels}}} {float(waiting)}",
        "# HELP vllm:kv_cache_usage_perc k\n# TYPE vllm:kv_cache_usage_perc gauge",
        f"vllm:kv_cache_usage_perc{{{labels}}} {kv}",
        "# HELP vllm:num_preemptions_total p\n# TYPE vllm:num_preemptions_total counter",
        f"vllm:num_preemptions_total{{{labels}}} {float(n)}",
        "# HELP vllm:prompt_tokens_total p\n# TYPE vllm:prompt_tokens_total counter",
        f"vllm:prompt_tokens_total{{{labels}}} {float(1000 * n)}",
        "# HELP vllm:generation_tokens_total g\n# TYPE vllm:generation_tokens_total counter",
        f"vllm:generation_tokens_total{{{labels}}} {float(100 * n)}",
    ]
    return "\n".join(parts) + "\n"
