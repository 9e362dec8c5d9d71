"""A stalled engine, the sub-causes that name why a class holds, speculative decoding judged
per token, and the one judgement of an SLO breach — from hand-built windows."""

from __future__ import annotations

import dataclasses

from app.diagnose import DiagnosisClass, SubCause, diagnose
from app.diagnose.classify import with_baseline
from app.diagnose.slo import Breach, verdict
from app.model import Derived, HistogramDelta, Quantile, Window
from tests.diagnose_windows import BOUNDS, make_window

C = DiagnosisClass
S = SubCause
CAPACITY = {"more-replicas", "max-num-seqs-up", "quantize-weights", "batched-tokens-up"}


def _ev(d, rule, signal):
    return next(e for e in d.evidence if e.rule == rule and e.signal == signal)


def _with(w: Window, *, derived: Derived | None = None, **increases: float) -> Window:
    return dataclasses.replace(
        w,
        derived=derived if derived is not None else w.derived,
        increases={**w.increases, **increases},
    )


def _frozen(**kw) -> Window:
    """Requests in the engine, and nothing moved: no token, step or finished request."""
    args = dict(
        ttft=(0, 0, 0, 0),
        itl=(0, 0, 0, 0),
        queue_time=(0, 0),
        step_tokens=(0, 0, 0),
        running=(33.0, 33.0),
        waiting=(0.0, 0.0, 0.0),
        kv=(0.4, 0.4),
        prompt_tokens=0,
        generation_tokens=0,
        prefix=(0, 0),
        finished=0,
    )
    args.update(kw)
    return make_window(**args)


# --- stalled -----------------------------------------------------------------------------


def test_requests_in_the_engine_and_no_progress_for_the_whole_window_is_stalled():
    d = diagnose(_frozen())
    assert d.cls is C.STALLED and d.sub_cause is None
    assert d.confidence == 1.0
    assert _ev(d, "stalled", "engine_steps").holds is True
    assert _ev(d, "stalled", "requests_in_engine").value == 33
    gap = _ev(d, "stalled", "seconds_without_progress")
    assert (gap.value, gap.ge) == (60.0, True)
    assert "whole 60 s window" in d.summary
    ids = [h.id for h in d.hints]
    assert ids[0] == "engine-health"
    assert {"hang-collective", "hang-structured-output", "hang-kv-transfer"} <= set(ids)
    assert not set(ids) & CAPACITY


def test_a_stall_beats_every_load_class_and_its_frozen_gauges_are_no_findings():
    # A queue and a full pool frozen at the last step: no load finding is listed beside it.
    d = diagnose(_frozen(waiting=(12.0, 12.0, 12.0), kv=(0.95, 0.95)))
    assert d.cls is C.STALLED
    assert d.secondary == ()


def test_only_waiting_requests_and_no_progress_is_stalled():
    d = diagnose(_frozen(running=(0.0, 0.0), waiting=(3.0, 3.0, 3.0)))
    assert d.cls is C.STALLED


def test_one_engine_step_is_progress():
    d = diagnose(_frozen(step_tokens=(33.0, 33.0, 1)))
    assert d.cls is not C.STALLED


def test_gauges_that_moved_do_not_make_a_window_without_progress_less_of_a_stall():
    # A scheduler that keeps admitting while its executor hangs moves them (issue #44):
    # the rule reads progress, never the gauges' motion (tests/test_stall_rule.py).
    d = diagnose(_frozen(kv=(0.4, 0.5)))
    assert d.cls is C.STALLED
    moved = _ev(d, "stalled", "gauges_moved")
    assert (moved.value, moved.holds) == (1.0, None)


def test_a_page_without_a_step_counter_is_judged_on_tokens_and_finishes():
    d = diagnose(_frozen(step_tokens=None, missing=("step_tokens",)))
    assert d.cls is C.STALLED
    assert not any(e.signal == "engine_steps" for e in d.evidence)
    assert "no engine step" not in d.summary


def test_failed_scrapes_cannot_prove_a_stall():
    d = diagnose(_frozen(), failed_scrapes=8, attempted_scrapes=13)
    assert d.cls is C.INSUFFICIENT_DATA


def test_nothing_in_the_engine_and_no_progress_is_idle_not_stalled():
    d = diagnose(_frozen(running=(0.0, 0.0), kv=(0.0, 0.0)))
    assert d.cls is C.IDLE


# --- queue sub-causes --------------------------------------------------------------------

_QUEUED = dict(
    ttft=(2.0, 9.0, 60, 4.0),
    queue_time=(3.5, 60),
    prefill_time=0.2,
    waiting=(20.0, 25.0, 24.0),
    running=(32.0, 32.0),
)


def test_without_a_baseline_a_queue_is_an_arrival_surge_with_both_rates_shown():
    w = _with(make_window(**_QUEUED), derived=Derived(arrival_rate=3.0, completion_rate=2.0))
    d = diagnose(w)
    assert (d.cls, d.sub_cause) == (C.QUEUE_BOUND, S.ARRIVAL_SURGE)
    e = _ev(d, "queue_bound", "arrival_rate")
    assert (e.value, e.threshold, e.holds) == (3.0, 2.0, True)
    assert d.hints[0].id == "more-replicas"


def test_completions_that_fell_at_steady_arrivals_are_capacity_loss():
    now = Derived(arrival_rate=1.7, completion_rate=1.2, output_tokens_mean=300.0)
    before = Derived(arrival_rate=1.65, completion_rate=1.65, output_tokens_mean=300.0)
    w = _with(make_window(**_QUEUED), derived=now)
    d = diagnose(w, baseline=before)
    assert (d.cls, d.sub_cause) == (C.QUEUE_BOUND, S.CAPACITY_LOSS)
    assert d.hints[0].id == "check-slowdown"
    assert "lost capacity" in d.summary


def test_arrivals_that_rose_are_a_surge_even_against_a_baseline():
    now = Derived(arrival_rate=16.0, completion_rate=6.0, output_tokens_mean=200.0)
    before = Derived(arrival_rate=4.0, completion_rate=4.0, output_tokens_mean=200.0)
    d = diagnose(_with(make_window(**_QUEUED), derived=now), baseline=before)
    assert d.sub_cause is S.ARRIVAL_SURGE


def test_fewer_completions_of_longer_answers_are_not_lost_capacity():
    now = Derived(arrival_rate=1.0, completion_rate=0.5, output_tokens_mean=1200.0)
    before = Derived(arrival_rate=1.0, completion_rate=1.0, output_tokens_mean=200.0)
    d = diagnose(_with(make_window(**_QUEUED), derived=now), baseline=before)
    assert d.sub_cause is S.ARRIVAL_SURGE


def test_deferred_waiting_is_not_capacity_and_not_kv_pressure():
    # The pool is full, but 90 % of the waiting requests are deferred (a KV transfer, a
    # LoRA budget), not blocked for blocks: no KV pressure, no capacity advice.
    derived = Derived(waiting_deferred_avg=18.0, waiting_capacity_avg=2.0 * 0.25)
    w = _with(make_window(**{**_QUEUED, "kv": (0.93, 0.95)}), derived=derived)
    d = diagnose(w)
    assert (d.cls, d.sub_cause) == (C.QUEUE_BOUND, S.DEFERRED)
    assert _ev(d, "queue_bound", "waiting_deferred_share").holds is True
    ids = [h.id for h in d.hints]
    assert ids[0] == "deferred-admission" and not set(ids) & CAPACITY
    assert "not short of capacity" in d.summary


# --- prefill sub-causes ------------------------------------------------------------------

_SLOW_PREFILL = dict(ttft=(1.8, 4.9, 8, 2.6), queue_time=(0.05, 8), prompt_len=24000.0)


def test_long_computed_prompts_without_a_baseline_are_long_prompts():
    d = diagnose(make_window(**_SLOW_PREFILL, prefix=(192000.0, 4000.0)))
    assert (d.cls, d.sub_cause) == (C.PREFILL_BOUND, S.LONG_PROMPTS)
    assert d.hints[0].id == "shorter-prompt"


def test_prefix_caching_off_is_a_cache_miss():
    d = diagnose(make_window(**_SLOW_PREFILL, prefix=(0.0, 0.0), prompt_tokens=192000.0))
    assert (d.cls, d.sub_cause) == (C.PREFILL_BOUND, S.PREFIX_CACHE_MISS)
    assert d.hints[0].id == "prefix-caching"


def test_a_hit_rate_that_collapsed_against_the_baseline_is_a_cache_miss():
    now = Derived(prompt_tokens_mean=23700.0, prefix_cache_hit_rate=0.05)
    before = Derived(prompt_tokens_mean=24000.0, prefix_cache_hit_rate=0.85)
    w = _with(make_window(**_SLOW_PREFILL, prefix=(192000.0, 9600.0)), derived=now)
    d = diagnose(w, baseline=before)
    assert (d.cls, d.sub_cause) == (C.PREFILL_BOUND, S.PREFIX_CACHE_MISS)
    assert d.hints[0].id == "stable-prefix"


def test_prompts_that_grew_against_the_baseline_are_long_prompts():
    now = Derived(prompt_tokens_mean=24000.0, prefix_cache_hit_rate=0.01)
    before = Derived(prompt_tokens_mean=2000.0, prefix_cache_hit_rate=0.1)
    w = _with(make_window(**_SLOW_PREFILL, prefix=(192000.0, 1900.0)), derived=now)
    assert diagnose(w, baseline=before).sub_cause is S.LONG_PROMPTS


def test_with_baseline_re_decides_the_sub_cause_of_an_already_made_diagnosis():
    now = Derived(prompt_tokens_mean=23700.0, prefix_cache_hit_rate=0.05)
    before = Derived(prompt_tokens_mean=24000.0, prefix_cache_hit_rate=0.85)
    w = _with(make_window(**_SLOW_PREFILL, prefix=(192000.0, 9600.0)), derived=now)
    d = diagnose(w)
    assert d.sub_cause is S.LONG_PROMPTS
    again = with_baseline(d, w, before)
    assert again.sub_cause is S.PREFIX_CACHE_MISS
    assert (again.cls, again.confidence) == (d.cls, d.confidence)
    assert again.hints[0].id == "stable-prefix"
    assert with_baseline(d, w, None) is d


# --- speculative decoding ----------------------------------------------------------------


def _tpot(p99: float, n: float = 30) -> dict:
    """TPOT quantiles and histogram (ITL bounds), the p99 rank in ``p99``'s bucket."""
    bounds = BOUNDS["itl"]
    i99 = next(i for i, b in enumerate(bounds) if p99 <= b)
    hist = HistogramDelta(bounds, {2: 0.95 * n, i99: 0.05 * n}, n * p99 * 0.6, n)
    return {
        "quantiles": {"p50": Quantile(0.04), "p90": Quantile(p99), "p99": Quantile(p99)},
        "hist": hist,
        "n": n,
    }


def _speculating(itl_p99: float, tpot_p99: float | None, accepted: float) -> Window:
    w = make_window(itl=(0.13, itl_p99, 6000, 0.13))
    increases = {"spec_drafts": 1000.0, "spec_draft_tokens": 4000.0}
    increases["spec_accepted_tokens"] = accepted * 1000.0
    derived = Derived(spec_decode_acceptance=accepted / 4, spec_decode_accepted_per_draft=accepted)
    w = _with(w, derived=derived, **increases)
    if tpot_p99 is None:
        return w
    t = _tpot(tpot_p99)
    return dataclasses.replace(
        w,
        quantiles={**w.quantiles, "tpot": t["quantiles"]},
        histograms={**w.histograms, "tpot": t["hist"]},
        observations={**w.observations, "tpot": t["n"]},
    )


def test_a_healthy_speculating_server_is_not_decode_bound():
    # Gaps between output events of ~3.3 tokens pass 100 ms; per token it is ~50 ms.
    d = diagnose(_speculating(itl_p99=0.19, tpot_p99=0.05, accepted=2.3))
    assert d.cls is C.HEALTHY
    assert d.itl_slo == "within"
    e = _ev(d, "decode_bound", "tpot_p99")
    assert "speculative decoding" in e.note


def test_a_drafter_that_stopped_being_accepted_is_a_spec_decode_regression():
    d = diagnose(_speculating(itl_p99=0.2, tpot_p99=0.149, accepted=0.33))
    assert (d.cls, d.sub_cause) == (C.DECODE_BOUND, S.SPEC_DECODE_REGRESSION)
    assert d.itl_slo == "over"
    assert d.hints[0].id == "spec-decode-drafter"


def test_slow_steps_with_a_good_drafter_are_no_spec_regression():
    d = diagnose(_speculating(itl_p99=0.6, tpot_p99=0.149, accepted=2.3))
    assert d.cls is C.DECODE_BOUND
    assert d.sub_cause in (S.PREFILL_INTERFERENCE, S.BANDWIDTH_BOUND)


def test_against_a_baseline_the_regression_is_what_restoring_acceptance_would_fix():
    w = _speculating(itl_p99=0.2, tpot_p99=0.149, accepted=0.33)
    fell = diagnose(w, baseline=Derived(spec_decode_accepted_per_draft=2.35))
    assert fell.sub_cause is S.SPEC_DECODE_REGRESSION
    e = _ev(fell, "decode_bound", "per_token_p99_at_baseline_acceptance")
    assert e.holds is True and e.value < 0.1
    # The drafter was as bad before: the acceptance did not regress.
    same = diagnose(w, baseline=Derived(spec_decode_accepted_per_draft=0.33))
    assert same.sub_cause is not S.SPEC_DECODE_REGRESSION


def test_without_tpot_decode_is_judged_on_itl_per_token_and_never_proven():
    d = diagnose(_speculating(itl_p99=0.2, tpot_p99=None, accepted=0.33))
    e = _ev(d, "decode_bound", "itl_p99_per_token")
    assert abs(e.value - 0.2 / 1.33) < 1e-9
    assert d.itl_slo in ("unproven", "within")


# --- one judgement of a breach -----------------------------------------------------------


def test_the_verdict_of_a_breach():
    assert verdict(True, True) == "over"
    assert verdict(True, False) == "unproven"
    assert verdict(False, True) == verdict(False, False) == "within"
    assert verdict(None, False) is None
    assert Breach(True, False, None).verdict == "unproven"  # type: ignore[arg-type]


def test_a_p99_in_the_bucket_around_the_slo_is_unproven_and_the_diagnosis_says_so():
    # 200 first tokens, 4 of them in (1, 2.5] s with a mean of 2.3 s: interpolation says
    # p99 ≈ 2.1 s; the buckets cannot prove it over the 2 s SLO.
    w = make_window(
        ttft=(0.25, 2.1, 200, 0.3),
        buckets={"ttft": {8: 196.0, 12: 4.0}},
    )
    w = dataclasses.replace(
        w,
        histograms={
            **w.histograms,
            "ttft": HistogramDelta(BOUNDS["ttft"], {8: 196.0, 12: 4.0}, 196 * 0.2 + 4 * 2.3, 200),
        },
    )
    d = diagnose(w)
    assert d.ttft_slo == "unproven"
    assert d.to_dict()["ttft_slo"] == "unproven"
    assert "unproven" in _ev(d, "prefill_bound", "ttft_p99").note


def test_a_p99_in_a_bucket_above_the_slo_is_over_and_one_below_within():
    over = diagnose(make_window(ttft=(0.25, 6.0, 200, 0.4)))
    assert over.ttft_slo == "over"
    within = diagnose(make_window())
    assert (within.ttft_slo, within.itl_slo) == ("within", "within")
