"""What changed from the first incident (issue #44 item 3): until a stream has the full
10 minutes of healthy history, the healthy minutes just before the change (at least 2)
are a short baseline, labelled so; one rule (``app.evaluate.baseline.assemble``) for
replay, the service, ``diagnose URL`` and the pages, and one message that never reads as
meeting its own need."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.config import Settings
from app.diagnose import DiagnosisClass as C
from app.diagnose.changes import MIN_HEALTHY_S, Baseline, with_changes
from app.diagnose.records import BaselineInfo, minutes
from app.diagnose.render import render
from app.evaluate.baseline import assemble
from app.evaluate.replay import diagnose_recording
from app.evaluate.settings import diagnosis_config
from app.model import Derived
from app.sim.record import record
from app.sim.scenario import from_tree, read_tree
from tests.test_diagnose_changes import derived, diagnosis, window_of


def test_minutes_are_never_rounded_up_to_the_need() -> None:
    assert [minutes(s) for s in (119.9, 120.0, 585.0, 599.9, 600.0, 4000.0)] == [
        "1.9",
        "2",
        "9.7",
        "9.9",
        "10",
        "66",
    ]


def test_a_short_baseline_says_so_and_ranks_the_changes() -> None:
    info = BaselineInfo(run_start=60.0, healthy_s=250.0, needed_s=MIN_HEALTHY_S)
    assert info.enough and info.short
    d = with_changes(
        diagnosis(), window_of(derived(prefix_cache_hit_rate=0.05)), Baseline(derived(), info)
    )
    assert d.changes[0].signal == "prefix_cache_hit_rate"
    assert "what changed (short baseline: the 4.1 healthy minutes before): prefix-cache" in (
        d.summary
    )
    assert "what changed (against short baseline: the 4.1 healthy minutes before" in render(d)
    full = BaselineInfo(run_start=60.0, healthy_s=900.0, needed_s=MIN_HEALTHY_S)
    assert full.enough and not full.short and full.label == "the healthy baseline"


def test_assemble_takes_two_minutes_as_a_short_baseline_and_not_less() -> None:
    def window_of_span(a: float, b: float) -> object:
        return window_of(Derived(arrival_rate=4.0), covered=b - a)

    short = assemble([(0.0, 150.0)], 150.0, window_of_span)  # type: ignore[arg-type]
    assert short.derived is not None and short.info.short
    none = assemble([(0.0, 100.0)], 100.0, window_of_span)  # type: ignore[arg-type]
    assert none.derived is None and not none.info.enough
    assert "(2 min needed for a short baseline, 10 for the full one)" in none.info.lacking()


@pytest.fixture(scope="module")
def incident(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's incident: 5 healthy minutes, then arrivals ×4 for 5 minutes."""
    tree = read_tree("incident")
    tree.setdefault("name", "incident")
    tree.pop("loop_s", None)
    folder = tmp_path_factory.mktemp("incident")
    record(from_tree(tree, {}), folder, seed=1)
    return folder


def test_the_first_incident_says_what_rose_against_the_minutes_before(incident: Path) -> None:
    diagnoses = diagnose_recording(incident)
    t0 = diagnoses[0].start
    surge = [d for d in diagnoses if d.cls is C.QUEUE_BOUND and d.end - t0 < 600]
    assert surge
    for d in surge:
        assert d.baseline is not None and d.baseline.short, d.summary
        assert "short baseline: the " in d.summary and "healthy minutes before" in d.summary
        assert d.changes and d.changes[0].signal == "arrival_rate", d.summary
        assert "no healthy baseline" not in d.summary


def test_the_pages_compare_as_replay_does(incident: Path) -> None:
    from app.read.source import load_recording
    from app.read.target import UiData

    replayed = {d.end: d for d in diagnose_recording(incident)}
    source = load_recording(incident)
    data = UiData(source, diagnosis_config(Settings()))
    (target, model) = source.streams()[0]
    surge = [d for d in replayed.values() if d.cls is C.QUEUE_BOUND]
    end = data.aligned_end(surge[len(surge) // 2].end)
    got = data.diagnosis_at(target, model, end)
    assert got is not None
    page, replay = got[1], replayed[end]
    assert page.baseline is not None and replay.baseline is not None
    # One rule, one label: both short, both headlined by the arrivals (their windows are
    # aligned apart at the start of the data, so the minutes may differ by a step).
    assert page.baseline.short and replay.baseline.short
    assert page.changes[0].signal == replay.changes[0].signal == "arrival_rate"
    for d in (page, replay):
        assert "what changed (short baseline: the " in d.summary
