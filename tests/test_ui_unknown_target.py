"""A target page for a name no target has says so (issue #44 item 6: `/ui/targets/nosuch`
said "No data yet")."""

from __future__ import annotations

from pathlib import Path

from app.config import Settings
from app.evaluate.settings import diagnosis_config
from app.read.alertfeed import NoAlerts
from app.read.source import load_recording
from app.read.target import UiData
from app.sim.record import record
from app.ui.context import PageContext
from app.ui.pages.target import no_stream_text


def test_an_unknown_target_is_not_told_to_wait_for_data(tmp_path: Path) -> None:
    folder = record("healthy", tmp_path / "rec", duration=60, seed=1)
    source = load_recording(folder)
    ctx = PageContext(UiData(source, diagnosis_config(Settings())), NoAlerts(), lambda p: p)
    (target, _model) = source.streams()[0]
    assert no_stream_text(ctx, target) == f"No data from {target} yet."
    text = no_stream_text(ctx, "nosuch")
    assert text.startswith("Unknown target 'nosuch'") and "No data" not in text
