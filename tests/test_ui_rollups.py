"""The pages read a day's or a week's view from the store's roll-ups (a minute grid:
``app.read.windows.resolution``) and judge each window as they judge the raw deltas'."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from app.diagnose.config import DiagnosisConfig
from app.evaluate.stream import judge_window
from app.read.source import StoreSource, grid_windows
from app.sources.recording import record_into
from app.store.sqlite import Store
from tests.test_rollups import MODEL, TARGET, _pages


def _verdict(w: Any, config: DiagnosisConfig) -> tuple[Any, ...]:
    d = judge_window(w, config, failed_scrapes=0, attempted_scrapes=None)
    return (w.end, w.intervals, str(d.cls), d.sub_cause, d.ttft_p99, d.itl_p99, d.confidence)


def test_a_minute_grid_is_read_from_rollups_and_judged_as_the_raw_deltas(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(tmp_path / "pw.db")
    record_into(store, _pages(tmp_path), TARGET)
    raw = store.intervals(TARGET, MODEL, 0, 2e9)
    lo = math.floor(raw[0].start / 60) * 60
    hi = math.ceil(raw[-1].end / 60) * 60
    store.roll_up(raw[60].end)  # half rolled up: the rest is summed on the fly
    read: list[float] = []
    rollups = store.rollups

    def counted(*args: Any) -> Any:
        read.append(args[-1])
        return rollups(*args)

    monkeypatch.setattr(store, "rollups", counted)
    source = StoreSource(lambda: store, targets=lambda: [], live=False, settled=0.0)
    config = DiagnosisConfig()
    got = source.observe(TARGET, MODEL, first_end=lo + 60, end=hi, length=60, step=60)
    assert read == [60.0], "a minute grid reads the minute roll-ups"
    want = grid_windows(
        raw, target=TARGET, model=MODEL, first_end=lo + 60, end=hi, length=60, step=60
    )
    assert len(got) == len(want) > 5
    for o, w in zip(got, want, strict=True):  # the page's server settings on both
        assert _verdict(o.window, config) == _verdict(replace(w, info=o.window.info), config)
    # A 15 s grid is not on the roll-ups' edges: the raw deltas, as before.
    source.observe(TARGET, MODEL, first_end=lo + 60, end=hi, length=60, step=15)
    assert read == [60.0]
