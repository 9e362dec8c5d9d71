"""SGLang's default bucket bounds (``python/sglang/srt/metrics/collector.py``; the
commit read: ``docs/sglang.md``), for the simulator's SGLang pages."""

from __future__ import annotations

__all__ = ["SGLANG_E2E", "SGLANG_ITL", "SGLANG_QUEUE", "SGLANG_TOKENS", "SGLANG_TTFT"]

# TokenizerMetricsCollector's defaults (--bucket-time-to-first-token etc. unset).
SGLANG_TTFT: tuple[float, ...] = (
    0.1,
    0.2,
    0.4,
    0.6,
    0.8,
    1,
    2,
    4,
    6,
    8,
    10,
    20,
    40,
    60,
    80,
    100,
    200,
    400,
)
SGLANG_ITL: tuple[float, ...] = (
    0.002,
    0.004,
    0.006,
    0.008,
    0.010,
    0.015,
    0.020,
    0.025,
    0.030,
    0.035,
    0.040,
)
SGLANG_ITL += (0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000)
SGLANG_ITL += (8.000,)
SGLANG_E2E: tuple[float, ...] = (
    0.1,
    0.2,
    0.4,
    0.6,
    0.8,
    1,
    2,
    4,
    6,
    8,
    10,
    20,
    40,
    60,
    80,
    100,
    200,
    400,
)
SGLANG_E2E += (600, 1200, 1800, 2400)
# SchedulerMetricsCollector's queue_time_seconds.
SGLANG_QUEUE: tuple[float, ...] = (
    0.0,
    0.1,
    0.2,
    0.5,
    1,
    2,
    3,
    4,
    5,
    10,
    15,
    20,
    30,
    40,
    50,
    60,
    70,
    80,
    90,
)
SGLANG_QUEUE += (100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800)
SGLANG_QUEUE += (2000, 2500, 3000)

# The prompt and generation token histograms' (``--collect-tokens-histogram``).
SGLANG_TOKENS: tuple[float, ...] = (100, 300, 500, 700, 1000, 1500, 2000, 3000, 4000, 5000)
SGLANG_TOKENS += (6000, 7000, 8000, 9000, 10000, 12000, 15000, 20000, 22000, 25000, 30000)
SGLANG_TOKENS += (35000, 40000, 66000, 99000, 132000, 300000, 600000, 900000, 1100000)
