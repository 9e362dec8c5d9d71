"""Interval deltas: increases, counter resets, layout changes, new series, sparse storage."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.model import Histogram, HistogramDelta, IntervalDelta, Snapshot, StreamSnapshot
from app.windows.delta import (
    histogram_delta,
    interval_delta,
    layout_changed,
    snapshot_deltas,
    to_increments,
)
from app.windows.quantile import cumulative_counts, histogram_quantile, quantile_of_delta

B = (1.0, 2.0, 4.0)


def hist(counts: tuple[float, ...], total: float, bounds: tuple[float, ...] = B) -> Histogram:
    return Histogram(bounds=bounds, counts=counts, sum=total, count=counts[-1])


def stream(
    histograms: dict[str, Histogram] | None = None,
    counters: dict[str, float] | None = None,
    gauges: dict[str, float] | None = None,
    missing: tuple[str, ...] = (),
) -> StreamSnapshot:
    return StreamSnapshot(
        model_name="m",
        histograms=histograms or {},
        counters=counters or {},
        gauges=gauges or {},
        missing=missing,
    )


def delta(prev: StreamSnapshot, cur: StreamSnapshot) -> IntervalDelta:
    return interval_delta(prev, cur, target="t", start=10.0, end=15.0)


def test_histogram_increase_is_stored_as_sparse_bucket_increments() -> None:
    # prev cum [1, 3, 4, 4], cur cum [2, 5, 7, 8]: Δcum = [1, 2, 3, 4]
    # → per-bucket increments [1, 1, 1, 1]
    hd, reset = histogram_delta(hist((1, 3, 4, 4), 5.0), hist((2, 5, 7, 8), 20.5))
    assert not reset
    assert hd == HistogramDelta(bounds=B, buckets={0: 1, 1: 1, 2: 1, 3: 1}, sum=15.5, count=4)


def test_unchanged_buckets_are_not_stored() -> None:
    # prev cum [1, 3, 4, 4], cur cum [1, 3, 6, 6]: Δcum [0, 0, 2, 2] → only bucket 2 (+2)
    hd, _ = histogram_delta(hist((1, 3, 4, 4), 5.0), hist((1, 3, 6, 6), 11.0))
    assert hd.buckets == {2: 2}
    assert (hd.sum, hd.count) == (6.0, 2)


def test_counter_reset_restarts_delta() -> None:
    d = delta(stream(counters={"preemptions": 100.0}), stream(counters={"preemptions": 30.0}))
    assert d.counters == {"preemptions": 30.0}
    assert d.reset


def test_counter_increase_without_reset() -> None:
    d = delta(stream(counters={"prompt_tokens": 100.0}), stream(counters={"prompt_tokens": 130.0}))
    assert d.counters == {"prompt_tokens": 30.0}
    assert not d.reset


def test_histogram_count_decrease_restarts_delta_with_current_state() -> None:
    # restart: cur cum [1, 2, 2, 2] is all there is since the restart → increments {0:1, 1:1}
    d = delta(
        stream(histograms={"ttft": hist((5, 10, 10, 10), 9.0)}),
        stream(histograms={"ttft": hist((1, 2, 2, 2), 1.5)}),
    )
    assert d.reset
    assert d.histograms["ttft"] == HistogramDelta(B, {0: 1, 1: 1}, 1.5, 2)


def test_any_bucket_decrease_restarts_the_whole_histogram() -> None:
    # count grew (10 → 11) but bucket le=1 fell (5 → 4): a restart; the whole histogram's
    # delta is the current state {0:4, 1:7}, not a per-bucket mix.
    d = delta(
        stream(histograms={"ttft": hist((5, 10, 10, 10), 9.0)}),
        stream(histograms={"ttft": hist((4, 11, 11, 11), 12.0)}),
    )
    assert d.reset
    assert d.histograms["ttft"].buckets == {0: 4, 1: 7}
    assert d.histograms["ttft"].count == 11


def test_sum_decrease_is_a_restart() -> None:
    d = delta(
        stream(histograms={"ttft": hist((5, 10, 10, 10), 9.0)}),
        stream(histograms={"ttft": hist((5, 10, 10, 10), 8.0)}),
    )
    assert d.reset
    assert d.histograms["ttft"].sum == 8.0


def test_layout_change_is_treated_as_reset_and_reported() -> None:
    prev = stream(
        histograms={"ttft": hist((1, 2, 2), 2.0, (1.0, 2.0)), "itl": hist((1, 1, 1, 1), 0.5)}
    )
    cur = stream(
        histograms={
            "ttft": hist((1, 3, 4, 4), 6.0, (1.0, 2.0, 5.0)),
            "itl": hist((2, 2, 2, 2), 1.0),
        }
    )
    assert layout_changed(prev, cur) == ["ttft"]
    d = delta(prev, cur)
    assert d.reset
    assert d.histograms["ttft"] == HistogramDelta((1.0, 2.0, 5.0), {0: 1, 1: 2, 2: 1}, 6.0, 4)
    assert d.histograms["itl"].buckets == {0: 1}


def test_new_series_counts_from_zero_when_stream_was_scraped() -> None:
    # V0 creates finished_reason counters lazily: their first value is real work.
    prev = stream(counters={"prompt_tokens": 10.0}, gauges={"running": 1.0})
    cur = stream(
        counters={"prompt_tokens": 15.0, "finished:stop": 3.0},
        histograms={"e2e": hist((0, 1, 1, 1), 1.5)},
    )
    d = delta(prev, cur)
    assert d.counters == {"prompt_tokens": 5.0, "finished:stop": 3.0}
    assert d.histograms["e2e"] == HistogramDelta(B, {1: 1}, 1.5, 1)
    assert not d.reset


def test_new_series_without_any_baseline_is_left_out() -> None:
    d = delta(
        stream(),
        stream(counters={"prompt_tokens": 15.0}, histograms={"e2e": hist((0, 1, 1, 1), 1.5)}),
    )
    assert d.counters == {}
    assert d.histograms == {}
    forced = interval_delta(
        stream(),
        stream(counters={"prompt_tokens": 15.0}),
        target="t",
        start=0,
        end=1,
        new_series_from_zero=True,
    )
    assert forced.counters == {"prompt_tokens": 15.0}


def test_series_gone_from_cur_yields_nothing_and_missing_is_copied() -> None:
    prev = stream(counters={"preemptions": 1.0, "prompt_tokens": 5.0})
    cur = stream(counters={"prompt_tokens": 6.0}, missing=("preemptions",))
    d = delta(prev, cur)
    assert d.counters == {"prompt_tokens": 1.0}
    assert d.missing == ("preemptions",)


def test_gauges_are_the_current_values_and_times_are_passed_through() -> None:
    d = delta(stream(gauges={"running": 1.0}), stream(gauges={"running": 3.0, "kv_usage": 0.5}))
    assert d.gauges == {"running": 3.0, "kv_usage": 0.5}
    assert (d.target, d.model_name, d.start, d.end) == ("t", "m", 10.0, 15.0)


def test_malformed_histogram_is_rejected() -> None:
    bad = Histogram(bounds=B, counts=(1.0, 2.0), sum=1.0, count=2.0)
    with pytest.raises(ValueError, match="counts for 3 bounds"):
        delta(stream(histograms={"ttft": bad}), stream(histograms={"ttft": bad}))


def snap(ts: float, streams: dict[str, StreamSnapshot], target: str = "t") -> Snapshot:
    return Snapshot(target=target, ts=ts, streams=streams)


def test_snapshot_deltas_pairs_streams_and_uses_scrape_times() -> None:
    a0 = StreamSnapshot("a", counters={"prompt_tokens": 1.0})
    a1 = StreamSnapshot("a", counters={"prompt_tokens": 4.0})
    b1 = StreamSnapshot("b", counters={"prompt_tokens": 7.0})
    out = snapshot_deltas(snap(100.0, {"a": a0}), snap(105.0, {"a": a1, "b": b1}))
    assert [(d.model_name, d.counters, d.start, d.end, d.target) for d in out] == [
        ("a", {"prompt_tokens": 3.0}, 100.0, 105.0, "t"),
        # new stream while the target was up: counted from zero
        ("b", {"prompt_tokens": 7.0}, 100.0, 105.0, "t"),
    ]


def test_snapshot_deltas_skips_new_stream_without_baseline() -> None:
    b1 = StreamSnapshot("b", counters={"prompt_tokens": 7.0})
    assert snapshot_deltas(snap(100.0, {}), snap(105.0, {"b": b1})) == []


def test_snapshot_deltas_rejects_mismatched_snapshots() -> None:
    with pytest.raises(ValueError, match="different targets"):
        snapshot_deltas(snap(1.0, {}, "x"), snap(2.0, {}, "y"))
    with pytest.raises(ValueError, match="increase"):
        snapshot_deltas(snap(2.0, {}), snap(2.0, {}))


def test_sparse_round_trip_keeps_cumulative_counts() -> None:
    counts = [0.0, 0.0, 3.0, 3.0, 10.0, 10.0]
    sparse = to_increments(counts)
    assert sparse == {2: 3.0, 4: 7.0}
    assert cumulative_counts(len(counts), sparse) == counts


@given(st.lists(st.integers(min_value=0, max_value=10**9), min_size=1, max_size=40))
def test_sparse_round_trip_is_exact_for_integer_counts(increments: list[int]) -> None:
    counts: list[float] = []
    total = 0
    for inc in increments:
        total += inc
        counts.append(float(total))
    sparse = to_increments(counts)
    assert all(v != 0 for v in sparse.values())
    assert cumulative_counts(len(counts), sparse) == counts


@given(
    st.lists(st.integers(min_value=0, max_value=50), min_size=4, max_size=4),
    st.lists(st.integers(min_value=0, max_value=50), min_size=4, max_size=4),
)
def test_delta_quantile_equals_quantile_of_cumulative_difference(
    a: list[int], b: list[int]
) -> None:
    # two scrapes of a growing histogram: the quantile of the stored sparse delta is the
    # quantile Prometheus would compute from the per-bucket increase.
    def cum(xs: list[int]) -> tuple[float, ...]:
        out, t = [], 0
        for x in xs:
            t += x
            out.append(float(t))
        return tuple(out)

    first = cum(a)
    second = tuple(f + s for f, s in zip(first, cum(b), strict=True))
    hd, reset = histogram_delta(hist(first, 1.0), hist(second, 2.0))
    assert not reset
    diff = [s - f for f, s in zip(first, second, strict=True)]
    for q in (0.5, 0.9, 0.99):
        assert quantile_of_delta(q, hd) == histogram_quantile(q, B, diff)
