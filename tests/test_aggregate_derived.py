"""The derived numbers of a window (``app.windows.derived.derive``): what each is made
of, and None — never 0 — when an input is missing."""

from __future__ import annotations

import dataclasses

import pytest

from app.model import DERIVED_SIGNALS, HistogramDelta, IntervalDelta, Window
from app.windows.aggregate import window, windows

STEP_BOUNDS = (1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0)


def d(
    end: float,
    *,
    counters: dict[str, float] | None = None,
    gauges: dict[str, float] | None = None,
    histograms: dict[str, HistogramDelta] | None = None,
) -> IntervalDelta:
    return IntervalDelta(
        target="t",
        model_name="m",
        start=end - 5.0,
        end=end,
        histograms=histograms or {},
        counters=counters or {},
        gauges=gauges or {},
    )


def win(deltas: list[IntervalDelta], start: float = 0.0, end: float = 60.0) -> Window:
    return window(deltas, start=start, end=end, target="t", model_name="m")


def test_every_derived_number_is_none_without_inputs() -> None:
    w = win([d(5.0)])
    assert all(getattr(w.derived, name) is None for name in DERIVED_SIGNALS)


def test_completion_rate_counts_every_finish_reason_over_the_covered_time() -> None:
    deltas = [d(5.0 * k, counters={"finished:stop": 2, "finished:length": 1}) for k in range(1, 13)]
    assert win(deltas).derived.completion_rate == pytest.approx(36 / 60)


def test_no_request_finished_is_a_rate_of_zero_not_unknown() -> None:
    deltas = [d(5.0 * k, counters={"finished:stop": 0}) for k in range(1, 13)]
    assert win(deltas).derived.completion_rate == 0.0


def test_arrival_rate_adds_the_queue_growth_between_first_and_last_sample() -> None:
    # 1 completion/s; running + waiting grows from 10 to 65 over the 55 s between samples
    deltas = [
        d(5.0 * k, counters={"finished:stop": 5}, gauges={"running": 10, "waiting": 5 * (k - 1)})
        for k in range(1, 13)
    ]
    derived = win(deltas).derived
    assert derived.completion_rate == pytest.approx(1.0)
    assert derived.arrival_rate == pytest.approx(1.0 + 55 / 55)
    assert derived.waiting_avg == pytest.approx(27.5)


def test_arrival_rate_counts_rejections_where_the_page_has_them() -> None:
    deltas = [
        d(
            5.0 * k,
            counters={"finished:stop": 5, "admission_rejections": 10},
            gauges={"running": 32, "waiting": 200},
        )
        for k in range(1, 13)
    ]
    derived = win(deltas).derived
    assert derived.rejection_rate == pytest.approx(2.0)
    assert derived.arrival_rate == pytest.approx(3.0)


def test_arrival_rate_needs_two_gauge_samples() -> None:
    deltas = [d(60.0, counters={"finished:stop": 5}, gauges={"running": 1, "waiting": 0})]
    w = win(deltas)
    assert w.gauge_span == 0.0
    assert w.derived.completion_rate == pytest.approx(1.0)
    assert w.derived.arrival_rate is None


def test_a_frozen_queue_with_nothing_finished_reads_as_no_arrivals() -> None:
    # a hung engine: gauges stay where the last step left them, no counter moves
    deltas = [
        d(5.0 * k, counters={"finished:stop": 0}, gauges={"running": 12, "waiting": 3})
        for k in range(1, 13)
    ]
    assert win(deltas).derived.arrival_rate == 0.0


def test_prefix_hit_rate_and_uncached_prompt_tokens_from_the_sources() -> None:
    ttft = HistogramDelta((1.0,), {0: 2.0}, 0.5, 2.0)
    deltas = [
        d(
            5.0 * k,
            counters={
                "prompt_tokens": 1000,
                "prefix_queries": 1000,
                "prefix_hits": 850,
                "prompt_tokens_local_compute": 150,
                "prompt_tokens_local_cache_hit": 850,
            },
            histograms={"ttft": ttft},
        )
        for k in range(1, 13)
    ]
    derived = win(deltas).derived
    assert derived.prefix_cache_hit_rate == pytest.approx(0.85)
    assert derived.uncached_prompt_tokens_per_s == pytest.approx(150 / 5)
    assert derived.uncached_prompt_tokens_mean == pytest.approx(75.0)  # per first token


def test_uncached_prompt_tokens_fall_back_to_the_hit_rate_on_older_pages() -> None:
    prompt_len = HistogramDelta((100.0, 1000.0), {1: 4.0}, 2000.0, 4.0)
    deltas = [
        d(
            5.0 * k,
            counters={"prompt_tokens": 400, "prefix_queries": 400, "prefix_hits": 100},
            histograms={"prompt_len": prompt_len},
        )
        for k in range(1, 13)
    ]
    derived = win(deltas).derived
    assert derived.prompt_tokens_mean == 500.0
    assert derived.uncached_prompt_tokens_mean == pytest.approx(375.0)
    assert derived.uncached_prompt_tokens_per_s == pytest.approx(60.0)


def test_spec_decode_acceptance_is_accepted_over_draft_tokens() -> None:
    counters = {"spec_drafts": 10, "spec_draft_tokens": 40, "spec_accepted_tokens": 30}
    derived = win([d(5.0 * k, counters=counters) for k in range(1, 13)]).derived
    assert derived.spec_decode_acceptance == pytest.approx(0.75)
    assert derived.spec_decode_accepted_per_draft == pytest.approx(3.0)


def test_no_draft_in_the_window_leaves_the_acceptance_unknown() -> None:
    counters = {"spec_drafts": 0, "spec_draft_tokens": 0, "spec_accepted_tokens": 0}
    derived = win([d(5.0 * k, counters=counters) for k in range(1, 13)]).derived
    assert derived.spec_decode_acceptance is None


def test_engine_steps_come_from_the_step_tokens_count() -> None:
    # 40 steps of 100 tokens every 5 s → 8 steps/s
    step = HistogramDelta(STEP_BOUNDS, {5: 40.0}, 4000.0, 40.0)  # (64, 128]
    derived = win([d(5.0 * k, histograms={"step_tokens": step}) for k in range(1, 13)]).derived
    assert derived.steps_per_s == pytest.approx(8.0)
    assert derived.tokens_per_step_mean == pytest.approx(100.0)
    assert derived.step_tokens_p99 is not None and 64.0 < derived.step_tokens_p99 <= 128.0


def test_sliding_windows_derive_the_same_numbers_as_one_window() -> None:
    deltas = [
        d(
            5.0 * k,
            counters={
                "finished:stop": k % 3,
                "spec_draft_tokens": 4,
                "spec_accepted_tokens": k % 5,
            },
            gauges={"running": k % 7, "waiting": k % 5, "waiting_capacity": k % 5},
        )
        for k in range(1, 61)
    ]
    slid = windows(deltas, start=0.0, end=300.0, length=60.0, step=15.0, target="t", model_name="m")
    for w in slid:
        fresh = win(deltas, w.start, w.end)
        assert dataclasses.asdict(w.derived) == dataclasses.asdict(fresh.derived)
        assert w.gauge_span == fresh.gauge_span
