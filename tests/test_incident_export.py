"""The incident export on the ``incident`` scenario (issue #44 item 6): the spike starts
and is resolved within a step of the simulator's first and last request over the TTFT
SLO (not a window's length before), its impact — requests over the SLO and minutes —
is the simulator's, its diagnosis is read at the surge, not at the drain where the p99
peaks, and it does not end on a one-window class."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.config import Settings
from app.evaluate.settings import diagnosis_config
from app.read.source import load_recording
from app.read.target import UiData
from app.sim.record import record
from app.ui.markdown import incident_markdown
from app.ui.spikes import Spike, find_spikes

SPIKE_S, RECOVERY_S = 300.0, 600.0  # the scenario's phases
Incident = tuple[UiData, Spike, list[dict[str, Any]]]


@pytest.fixture(scope="module")
def incident(tmp_path_factory: pytest.TempPathFactory) -> Incident:
    folder = record("incident", tmp_path_factory.mktemp("incident"), seed=1)
    source = load_recording(folder)
    data = UiData(source, diagnosis_config(Settings()))
    (target, model) = source.streams()[0]
    span = source.span()
    assert span is not None
    (spike,) = find_spikes(data.timeline(target, model, *span))
    truth = [json.loads(line) for line in Path(folder, "truth.jsonl").read_text().splitlines()]
    return data, spike, truth


def test_the_spike_starts_and_resolves_within_a_step_of_the_truth(incident: Incident) -> None:
    data, spike, truth = incident
    over = [r for r in truth if r["ttft_over"] > 0]
    first, last = over[0]["t0"], over[-1]["t1"]  # the first and last request over 2 s
    assert first - data.step <= spike.start <= first
    assert spike.resolved_at is not None and spike.end == spike.resolved_at
    assert last <= spike.resolved_at <= last + data.step
    assert spike.resolution_s == pytest.approx(spike.resolved_at - spike.start)
    # Impact: minutes over the SLO as the times read, requests over it as the simulator
    # counted them (each request once: windows overlap four times).
    assert spike.minutes_over * 60 == pytest.approx(spike.end - spike.start)
    want = sum(r["ttft_over"] for r in truth)
    assert spike.requests_over == pytest.approx(want, rel=0.05)
    # The class sequence does not end on one window of another class (the drain's tail).
    assert spike.runs[-1].windows > 1


def test_the_diagnosis_is_read_at_the_surge_not_at_the_drain(incident: Incident) -> None:
    data, spike, _ = incident
    t0 = spike.start - SPIKE_S
    assert spike.peak_at - t0 > RECOVERY_S  # the p99 peaks while the queue drains
    assert spike.cause == "surge" and spike.diagnosed_at < spike.peak_at
    assert spike.diagnosed_at - data.length < t0 + RECOVERY_S  # inside the surge
    got = data.diagnosis_at(spike.target, spike.model_name, spike.diagnosed_at)
    at_peak = data.diagnosis_at(spike.target, spike.model_name, spike.peak_at)
    assert got is not None and at_peak is not None
    surge, drain = got[1], at_peak[1]
    assert str(surge.sub_cause) == "arrival_surge" and "drains" not in surge.summary
    assert "the queue drains" in drain.summary  # what the export used to show
    md = incident_markdown(spike, diagnosis=surge, alerts=[], source="incident")
    assert "- **Resolution:** resolved at " in md and "after the start" in md
    assert f"≈ {spike.requests_over:,.0f} requests got their first token later" in md
    assert "## Diagnosis at the surge's height" in md
