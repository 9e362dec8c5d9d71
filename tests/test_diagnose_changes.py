"""What changed: the ranking against a healthy baseline (pure), the baseline's assembly
(timeline and store), and where the changes show (summary, alerts, Markdown)."""

from __future__ import annotations

import asyncio
import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest

from app.alerts.fields import stream_fields
from app.config import Settings
from app.diagnose import Diagnosis, DiagnosisClass
from app.diagnose.changes import (
    MIN_HEALTHY_S,
    SIGNALS,
    Baseline,
    change_of,
    headline,
    rank,
    with_changes,
)
from app.diagnose.records import BaselineInfo, Change
from app.diagnose.render import render
from app.evaluate.baseline import (
    Segment,
    StoreBaselines,
    Timeline,
    assemble,
    healthy_spans,
    history_for_url,
    merge_derived,
    run_state,
)
from app.evaluate.replay import diagnose_recording
from app.evaluate.round import Evaluator
from app.evaluate.settings import diagnosis_config
from app.model import Derived, GaugeStats, Window
from app.sim.record import record
from app.sim.scenario import from_tree, read_tree
from app.sources.recording import record_into
from app.store.diagnoses import DiagnosisStore
from app.store.sqlite import Store

C = DiagnosisClass


def derived(**kw: float | None) -> Derived:
    """A healthy chat server's numbers, with ``kw`` changed."""
    base: dict[str, float | None] = {
        "arrival_rate": 2.0,
        "completion_rate": 2.0,
        "prompt_tokens_mean": 3500.0,
        "output_tokens_mean": 200.0,
        "prefix_cache_hit_rate": 0.85,
        "running_avg": 8.0,
        "preemptions_rate": 0.0,
        "kv_usage_avg": 0.3,
        "step_tokens_p99": 512.0,
        "steps_per_s": 40.0,
    }
    base.update(kw)
    return Derived(**base)


def signals(changes: tuple[Change, ...]) -> list[str]:
    return [c.signal for c in changes]


# -- the ranking, per symptom --------------------------------------------------------------


def test_a_hit_rate_collapse_heads_a_prefill_bound_window_with_its_effect() -> None:
    changes = rank(derived(prefix_cache_hit_rate=0.05), derived(), "prefill_bound")
    first = changes[0]
    assert first.signal == "prefix_cache_hit_rate"
    assert first.share == 1.0
    assert first.effect == "uncached_prompt_tokens_mean"
    assert first.effect_ratio == pytest.approx(0.95 / 0.15)
    assert first.ratio == pytest.approx(0.05 / 0.85)
    assert first.text() == "prefix-cache hit rate fell 0.85 → 0.05, uncached prompt tokens ×6.3"


def test_a_longer_prompt_heads_a_prefill_bound_window_not_the_batch_it_grows() -> None:
    now = derived(prompt_tokens_mean=24000.0, running_avg=30.0, kv_usage_avg=0.8)
    changes = rank(now, derived(), "prefill_bound")
    assert changes[0].signal == "prompt_tokens_mean"
    assert changes[0].effect_ratio == pytest.approx(24000 / 3500)
    # The consequences are listed, explaining nothing.
    assert {c.signal: c.share for c in changes}["running_avg"] == 0.0


def test_prefill_attributes_to_the_factor_that_moved_most() -> None:
    # Prompt ×2 and hit 0.85 → 0.05 (miss ×6.3): the hit rate explains more.
    now = derived(prompt_tokens_mean=7000.0, prefix_cache_hit_rate=0.05)
    changes = rank(now, derived(), "prefill_bound")
    assert signals(changes)[:2] == ["prefix_cache_hit_rate", "prompt_tokens_mean"]
    shares = {c.signal: c.share for c in changes}
    assert shares["prefix_cache_hit_rate"] == pytest.approx(
        math.log(6.333) / (math.log(6.333) + math.log(2)), rel=1e-3
    )


def test_queue_more_arrivals_at_steady_completions_name_the_arrivals() -> None:
    now = derived(arrival_rate=8.0, completion_rate=3.0, running_avg=64.0)
    assert rank(now, derived(), "queue_bound")[0].signal == "arrival_rate"


def test_queue_fewer_completions_at_steady_arrivals_name_the_completions() -> None:
    now = derived(completion_rate=1.2, steps_per_s=13.0, running_avg=32.0)
    changes = rank(now, derived(), "queue_bound")
    assert changes[0].signal == "completion_rate"
    assert changes[0].share == 1.0


def test_queue_fewer_completions_of_longer_answers_name_the_answers() -> None:
    now = derived(completion_rate=1.0, output_tokens_mean=2000.0, prompt_tokens_mean=300.0)
    before = derived(prompt_tokens_mean=300.0)
    assert rank(now, before, "queue_bound")[0].signal == "output_tokens_mean"


def test_decode_a_drafter_mismatch_beats_the_batch_it_grows() -> None:
    before = derived(
        spec_decode_acceptance=0.59, spec_decode_accepted_per_draft=2.35, running_avg=7.0
    )
    now = derived(
        spec_decode_acceptance=0.08, spec_decode_accepted_per_draft=0.32, running_avg=19.0
    )
    changes = rank(now, before, "decode_bound", "bandwidth_bound")
    assert changes[0].signal == "spec_decode_acceptance"
    assert changes[0].effect == "steps_per_output_token"
    assert changes[0].effect_ratio == pytest.approx(3.35 / 1.32)


def test_decode_longer_answers_beat_the_batch_they_grow() -> None:
    # ×8 answers at the same arrivals: the batch grows ×8 and a little more (slower steps).
    now = derived(output_tokens_mean=1600.0, running_avg=90.0, kv_usage_avg=0.7)
    changes = rank(now, derived(), "decode_bound", "bandwidth_bound")
    assert changes[0].signal == "output_tokens_mean"


def test_a_stopped_engine_is_the_change_whatever_the_class() -> None:
    now = derived(steps_per_s=0.0, completion_rate=0.0, arrival_rate=0.0)
    for cls in ("queue_bound", "stalled", "kv_pressure"):
        assert rank(now, derived(), cls)[0].signal == "steps_per_s"


def test_a_missing_value_is_skipped_never_zero() -> None:
    now = derived(prompt_tokens_mean=None, prefix_cache_hit_rate=0.05)
    before = derived(arrival_rate=None)
    changes = rank(now, before, "prefill_bound")
    assert "prompt_tokens_mean" not in signals(changes)
    assert "arrival_rate" not in signals(changes)
    assert changes[0].signal == "prefix_cache_hit_rate"
    assert set(signals(changes)) <= set(SIGNALS)


def test_latencies_are_never_candidates() -> None:
    assert not {s for s in SIGNALS if "ttft" in s or "itl" in s or "latency" in s}


def test_noise_explains_nothing_and_a_small_sample_is_shrunk() -> None:
    # Everything within ×1.1: no change explains the symptom.
    now = derived(arrival_rate=2.1, prompt_tokens_mean=3600.0)
    assert all(c.share == 0 for c in rank(now, derived(), "prefill_bound"))
    assert headline(rank(now, derived(), "prefill_bound")) is None
    # 17 arrivals in a minute, ×2.4: within sampling error of nothing much; the hit rate
    # (read from many tokens) explains most.
    now = derived(arrival_rate=0.28, completion_rate=0.17, prefix_cache_hit_rate=0.0)
    before = derived(arrival_rate=0.115, completion_rate=0.118)
    plain = rank(now, before, "prefill_bound")
    shrunk = rank(now, before, "prefill_bound", seconds=60.0, baseline_seconds=800.0)
    share = {c.signal: c.share for c in shrunk}
    assert shrunk[0].signal == "prefix_cache_hit_rate"
    assert share["arrival_rate"] < {c.signal: c.share for c in plain}["arrival_rate"]


# -- the diagnosis and its summary ---------------------------------------------------------


def diagnosis(cls: DiagnosisClass = C.PREFILL_BOUND) -> Diagnosis:
    return Diagnosis(
        target="t",
        model_name="m",
        start=0.0,
        end=60.0,
        cls=cls,
        confidence=1.0,
        summary="Prefill-bound: TTFT p99 2.50 s > 2.00 s with little queueing",
    )


def window_of(d: Derived, covered: float = 60.0) -> Window:
    return Window(
        target="t",
        model_name="m",
        start=0.0,
        end=60.0,
        quantiles={},
        means={},
        observations={},
        increases={},
        rates={},
        gauges={},
        histograms={},
        covered=covered,
        intervals=12,
        derived=d,
    )


def info(healthy_s: float = 900.0) -> BaselineInfo:
    return BaselineInfo(run_start=60.0, healthy_s=healthy_s, needed_s=MIN_HEALTHY_S)


def test_the_summary_says_the_headline() -> None:
    d = with_changes(
        diagnosis(), window_of(derived(prefix_cache_hit_rate=0.05)), Baseline(derived(), info())
    )
    assert d.changes[0].signal == "prefix_cache_hit_rate"
    assert d.summary.endswith(
        "; what changed: prefix-cache hit rate fell 0.85 → 0.05, uncached prompt tokens ×6.3"
    )
    out = d.to_dict()
    assert out["changes"][0] == {
        "signal": "prefix_cache_hit_rate",
        "baseline": 0.85,
        "value": 0.05,
        "ratio": pytest.approx(0.0588, rel=1e-2),
        "share": 1.0,
        "effect": "uncached_prompt_tokens_mean",
        "effect_ratio": pytest.approx(6.333, rel=1e-3),
    }
    assert out["baseline"]["enough"] is True
    assert "what changed (against the healthy baseline" in render(d)
    assert change_of(out) == "what changed: " + d.changes[0].text()


def test_too_little_healthy_history_means_no_changes_and_says_so() -> None:
    d = with_changes(
        diagnosis(), window_of(derived(prefix_cache_hit_rate=0.05)), Baseline(None, info(90.0))
    )
    assert d.changes == ()
    assert d.summary.endswith(
        "no healthy baseline: 1.5 min of healthy windows in the hour before this began "
        "(2 min needed for a short baseline, 10 for the full one)"
    )
    none = with_changes(diagnosis(), window_of(derived()), None, no_history="no store")
    assert none.changes == () and none.baseline is None
    assert none.summary.endswith("; no baseline: no store")


def test_a_window_that_is_no_problem_is_not_compared() -> None:
    for cls in (C.HEALTHY, C.IDLE, C.INSUFFICIENT_DATA):
        d = diagnosis(cls)
        assert with_changes(d, window_of(derived()), Baseline(derived(), info())) is d
        assert change_of(d.to_dict()) is None


def test_the_alert_field_carries_the_headline() -> None:
    d = with_changes(
        diagnosis(), window_of(derived(prefix_cache_hit_rate=0.05)), Baseline(derived(), info())
    )
    flat: dict[str, Any] = {"target": "t", "model_name": "m", "end": 60.0}
    fields = stream_fields(
        flat, d.to_dict(), {}, slo_ttft_p99=2.0, slo_itl_p99=0.1, ui_base_url="http://x/ui"
    )
    assert fields["change"] == "what changed: " + d.changes[0].text()


# -- which windows make the baseline -------------------------------------------------------


def test_the_run_survives_missing_data_and_ends_on_health() -> None:
    state = None
    seen = []
    for end, cls in [
        (15, "healthy"),
        (30, "queue_bound"),
        (45, "insufficient_data"),
        (60, "kv_pressure"),
        (75, "healthy"),
        (90, "insufficient_data"),
        (105, "prefill_bound"),
    ]:
        state = run_state(cls, state, end)
        seen.append(state)
    assert seen == [None, 30, 30, 30, None, None, 105]


def test_only_seconds_every_window_judged_healthy_count() -> None:
    segs = [Segment(e - 60, e, "healthy") for e in range(60, 1000, 15)]
    segs += [Segment(e - 60, e, "queue_bound") for e in (400, 415)]  # a blip
    segs.append(Segment(940, 1000, "prefill_bound"))  # the run's first window
    spans = healthy_spans(segs, 1000)
    assert spans == [(0, 340), (415, 940)]
    # A lone healthy window amid problem windows adds nothing.
    lone = [Segment(e - 60, e, "queue_bound") for e in range(60, 300, 15)]
    lone.append(Segment(240, 300, "healthy"))
    lone += [Segment(e - 60, e, "queue_bound") for e in range(315, 400, 15)]
    assert healthy_spans(lone, 400) == []
    # Only the hour before the run began.
    assert healthy_spans([Segment(0, 5000, "healthy")], 5000) == [(1400, 5000)]


def test_merged_numbers_weigh_each_window_by_its_denominator() -> None:
    def w(covered: float, prompts: float, prompt_mean: float, kv: float) -> Window:
        out = window_of(
            derived(prompt_tokens_mean=prompt_mean, arrival_rate=prompts / covered, kv_usage_avg=kv)
        )
        return dataclasses.replace(
            out,
            covered=covered,
            observations={"prompt_len": prompts},
            gauges={"kv_usage": GaugeStats(kv, kv)},
        )

    m = merge_derived([w(60.0, 10.0, 1000.0, 0.2), w(540.0, 30.0, 3000.0, 0.4)])
    assert m.prompt_tokens_mean == pytest.approx((10 * 1000 + 30 * 3000) / 40)
    assert m.arrival_rate == pytest.approx(40 / 600)
    assert m.kv_usage_avg == pytest.approx((60 * 0.2 + 540 * 0.4) / 600)
    assert merge_derived([]).arrival_rate is None


def test_assemble_needs_ten_healthy_minutes_for_the_full_baseline() -> None:
    calls: list[tuple[float, float]] = []

    def window_at(a: float, b: float) -> Window:
        calls.append((a, b))
        return window_of(derived(), covered=b - a)

    # 500 s: a short baseline (tests/test_baseline_short.py); the full one needs 600.
    short = assemble([(0.0, 300.0), (400.0, 600.0)], 700.0, window_at)
    assert short.derived is not None and short.info.healthy_s == 500.0 and short.info.short
    calls.clear()
    enough = assemble([(0.0, 300.0), (400.0, 720.0)], 800.0, window_at)
    assert enough.derived is not None and enough.info.enough and not enough.info.short
    assert calls == [(0.0, 300.0), (400.0, 720.0)]
    none = assemble([(0.0, 100.0)], 200.0, window_at, min_short=MIN_HEALTHY_S)
    assert none.derived is None and not none.info.enough


# -- replay, the service and diagnose URL, on a recording ------------------------------------


@pytest.fixture(scope="module")
def collapse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """prefix_cache_collapse: 15 healthy minutes, then the hit rate collapses."""
    folder = tmp_path_factory.mktemp("collapse")
    tree = read_tree("prefix_cache_collapse")
    tree.setdefault("name", "prefix_cache_collapse")
    tree.pop("loop_s", None)
    tree["duration_s"] = 1200.0
    record(from_tree(tree, {}), folder, seed=1)
    return folder


def test_replay_names_the_collapse_against_the_healthy_quarter_hour(collapse: Path) -> None:
    diagnoses = diagnose_recording(collapse)
    t0 = diagnoses[0].start
    late = [d for d in diagnoses if d.end - t0 > 990 and d.cls is C.PREFILL_BOUND]
    assert late
    for d in late:
        assert d.changes[0].signal == "prefix_cache_hit_rate", d.summary
        assert d.baseline is not None and d.baseline.enough
        assert d.baseline.run_start - t0 >= 900
        assert "what changed: prefix-cache hit rate fell" in d.summary
    # One baseline per run: every window of it has the same.
    assert len({d.baseline for d in late}) == 1
    for d in diagnoses:
        if d.cls not in (C.PREFILL_BOUND, C.QUEUE_BOUND, C.KV_PRESSURE, C.DECODE_BOUND):
            assert d.changes == () and d.baseline is None
        elif d.end - t0 < 600:  # a cold cache at the start: nothing healthy before it
            assert d.changes == () and "no healthy baseline" in d.summary


def _service_rounds(store: Store, evaluator: Evaluator, start: float, end: float) -> list[Any]:
    out = []
    t = start
    while t <= end:
        done = evaluator.run(t)
        evaluator.save(done)
        out.extend(done.streams)
        t += 15.0
    return out


def test_the_service_takes_the_baseline_from_its_stored_rows(collapse: Path) -> None:
    store = Store(":memory:")
    _, first, last = record_into(store, collapse, "sim")
    settings = Settings(ui_base_url="http://x/ui")
    config = diagnosis_config(settings)
    evaluator = Evaluator.from_settings(
        settings, store, config, targets=lambda: {}, ui_base_url="http://ui"
    )
    judged = _service_rounds(store, evaluator, first + 60.0, last)
    late = [d for w, d in judged if d.end - first > 990 and d.cls is C.PREFILL_BOUND]
    assert late and all(d.changes[0].signal == "prefix_cache_hit_rate" for d in late)
    # The rows stored carry the changes (the payload is the diagnosis' JSON).
    rows = DiagnosisStore(store).query(
        "sim", model_name=None, start=first + 900, end=last, limit=100
    )
    stored = [r for r in rows if r["class"] == "prefill_bound"]
    assert stored and stored[0]["changes"][0]["signal"] == "prefix_cache_hit_rate"
    # After a restart the run is found again from the rows: the same baseline.
    again = StoreBaselines(store, length=settings.window.length)
    w, d = next((w, d) for w, d in judged if d is late[-1])
    plain = dataclasses.replace(d, changes=(), baseline=None)
    redone = again.judge(w, plain)
    assert redone.baseline is not None and late[-1].baseline is not None
    assert redone.baseline.run_start == late[-1].baseline.run_start
    assert redone.changes[0].signal == "prefix_cache_hit_rate"


def test_timeline_note_then_judge_keeps_the_run(collapse: Path) -> None:
    # review: the windows before the range are noted; the first judged one compares.
    diagnoses = diagnose_recording(collapse)
    problem = next(d for d in diagnoses if d.end - diagnoses[0].start > 990 and d.changes)
    tl = Timeline(lambda a, b: window_of(derived(), covered=b - a))
    for d in diagnoses:
        if d.end < problem.end:
            tl.note(d.start, d.end, str(d.cls))
    out = tl.judge(
        window_of(derived(prefix_cache_hit_rate=0.05)),
        dataclasses.replace(problem, changes=(), baseline=None),
    )
    assert out.changes and out.changes[0].signal == "prefix_cache_hit_rate"


def test_diagnose_url_without_history_says_it_has_none() -> None:
    compare = asyncio.run(
        history_for_url(
            Settings(),
            "http://127.0.0.1:1/metrics",
            before=0.0,
            length=60.0,
            step=15.0,
            config=diagnosis_config(Settings()),
        )
    )
    d = compare(window_of(derived()), diagnosis())
    assert d.changes == () and d.baseline is None
    assert "no baseline: diagnose watched the server only now" in d.summary


def test_diagnose_url_reads_the_store_of_a_service_scraping_it(
    collapse: Path, tmp_path: Path
) -> None:
    url = "http://10.0.0.5:8000/metrics"
    path = tmp_path / "pw.db"
    store = Store(path)
    _, first, last = record_into(store, collapse, "sim")
    settings = Settings(
        targets=[{"name": "sim", "url": url}],
        storage={"path": str(path)},
        ui_base_url="http://x/ui",
    )
    config = diagnosis_config(settings)
    evaluator = Evaluator.from_settings(
        settings, store, config, targets=lambda: {}, ui_base_url="http://ui"
    )
    judged = _service_rounds(store, evaluator, first + 60.0, first + 990.0)
    assert judged
    store.close()
    compare = asyncio.run(
        history_for_url(settings, url, before=first + 990.0, length=60.0, step=15.0, config=config)
    )
    w, d = next((w, d) for w, d in reversed(judged) if d.cls is C.PREFILL_BOUND)
    observed = dataclasses.replace(w, target=url)
    out = compare(observed, dataclasses.replace(d, changes=(), baseline=None))
    assert out.changes and out.changes[0].signal == "prefix_cache_hit_rate"


# -- the UI card and the incident export ---------------------------------------------------


def test_the_ui_card_and_the_incident_export_show_what_changed(collapse: Path) -> None:
    from app.read.source import load_recording
    from app.read.target import UiData
    from app.ui.components import diagnosis_card
    from app.ui.markdown import incident_markdown
    from app.ui.spikes import Peak, Spike

    source = load_recording(collapse)
    data = UiData(source, diagnosis_config(Settings()))
    (target, model) = source.streams()[0]
    first = source.span()
    assert first is not None
    end = data.aligned_end(first[0] + 1140.0)
    got = data.diagnosis_at(target, model, end)
    assert got is not None
    d = got[1]
    assert d.cls is C.PREFILL_BOUND
    assert d.changes[0].signal == "prefix_cache_hit_rate"
    card = str(diagnosis_card(d, latest=False))
    assert "What changed" in card and "prefix-cache hit rate fell" in card
    # The overview's cards do without (no timeline read per stream).
    plain = data.diagnosis_at(target, model, end, compare=False)
    assert plain is not None and plain[1].changes == ()
    spike = Spike(
        target,
        model,
        end - 60,
        end,
        (Peak("ttft", 10.0, False, end, 2.0, None, "over SLO"),),
        "prefill_bound",
        (),
    )
    md = incident_markdown(spike, diagnosis=d, alerts=[], source="rec")
    assert "### What changed" in md
    assert "prefix-cache hit rate fell" in md and "| 100% |" in md


def test_a_deferred_queue_is_headlined_by_the_deferred_requests():
    """``queue_bound/deferred``: what defers admission is the change, not the arrivals'
    sampling noise (the simulator's ``kv_transfer_wait``: arrivals ×1.1)."""
    from app.diagnose.changes import rank as rank_changes
    from app.model import Derived as D

    now = D(arrival_rate=4.37, completion_rate=4.3, waiting_deferred_avg=24.6)
    before = D(arrival_rate=3.97, completion_rate=3.97, waiting_deferred_avg=0.0)
    changes = rank_changes(now, before, "queue_bound", "deferred")
    assert changes[0].signal == "waiting_deferred_avg"
    assert changes[0].text() == "deferred waiting requests rose 0 → 24.6"
    # Without the sub-cause the deferred gauge is no part of the queue's model.
    assert rank_changes(now, before, "queue_bound", "arrival_surge")[0].signal == "arrival_rate"
