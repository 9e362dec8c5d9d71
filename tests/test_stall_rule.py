"""The stall rule reads progress and presence, never the gauges' motion (issue #44 item
1): requests present and, for a whole window, no first token, no token, no finished
request and no engine step is ``stalled`` whatever the gauges do — a scheduler that keeps
admitting while its executor hangs makes the waiting gauge climb — and no capacity advice
comes with it. One step longer than the window is told apart by the window's length
against the stream's steps (its healthy baseline's step histogram and timing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.diagnose import DiagnosisClass as C
from app.diagnose import diagnose
from app.diagnose.classify import with_baseline
from app.diagnose.rules.stalled import longest_step
from app.evaluate.replay import diagnose_recording
from app.model import Derived, GaugeStats
from app.sim.engine import Replica
from app.sim.exposition import TextWriter
from app.sim.families import replica_families
from app.sim.record import record
from app.sim.scenario import from_tree, read_tree
from app.sim.truth import window_truth
from tests.diagnose_windows import make_window

CAPACITY_ADVICE = ("replica", "scale", "max-num-seqs", "batched-tokens", "shed")


def no_progress(**gauges: object) -> object:
    """A 60 s window with requests and not one first token, token, step or finish."""
    return make_window(
        ttft=(0, 0, 0, 0),
        itl=(0, 0, 0, 0),
        step_tokens=(0, 0, 0),
        prompt_tokens=0,
        generation_tokens=0,
        prefix=(0, 0),
        finished=0,
        **gauges,  # type: ignore[arg-type]
    )


def test_a_hang_whose_waiting_gauge_climbs_is_stalled_without_capacity_advice() -> None:
    # The scheduler keeps admitting: waiting climbs 40 → 160 through the window.
    w = no_progress(running=(30, 30), waiting=(100.0, 160.0, 160.0), kv=(0.4, 0.4))
    w.gauges["waiting"] = GaugeStats(100.0, 160.0, 160.0, 40.0)
    d = diagnose(w)
    assert d.cls is C.STALLED, d.summary
    assert d.secondary == ()
    assert "nothing progresses" in d.summary and "whole 60 s window" in d.summary
    assert not any(a in h.id for h in d.hints for a in CAPACITY_ADVICE), [h.id for h in d.hints]
    moved = next(e for e in d.evidence if e.signal == "gauges_moved")
    assert moved.value == 1.0 and moved.holds is None  # shown, not read


def test_requests_waiting_with_nothing_running_and_no_progress_are_stalled() -> None:
    w = no_progress(running=(0, 0), waiting=(12.0, 14.0, 14.0))
    assert diagnose(w).cls is C.STALLED


def test_a_request_that_arrived_into_an_idle_engine_mid_window_is_no_stall_yet() -> None:
    # Nothing ran at the window's start; one request came 45 s in (running 0 → 1): its
    # first step may still be running. The next window, with it there from the start, is.
    w = no_progress(running=(0.25, 1.0), waiting=(0.0, 0.0, 0.0))
    w.gauges["running"] = GaugeStats(0.25, 1.0, 1.0, 0.0)
    assert diagnose(w).cls is not C.STALLED
    w.gauges["running"] = GaugeStats(1.0, 1.0, 1.0, 1.0)
    assert diagnose(w).cls is C.STALLED


def test_the_longest_step_comes_from_the_baseline_step_histogram_and_timing() -> None:
    # 8 running at 200 tokens/s: a mean step of 40 ms; the p99 step 20x the mean's tokens.
    gpu = Derived(running_avg=8.0, generation_tokens_per_s=200.0, step_tokens_p99=600.0,
                  tokens_per_step_mean=30.0)  # fmt: skip
    assert longest_step(gpu) == pytest.approx(0.8)
    assert longest_step(None) is None and longest_step(Derived()) is None


def test_one_step_longer_than_the_window_is_not_called_a_hang() -> None:
    w = no_progress(running=(11, 11))
    first = diagnose(w)
    assert first.cls is C.STALLED  # without history a step is taken to be short
    # A CPU's baseline: 2 s a mean step (11 running at 5.5 tokens/s), chunks of 8,192
    # tokens against 20 a mean step: its largest steps take ~820 s, longer than 60 s.
    cpu = Derived(running_avg=11.0, generation_tokens_per_s=5.5, step_tokens_p99=8192.0,
                  tokens_per_step_mean=20.0)  # fmt: skip
    d = with_baseline(first, w, cpu)
    assert d.cls is C.INSUFFICIENT_DATA
    assert "one step here may take up to" in d.summary
    # A GPU's baseline: the same window is a stall.
    gpu = Derived(running_avg=8.0, generation_tokens_per_s=200.0, step_tokens_p99=600.0,
                  tokens_per_step_mean=30.0)  # fmt: skip
    assert with_baseline(first, w, gpu).cls is C.STALLED
    assert diagnose(w, baseline=cpu).cls is C.INSUFFICIENT_DATA


def shortened(name: str, shift: float) -> object:
    """The shipped scenario with its phases ``shift`` s earlier (a shorter baseline)."""
    tree = read_tree(name)
    tree.setdefault("name", name)
    for ph in tree["phases"]:
        ph["at_s"] = float(ph["at_s"]) - shift
    tree["duration_s"] = float(tree["duration_s"]) - shift
    return from_tree(tree, {})


def test_the_simulated_hang_that_admits_moves_the_waiting_gauge_and_nothing_else() -> None:
    rep = Replica(shortened("hang_admits", 600.0), seed=1)  # hangs at 300 s
    writer = TextWriter(replica_families(rep), created_ts=0.0)
    rep.advance_to(310.0)
    before, waiting = writer.render().decode(), rep.num_waiting
    rep.advance_to(400.0)
    after = writer.render().decode()
    assert rep.num_waiting > waiting + 50 and not rep.inbox  # arrivals enter `waiting`
    counters = [ln for ln in before.splitlines() if "_total" in ln or "_count" in ln]
    assert counters and all(ln in after for ln in counters)  # no counter moved


@pytest.mark.parametrize("name", ["hang_admits", "hang_after_long_step", "hang"])
def test_every_window_without_progress_is_stalled(tmp_path: Path, name: str) -> None:
    folder = record(shortened(name, 600.0), tmp_path / name, seed=2)
    rows = [json.loads(line) for line in (folder / "truth.jsonl").open()]
    diagnoses = diagnose_recording(folder)
    hung = [d for d in diagnoses if d.facts.get("step_n") == 0 and d.facts.get("itl_n") == 0]
    assert len(hung) >= 8
    for d in hung:
        assert d.cls is C.STALLED, (d.end, d.summary)
        assert window_truth(rows, d.start, d.end).cls == "stalled"
        assert not any(a in h.id for h in d.hints for a in CAPACITY_ADVICE)
    # Before the hang nothing is called stalled (long steps end in every window).
    first_hang = min(d.end for d in hung)
    assert all(d.cls is not C.STALLED for d in diagnoses if d.end < first_hang)
