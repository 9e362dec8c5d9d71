"""The target page's arrivals and completions (issue #44 item 6): requests per second
arriving (estimated) and completed, on the requests row's right axis, so that a surge
shows as arrivals above completions."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from app.config import Settings
from app.evaluate.settings import diagnosis_config
from app.read.points import Timeline
from app.read.source import load_recording
from app.read.target import UiData
from app.sim.record import record
from app.ui.figures import FLOW_AXIS, target_figure
from tests.ui_points import pt, series, timeline

ARRIVALS, COMPLETIONS = "arrivals/s (est.)", "completions/s"


def _trace(fig, name: str):  # type: ignore[no-untyped-def]
    (t,) = [t for t in fig.data if t.name == name]
    return t


def test_the_rates_are_drawn_on_the_requests_rows_right_axis() -> None:
    rates = ((4.0, 4.0), (16.0, 11.0), (4.0, 11.5))
    pts = [
        dataclasses.replace(p, arrivals_per_s=a, completions_per_s=c)
        for p, (a, c) in zip(series(["healthy"] * 3), rates, strict=True)
    ]
    fig = target_figure(timeline(pts))
    arrivals, completions = _trace(fig, ARRIVALS), _trace(fig, COMPLETIONS)
    assert [y for y in arrivals.y if y is not None] == [4.0, 16.0, 4.0]
    assert [y for y in completions.y if y is not None] == [4.0, 11.0, 11.5]
    assert arrivals.yaxis == completions.yaxis == FLOW_AXIS.replace("axis", "")
    axis = fig.layout[FLOW_AXIS]
    assert axis.overlaying == "y4" and axis.side == "right" and axis.title.text == "requests/s"
    # No rate in any window (an old recording's points): no axis without a line.
    bare = target_figure(timeline(series(["healthy"] * 3)))
    assert not [t for t in bare.data if t.name in (ARRIVALS, COMPLETIONS)]
    assert FLOW_AXIS not in bare.layout.to_plotly_json()
    assert pt(0.0).arrivals_per_s is None


@pytest.fixture(scope="module")
def incident(tmp_path_factory: pytest.TempPathFactory) -> Timeline:
    folder = record("incident", Path(tmp_path_factory.mktemp("incident")), seed=1)
    source = load_recording(folder)
    data = UiData(source, diagnosis_config(Settings()))
    (target, model) = source.streams()[0]
    span = source.span()
    assert span is not None
    return data.timeline(target, model, *span)


def test_the_incident_scenarios_surge_shows_as_arrivals_above_completions(
    incident: Timeline,
) -> None:
    t0 = incident.start
    fig = target_figure(incident)
    arrivals = dict(zip(_trace(fig, ARRIVALS).x, _trace(fig, ARRIVALS).y, strict=True))
    completions = dict(zip(_trace(fig, COMPLETIONS).x, _trace(fig, COMPLETIONS).y, strict=True))

    def phase(lo: float, hi: float) -> list[tuple[float, float]]:
        keys = [x for x in arrivals if x is not None and lo < x / 1000 - t0 <= hi]
        return [(arrivals[x], completions[x]) for x in keys]

    # ×4 arrivals from 300 s to 600 s: windows wholly inside it see more arriving than
    # completing; healthy minutes before it see them equal within a tenth.
    surge = phase(300 + incident.length, 600)
    assert surge and all(a > 1.2 * c for a, c in surge), surge
    calm = phase(incident.length, 300)
    assert calm and all(abs(a - c) <= 0.1 * c for a, c in calm), calm
