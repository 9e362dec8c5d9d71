"""Windows: alignment, resets, layouts, quantiles, gauges, sliding windows, fleet sums."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.model import (
    CORE_SIGNALS,
    GaugeStats,
    HistogramDelta,
    IntervalDelta,
    Quantile,
    StreamSnapshot,
    Window,
)
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
from app.windows.delta import interval_delta
from app.windows.exact import ExactSum, sum_histogram_deltas

B = (1.0, 2.0, 4.0)


def d(
    start: float,
    end: float,
    *,
    histograms: dict[str, HistogramDelta] | None = None,
    counters: dict[str, float] | None = None,
    gauges: dict[str, float] | None = None,
    reset: bool = False,
    missing: tuple[str, ...] = (),
) -> IntervalDelta:
    return IntervalDelta(
        target="t",
        model_name="m",
        start=start,
        end=end,
        histograms=histograms or {},
        counters=counters or {},
        gauges=gauges or {},
        reset=reset,
        missing=missing,
    )


def win(
    deltas: list[IntervalDelta],
    start: float,
    end: float,
    gauge_samples: list[GaugeSample] | None = None,
) -> Window:
    return window(
        deltas, start=start, end=end, target="t", model_name="m", gauge_samples=gauge_samples
    )


def test_interval_belongs_to_window_containing_its_end() -> None:
    deltas = [
        d(5, 10, counters={"prompt_tokens": 1}),
        d(10, 15, counters={"prompt_tokens": 2}),
        d(15, 20, counters={"prompt_tokens": 4}),
        d(20, 25, counters={"prompt_tokens": 8}),
    ]
    # (10, 20]: ends 15 and 20 → 2 + 4 = 6 over 2 intervals of 5 s
    w = win(deltas, 10, 20)
    assert (w.increases, w.intervals, w.covered) == ({"prompt_tokens": 6}, 2, 10.0)
    assert w.rates == {"prompt_tokens": 0.6}
    assert (w.start, w.end) == (10, 20)
    # (9.9, 20]: the delta ending at 10 is included in full: 1 + 2 + 4 = 7, covered 15 s
    w = win(deltas, 9.9, 20)
    assert (w.increases, w.covered) == ({"prompt_tokens": 7}, 15.0)


def test_counter_reset_mid_window_adds_the_restarted_value() -> None:
    # cumulative 100 → 110 → (restart) 5 → 12: increase() = 10 + 5 + 7 = 22
    values = [100.0, 110.0, 5.0, 12.0]
    snaps = [StreamSnapshot("m", counters={"preemptions": v}) for v in values]
    deltas = [
        interval_delta(snaps[i - 1], snaps[i], target="t", start=5.0 * i, end=5.0 * (i + 1))
        for i in range(1, len(snaps))
    ]
    assert [x.reset for x in deltas] == [False, True, False]
    w = win(deltas, 0, 100)
    assert w.increases == {"preemptions": 22.0}
    assert w.reset
    # covered 3 × 5 s: 22 / 15
    assert w.rates["preemptions"] == pytest.approx(22 / 15)
    # a window after the restart is clean
    assert not win(deltas, 15, 100).reset


def test_histograms_are_summed_with_quantiles_means_and_observations() -> None:
    deltas = [
        d(0, 5, histograms={"ttft": HistogramDelta(B, {0: 4, 1: 6}, 10.0, 10)}),
        d(5, 10, histograms={"ttft": HistogramDelta(B, {1: 4, 2: 6}, 25.0, 10)}),
    ]
    w = win(deltas, 0, 10)
    assert w.histograms["ttft"] == HistogramDelta(B, {0: 4, 1: 10, 2: 6}, 35.0, 20)
    # Δsum / Δcount = 35 / 20
    assert w.means == {"ttft": 1.75}
    assert w.observations == {"ttft": 20}
    # cumulative [4, 14, 20, 20]:
    # p50 rank 10 → le=2: 1 + 1 * (10-4)/(14-4) = 1.6
    # p90 rank 18 → le=4: 2 + 2 * (18-14)/(20-14) = 3.3333…
    # p99 rank 19.8 → le=4: 2 + 2 * (19.8-14)/(20-14) = 3.9333…
    q = w.quantiles["ttft"]
    assert q["p50"] == Quantile(pytest.approx(1.6))
    assert q["p90"] == Quantile(pytest.approx(2 + 2 * 4 / 6))
    assert q["p99"] == Quantile(pytest.approx(2 + 2 * 5.8 / 6))
    assert quantile(w, "ttft", "p50") == q["p50"]
    assert quantile(w, "itl", "p50") is None


def test_histogram_without_observations_has_no_mean_or_quantile() -> None:
    w = win([d(0, 5, histograms={"itl": HistogramDelta(B, {}, 0.0, 0)})], 0, 5)
    assert w.means == {"itl": None}
    assert w.observations == {"itl": 0}
    assert w.quantiles["itl"] == {
        "p50": Quantile(None),
        "p90": Quantile(None),
        "p99": Quantile(None),
    }


def test_top_bucket_quantile_is_flagged_in_window() -> None:
    w = win([d(0, 5, histograms={"ttft": HistogramDelta(B, {3: 9, 0: 1}, 90.0, 10)})], 0, 5)
    # cumulative [1, 1, 1, 10]: p50 rank 5 > 1 → +Inf bucket → "≥ 4"
    assert w.quantiles["ttft"]["p50"] == Quantile(4.0, ge_top_bucket=True)


def test_layout_change_in_window_keeps_latest_layout_and_marks_reset() -> None:
    old = (1.0, 2.0)
    deltas = [
        d(0, 5, histograms={"ttft": HistogramDelta(old, {0: 100}, 50.0, 100)}),
        d(5, 10, histograms={"ttft": HistogramDelta(B, {2: 2}, 6.0, 2)}),
        d(10, 15, histograms={"ttft": HistogramDelta(B, {1: 2}, 3.0, 2)}),
    ]
    w = win(deltas, 0, 15)
    assert w.histograms["ttft"] == HistogramDelta(B, {1: 2, 2: 2}, 9.0, 4)
    assert w.observations["ttft"] == 4
    assert w.reset
    # once the old layout has left the window, nothing is skipped
    assert not win(deltas, 5, 15).reset


def test_gauges_avg_max_last_over_the_deltas() -> None:
    deltas = [
        d(0, 5, gauges={"running": 1, "kv_usage": 0.2}),
        d(5, 10, gauges={"running": 5, "kv_usage": 0.9}),
        d(10, 15, gauges={"running": 3, "kv_usage": 0.5}),
    ]
    w = win(deltas, 0, 15)
    # running: (1+5+3)/3 = 3, max 5, last 3; kv: (0.2+0.9+0.5)/3 = 0.5333…
    assert w.gauges["running"] == GaugeStats(avg=3.0, max=5.0, last=3.0, first=1.0)
    assert w.gauges["kv_usage"] == GaugeStats(
        avg=pytest.approx(1.6 / 3), max=0.9, last=0.5, first=0.2
    )
    assert w.gauge_span == 10.0  # from the sample at 5 to the one at 15


def test_nan_gauge_samples_are_ignored() -> None:
    deltas = [d(0, 5, gauges={"waiting": 2.0}), d(5, 10, gauges={"waiting": math.nan})]
    assert win(deltas, 0, 10).gauges["waiting"] == GaugeStats(2.0, 2.0, 2.0, 2.0)


def test_explicit_gauge_samples_replace_delta_gauges() -> None:
    deltas = [d(0, 10, gauges={"running": 100.0})]
    samples = [(0.0, {"running": 50.0}), (4.0, {"running": 2.0}), (8.0, {"running": 4.0})]
    # (0, 10]: the sample at 0 is outside; 2 and 4 → avg 3, max 4, last 4
    w = win(deltas, 0, 10, gauge_samples=samples)
    assert w.gauges == {"running": GaugeStats(3.0, 4.0, 4.0, 2.0)}
    assert w.gauge_span == 4.0


def test_empty_window_reports_every_core_signal_missing() -> None:
    w = win([d(0, 5, counters={"prompt_tokens": 1})], 5, 10)
    assert w.intervals == 0 and w.covered == 0.0
    assert w.increases == {} and w.rates == {} and w.gauges == {}
    assert w.missing == tuple(sorted(CORE_SIGNALS))
    assert not w.reset


def test_rate_is_none_when_nothing_is_covered() -> None:
    w = win([d(5, 5, counters={"prompt_tokens": 3})], 0, 10)
    assert w.increases == {"prompt_tokens": 3}
    assert w.rates == {"prompt_tokens": None}


def test_missing_is_union_of_deltas_plus_unseen_core_signals() -> None:
    deltas = [
        d(0, 5, histograms={"ttft": HistogramDelta(B, {}, 0, 0)}, missing=("tpot",)),
        d(5, 10, gauges={"running": 1, "waiting": 0}, missing=("kv_usage",)),
    ]
    # seen: ttft, running, waiting; unseen core: itl, kv_usage; deltas: tpot, kv_usage
    assert win(deltas, 0, 10).missing == ("itl", "kv_usage", "tpot")


def test_windows_end_on_the_step_grid() -> None:
    deltas = [d(t - 5, t, counters={"prompt_tokens": 1}) for t in range(5, 35, 5)]
    ws = windows(deltas, start=0, end=32, length=10, step=5, target="t", model_name="m")
    assert [(w.start, w.end) for w in ws] == [(0, 10), (5, 15), (10, 20), (15, 25), (20, 30)]
    assert [w.increases["prompt_tokens"] for w in ws] == [2, 2, 2, 2, 2]


def test_windows_with_gaps_between_them() -> None:
    deltas = [d(t - 1, t, counters={"prompt_tokens": t}) for t in range(1, 21)]
    ws = windows(deltas, start=0, end=20, length=2, step=5, target="t", model_name="m")
    # windows (0,2], (5,7], (10,12], (15,17]: ends 1+2, 6+7, 11+12, 16+17
    assert [w.increases["prompt_tokens"] for w in ws] == [3, 13, 23, 33]


def test_windows_reject_non_positive_length_or_step() -> None:
    with pytest.raises(ValueError, match="length"):
        windows([], start=0, end=10, length=0, step=1, target="t", model_name="m")
    with pytest.raises(ValueError, match="step"):
        windows([], start=0, end=10, length=1, step=-1, target="t", model_name="m")


def test_window_shorter_than_range_yields_no_windows() -> None:
    assert windows([], start=0, end=5, length=10, step=1, target="t", model_name="m") == []


# -- sliding windows equal windows recomputed from scratch ---------------------------------

LAYOUTS = [B, (1.0, 2.0, 5.0)]
finite = st.floats(min_value=0, max_value=1e6, allow_subnormal=False)


@st.composite
def deltas_st(draw: st.DrawFn) -> list[IntervalDelta]:
    out = []
    for _ in range(draw(st.integers(0, 25))):
        end = draw(st.floats(min_value=0, max_value=60, allow_nan=False))
        start = end - draw(st.floats(min_value=0, max_value=8, allow_nan=False))
        hists = {}
        if draw(st.booleans()):
            bounds = LAYOUTS[draw(st.integers(0, 3)) // 3]
            counts = st.one_of(finite, st.integers(0, 10**6).map(float))  # mostly whole
            buckets = draw(st.dictionaries(st.integers(0, len(bounds)), counts, max_size=4))
            hists["ttft"] = HistogramDelta(
                bounds,
                {k: v for k, v in buckets.items() if v},
                draw(finite),
                math.fsum(buckets.values()),
            )
        counters = draw(
            st.dictionaries(st.sampled_from(["prompt_tokens", "finished:stop"]), finite)
        )
        gauges = draw(
            st.dictionaries(
                st.sampled_from(["running", "kv_usage"]),
                st.one_of(st.floats(min_value=-5, max_value=5), st.just(math.nan)),
            )
        )
        missing = tuple(draw(st.sets(st.sampled_from(["itl", "waiting"]))))
        out.append(
            d(
                start,
                end,
                histograms=hists,
                counters=counters,
                gauges=gauges,
                reset=draw(st.booleans()),
                missing=missing,
            )
        )
    return out


def naive_increase(
    deltas: list[IntervalDelta], start: float, end: float, name: str
) -> float | None:
    values = [x.counters[name] for x in deltas if start < x.end <= end and name in x.counters]
    return math.fsum(values) if values else None


@settings(max_examples=120, deadline=None)
@given(
    deltas_st(),
    st.floats(min_value=-10, max_value=30, allow_nan=False),
    st.floats(min_value=0.5, max_value=30, allow_nan=False),
    st.floats(min_value=0.5, max_value=15, allow_nan=False),
    st.booleans(),
    st.booleans(),
)
def test_sliding_windows_equal_recomputing_each_window(
    deltas: list[IntervalDelta],
    start: float,
    length: float,
    step: float,
    use_samples: bool,
    tiled: bool,
) -> None:
    end = 70.0
    if tiled:  # windows that tile the range: each starts afresh (the disjoint path)
        step = length
    samples = [(x.end - 1.0, x.gauges) for x in deltas] if use_samples else None
    slid = windows(
        deltas,
        start=start,
        end=end,
        length=length,
        step=step,
        target="t",
        model_name="m",
        gauge_samples=samples,
    )
    # windows end on the grid start + length + k*step, up to and including ``end``
    assert [w.end for w in slid] == [start + length + k * step for k in range(len(slid))]
    assert all(w.end <= end for w in slid)
    assert start + length + len(slid) * step > end
    for w in slid:
        fresh = win(deltas, w.start, w.end, gauge_samples=samples)
        assert w == fresh
        # and against a naive, independent reference for counters and gauges
        for name in ("prompt_tokens", "finished:stop"):
            assert w.increases.get(name) == naive_increase(deltas, w.start, w.end, name)
        source = samples if samples is not None else [(x.end, x.gauges) for x in deltas]
        for g in ("running", "kv_usage"):
            vals = [
                s[g]
                for t, s in sorted(source, key=lambda p: p[0])
                if w.start < t <= w.end and g in s
            ]
            vals = [v for v in vals if not math.isnan(v)]
            if not vals:
                assert g not in w.gauges
                continue
            assert w.gauges[g] == GaugeStats(
                math.fsum(vals) / len(vals), max(vals), vals[-1], vals[0]
            )


def test_sliding_windows_stay_exact_over_long_histories() -> None:
    # A burst of huge values followed by quiet tiny ones: add/subtract in plain floats
    # would leave residue; the exact sums give the same as a fresh window.
    deltas = [
        d(t - 1, t, counters={"prompt_tokens": 1e17 if t < 50 else 0.1}) for t in range(1, 2001)
    ]
    ws = windows(deltas, start=0, end=2000, length=10, step=1, target="t", model_name="m")
    assert ws[-1].increases["prompt_tokens"] == math.fsum([0.1] * 10)
    assert ws[-1] == win(deltas, 1990, 2000)


# -- exact sums, fleet sums, derived numbers -----------------------------------------------


def test_exact_sum_survives_cancellation_and_removal() -> None:
    s = ExactSum()
    for x in (1e16, 1.0, -1e16):
        s.add(x)
    assert s.value() == 1.0  # plain floats give 0.0
    s.sub(1.0)
    assert s.value() == 0.0
    s.add(math.inf)
    assert s.value() == math.inf
    s.sub(math.inf)
    s.add(0.1)
    s.add(0.2)
    assert s.value() == math.fsum([0.1, 0.2])


def test_sum_histogram_deltas_adds_replicas_bucket_by_bucket() -> None:
    a = HistogramDelta(B, {0: 1, 2: 3}, 5.0, 4)
    b = HistogramDelta(B, {2: 1, 3: 2}, 20.0, 3)
    assert sum_histogram_deltas([a, b]) == HistogramDelta(B, {0: 1, 2: 4, 3: 2}, 25.0, 7)
    assert sum_histogram_deltas([]) is None
    with pytest.raises(ValueError, match="bounds"):
        sum_histogram_deltas([a, HistogramDelta((1.0,), {}, 0, 0)])


def test_prefix_hit_ratio_from_counters_or_v0_gauge() -> None:
    w = win([d(0, 5, counters={"prefix_queries": 200, "prefix_hits": 50})], 0, 5)
    assert prefix_hit_ratio(w) == 0.25
    w = win([d(0, 5, counters={"prefix_queries": 0, "prefix_hits": 0})], 0, 5)
    assert prefix_hit_ratio(w) is None
    w = win([d(0, 5, gauges={"prefix_hit_rate": 0.4})], 0, 5)
    assert prefix_hit_ratio(w) == 0.4
    w = win([d(0, 5, gauges={"prefix_hit_rate": -1.0})], 0, 5)  # V0: caching off
    assert prefix_hit_ratio(w) is None


def test_mean_lengths_and_finished_requests() -> None:
    w = win(
        [
            d(
                0,
                5,
                histograms={
                    "prompt_len": HistogramDelta((100.0, 1000.0), {0: 1, 1: 3}, 2000.0, 4),
                    "gen_len": HistogramDelta((100.0, 1000.0), {1: 4}, 1200.0, 4),
                },
                counters={"finished:stop": 3, "finished:length": 1, "prompt_tokens": 2000},
            )
        ],
        0,
        5,
    )
    assert mean_prompt_len(w) == 500.0  # 2000 / 4
    assert mean_gen_len(w) == 300.0  # 1200 / 4
    assert finished_requests(w) == 4
    assert finished_requests(win([], 0, 5)) is None
