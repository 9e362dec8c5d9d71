"""Pure window maths: interval deltas, counter resets, Prometheus' ``histogram_quantile``,
exact sums and window aggregation. No I/O, no clock: every time is passed in.
"""

from app.windows.aggregate import (
    GaugeSample,
    finished_requests,
    mean_gen_len,
    mean_prompt_len,
    prefix_hit_ratio,
    quantile,
    window,
    windows,
)
from app.windows.delta import (
    histogram_delta,
    interval_delta,
    layout_changed,
    snapshot_deltas,
    to_increments,
)
from app.windows.exact import ExactSum, HistogramSum, sum_histogram_deltas
from app.windows.quantile import (
    bucket_quantile,
    cumulative_counts,
    histogram_quantile,
    histogram_quantiles,
    quantile_of_delta,
    quantiles_of_delta,
)

__all__ = [
    "ExactSum",
    "GaugeSample",
    "HistogramSum",
    "bucket_quantile",
    "cumulative_counts",
    "finished_requests",
    "histogram_delta",
    "histogram_quantile",
    "histogram_quantiles",
    "interval_delta",
    "layout_changed",
    "mean_gen_len",
    "mean_prompt_len",
    "prefix_hit_ratio",
    "quantile",
    "quantile_of_delta",
    "quantiles_of_delta",
    "snapshot_deltas",
    "sum_histogram_deltas",
    "to_increments",
    "window",
    "windows",
]
