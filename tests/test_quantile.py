"""histogram_quantile against hand-computed values, one edge case of promql/quantile.go each."""

from __future__ import annotations

import math
import random

import pytest

from app.model import HistogramDelta, Quantile
from app.windows.quantile import (
    _sparse_quantiles,
    almost_equal,
    bucket_quantile,
    cumulative_counts,
    histogram_quantile,
    histogram_quantiles,
    quantile_of_delta,
    quantiles_of_delta,
)

# bounds (1, 2, 4), cumulative [10, 30, 40, 40]: 10 obs in (0,1], 20 in (1,2], 10 in (2,4].
B = (1.0, 2.0, 4.0)
C = (10.0, 30.0, 40.0, 40.0)


@pytest.mark.parametrize(
    ("q", "expected"),
    [
        # rank 0.5*40 = 20 → first cum ≥ 20 is le=2 (30): 1 + (2-1) * (20-10)/(30-10) = 1.5
        (0.5, 1.5),
        # rank 10 → le=1 (10 ≥ 10), lower edge 0: 0 + 1 * 10/10 = 1.0
        (0.25, 1.0),
        # rank 4 → le=1: 0 + 1 * 4/10 = 0.4
        (0.1, 0.4),
        # rank 36 → le=4 (40): 2 + (4-2) * (36-30)/(40-30) = 2 + 2*0.6 = 3.2
        (0.9, 3.2),
        # rank 40 → le=4 (40 ≥ 40, a finite bucket): 2 + 2 * 10/10 = 4.0, not "≥"
        (1.0, 4.0),
        # rank 0 → le=1: 0 + 1 * 0/10 = 0.0
        (0.0, 0.0),
    ],
)
def test_linear_interpolation_inside_the_bucket(q: float, expected: float) -> None:
    assert histogram_quantile(q, B, C) == Quantile(value=pytest.approx(expected))


@pytest.mark.parametrize(
    ("q", "expected"),
    [
        (-0.1, -math.inf),
        (-math.inf, -math.inf),
        (1.01, math.inf),
        (math.inf, math.inf),
    ],
)
def test_out_of_range_q_gives_infinities_even_without_observations(
    q: float, expected: float
) -> None:
    assert histogram_quantile(q, B, C) == Quantile(value=expected)
    assert histogram_quantile(q, B, (0.0, 0.0, 0.0, 0.0)) == Quantile(value=expected)


def test_nan_q_gives_nan_value() -> None:
    got = histogram_quantile(math.nan, B, C)
    assert got.value is not None and math.isnan(got.value)
    assert not got.ge_top_bucket


def test_no_observations_gives_no_value_not_zero() -> None:
    assert histogram_quantile(0.99, B, (0.0, 0.0, 0.0, 0.0)) == Quantile(value=None)


def test_fewer_than_two_buckets_gives_no_value() -> None:
    # Only the +Inf bucket: Prometheus returns NaN, we return None.
    assert histogram_quantile(0.5, (), (5.0,)) == Quantile(value=None)
    # A finite bound that is itself +Inf coalesces with the +Inf bucket: 1 bucket left.
    assert histogram_quantile(0.5, (math.inf,), (2.0, 5.0)) == Quantile(value=None)


def test_rank_in_inf_bucket_returns_highest_finite_bound_flagged() -> None:
    # bounds (1, 2), cum [1, 2, 10]: rank 0.5*10 = 5, no finite bucket reaches 5 → 2.0 "≥"
    assert histogram_quantile(0.5, (1.0, 2.0), (1.0, 2.0, 10.0)) == Quantile(2.0, True)
    # rank 0.2*10 = 2 → le=2 (2 ≥ 2): 1 + 1 * (2-1)/(2-1) = 2.0, exact, not flagged
    assert histogram_quantile(0.2, (1.0, 2.0), (1.0, 2.0, 10.0)) == Quantile(2.0, False)


def test_rank_exactly_at_top_finite_bucket_is_not_flagged() -> None:
    # bounds (1, 2), cum [0, 4, 8]: q=0.5 → rank 4 → le=2: 1 + 1 * (4-0)/(4-0) = 2.0
    assert histogram_quantile(0.5, (1.0, 2.0), (0.0, 4.0, 8.0)) == Quantile(2.0, False)
    # q=0.51 → rank 4.08 > 4 → +Inf bucket → 2.0 "≥"
    assert histogram_quantile(0.51, (1.0, 2.0), (0.0, 4.0, 8.0)) == Quantile(2.0, True)


def test_first_bucket_with_nonpositive_bound_returns_that_bound() -> None:
    # bounds (-1, 0, 1), cum [2, 4, 6, 8]
    b, c = (-1.0, 0.0, 1.0), (2.0, 4.0, 6.0, 8.0)
    # rank 0.1*8 = 0.8 → le=-1 (first, bound ≤ 0) → -1.0, no interpolation
    assert histogram_quantile(0.1, b, c) == Quantile(-1.0)
    # rank 0.375*8 = 3 → le=0 (4): -1 + (0-(-1)) * (3-2)/(4-2) = -0.5
    assert histogram_quantile(0.375, b, c) == Quantile(-0.5)
    # bounds (0, 1), cum [3, 5, 5]: rank 0.2*5 = 1 → le=0 (first, bound 0 ≤ 0) → 0.0
    assert histogram_quantile(0.2, (0.0, 1.0), (3.0, 5.0, 5.0)) == Quantile(0.0)


def test_q_zero_with_empty_first_bucket_is_nan_like_prometheus() -> None:
    # bounds (1, 2), cum [0, 4, 4]: rank 0 → le=1 (0 ≥ 0): 0 + 1 * (0/0) = NaN in Go.
    got = histogram_quantile(0.0, (1.0, 2.0), (0.0, 4.0, 4.0))
    assert got.value is not None and math.isnan(got.value)


def test_non_monotonic_counts_are_raised_to_the_envelope() -> None:
    # cum [10, 8, 20, 20] → [10, 10, 20, 20] (8 < 10 is raised to 10).
    b, c = (1.0, 2.0, 4.0), (10.0, 8.0, 20.0, 20.0)
    # rank 0.5*20 = 10 → le=1 (10): 0 + 1 * 10/10 = 1.0
    assert histogram_quantile(0.5, b, c) == Quantile(1.0)
    # rank 15 → le=4 (20): 2 + 2 * (15-10)/(20-10) = 3.0
    assert histogram_quantile(0.75, b, c) == Quantile(3.0)
    value, forced, fixed = bucket_quantile(0.75, list(zip((*b, math.inf), c, strict=True)))
    assert (value, forced, fixed) == (3.0, True, False)


def test_envelope_compares_with_last_accepted_count() -> None:
    # cum [10, 5, 7, 12, 12]: 5 → 10, then 7 is compared with 10 (not 5) → 10.
    # Repaired: [10, 10, 10, 12, 12]. rank 0.9*12 = 10.8 → le=4 (12):
    # 3 + (4-3) * (10.8-10)/(12-10) = 3.4
    got = histogram_quantile(0.9, (1.0, 2.0, 3.0, 4.0), (10.0, 5.0, 7.0, 12.0, 12.0))
    assert got == Quantile(pytest.approx(3.4))


def test_small_relative_deltas_are_ignored_since_prometheus_2_49() -> None:
    # cum [5, 5, 5+1e-12]: |Δ|/(5+5+1e-12) ≈ 1e-13 < 1e-12, so the +Inf count is set
    # back to 5. q=1 → rank 5 → le=1 (5 ≥ 5): 0 + 1 * 5/5 = 1.0. (Before the fix the
    # total was 5+1e-12 and the rank fell into +Inf: 2.0 "≥".)
    pairs = [(1.0, 5.0), (2.0, 5.0), (math.inf, 5.0 + 1e-12)]
    assert bucket_quantile(1.0, pairs) == (1.0, False, True)
    assert histogram_quantile(1.0, (1.0, 2.0), (5.0, 5.0, 5.0 + 1e-12)) == Quantile(1.0)


def test_almost_equal_matches_prometheus() -> None:
    assert almost_equal(5.0, 5.0 + 1e-12, 1e-12)
    assert not almost_equal(5.0, 5.0 + 1e-10, 1e-12)
    # a zero operand compares absolutely against epsilon * smallest normal
    assert not almost_equal(0.0, 1e-300, 1e-12)
    assert almost_equal(math.nan, math.nan, 1e-12)


def test_buckets_with_equal_bounds_are_coalesced() -> None:
    # bounds (1, 1, 2), cum [3, 4, 8, 10] → le=1: 3+4 = 7, le=2: 8, +Inf: 10.
    # rank 0.5*10 = 5 → le=1 (7): 0 + 1 * 5/7
    got = histogram_quantile(0.5, (1.0, 1.0, 2.0), (3.0, 4.0, 8.0, 10.0))
    assert got == Quantile(pytest.approx(5 / 7))


def test_unsorted_bounds_are_sorted_first() -> None:
    # bounds (2, 1), counts [8, 3, 10] → sorted (1:3), (2:8), (+Inf:10).
    # rank 5 → le=2 (8): 1 + 1 * (5-3)/(8-3) = 1.4
    assert histogram_quantile(0.5, (2.0, 1.0), (8.0, 3.0, 10.0)) == Quantile(pytest.approx(1.4))


def test_fractional_counts_from_rates_interpolate() -> None:
    # cum [0.5, 1.5, 2.0] over bounds (0.1, 0.2): rank 0.5*2 = 1 → le=0.2 (1.5):
    # 0.1 + 0.1 * (1-0.5)/(1.5-0.5) = 0.15
    got = histogram_quantile(0.5, (0.1, 0.2), (0.5, 1.5, 2.0))
    assert got == Quantile(pytest.approx(0.15))


def test_bucket_quantile_without_inf_bucket_is_nan() -> None:
    value, _, _ = bucket_quantile(0.5, [(1.0, 1.0), (2.0, 2.0)])
    assert math.isnan(value)


def test_wrong_number_of_counts_is_rejected() -> None:
    with pytest.raises(ValueError, match="len\\(bounds\\)\\+1"):
        histogram_quantile(0.5, (1.0, 2.0), (1.0, 2.0))


def test_nan_bound_is_rejected() -> None:
    with pytest.raises(ValueError, match="NaN"):
        histogram_quantile(0.5, (math.nan, 2.0), (1.0, 2.0, 3.0))


def test_quantile_of_sparse_delta_equals_dense() -> None:
    # increments {0:10, 1:20, 2:10} over (1, 2, 4) = cumulative [10, 30, 40, 40]
    hd = HistogramDelta(bounds=B, buckets={0: 10.0, 1: 20.0, 2: 10.0}, sum=70.0, count=40.0)
    assert quantile_of_delta(0.5, hd) == histogram_quantile(0.5, B, C) == Quantile(1.5)


def test_quantile_of_delta_in_inf_bucket_only() -> None:
    # increments {3: 5}: all 5 observations above 4 → cumulative [0, 0, 0, 5];
    # rank 2.5 reaches no finite bucket → 4.0 "≥"
    hd = HistogramDelta(bounds=B, buckets={3: 5.0}, sum=100.0, count=5.0)
    assert quantile_of_delta(0.5, hd) == Quantile(4.0, True)


def test_quantile_of_empty_delta_has_no_value() -> None:
    hd = HistogramDelta(bounds=B, buckets={}, sum=0.0, count=0.0)
    assert quantile_of_delta(0.99, hd) == Quantile(None)


def test_cumulative_counts_rejects_index_out_of_range() -> None:
    with pytest.raises(ValueError, match="outside"):
        cumulative_counts(4, {4: 1.0})


def test_several_quantiles_at_once_match_one_at_a_time() -> None:
    qs = (-1.0, 0.0, 0.25, 0.5, 0.9, 1.0, 2.0)
    assert histogram_quantiles(qs, B, C) == [histogram_quantile(q, B, C) for q in qs]
    hd = HistogramDelta(bounds=B, buckets={0: 10.0, 1: 20.0, 2: 10.0}, sum=70.0, count=40.0)
    assert quantiles_of_delta(qs, hd) == [quantile_of_delta(q, hd) for q in qs]


def test_out_of_range_q_is_answered_before_bounds_are_checked() -> None:
    # Prometheus checks q first; a NaN bound only matters when the buckets are used.
    assert histogram_quantile(2.0, (math.nan,), (1.0, 2.0)) == Quantile(math.inf)


# Random histograms (monotone in q, inside the bucket, against a reference): test_fuzz.py.


def test_sparse_histograms_take_the_same_path_to_the_same_floats() -> None:
    """``quantiles_of_delta`` skips building dense counts for whole increments; random
    layouts (negative, zero and positive bounds) and counts give what the full port gives."""
    rng = random.Random(7)
    qs = [0.0, 1e-9, 0.25, 0.5, 0.9, 0.99, 1.0, -0.1, 1.1, math.nan]
    taken = 0
    for _ in range(20_000):
        n = rng.randint(1, 6)
        bounds = tuple(sorted(rng.sample([-1.0, 0.0, 0.001, 0.1, 0.5, 1.0, 2.0, 5.0, 10.0], n)))
        buckets = {
            i: float(rng.choice([1, 2, 3, 7, 100, 2**37]))
            for i in range(n + 1)
            if rng.random() < 0.5
        }
        hd = HistogramDelta(bounds, buckets, 1.0, sum(buckets.values()))
        sparse = _sparse_quantiles(qs, hd)
        if sparse is None:
            continue
        taken += 1
        assert repr(sparse) == repr(
            histogram_quantiles(qs, bounds, cumulative_counts(n + 1, buckets))
        )
    assert taken > 15_000


def test_the_layout_check_remembered_per_layout_answers_as_the_first_time() -> None:
    """``_sparse_quantiles`` remembers per layout whether its bounds are finite and
    increasing; asked again (an equal tuple, a list, a NaN bound) it answers the same."""
    qs = [0.5, 0.9, 0.99]
    buckets = {0: 2.0, 2: 5.0, 3: 1.0}
    for bounds in [(0.1, 0.5, 1.0), (0.5, 0.1, 1.0), (0.1, math.nan, 1.0), (0.1, 0.5, math.inf)]:
        first = repr(_sparse_quantiles(qs, HistogramDelta(bounds, buckets, 1.0, 8.0)))
        again = repr(_sparse_quantiles(qs, HistogramDelta(tuple(bounds), buckets, 1.0, 8.0)))
        listed = HistogramDelta(list(bounds), buckets, 1.0, 8.0)  # type: ignore[arg-type]
        assert first == again == repr(_sparse_quantiles(qs, listed))
        if bounds == (0.1, 0.5, 1.0):
            assert first != "None"
        else:
            assert first == "None"
