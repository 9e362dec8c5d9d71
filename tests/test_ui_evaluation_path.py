"""The pages judge a window as the service does (``app.evaluate.stream``): the same
configuration, the server settings the stream's page reports, and a problem window
compared with its run's baseline under that configuration — so a hint on the target
page is the hint the evaluation round stores (and the API serves) for that window."""

from __future__ import annotations

import math
from pathlib import Path

from app.config import Settings
from app.evaluate.baseline import Timeline
from app.evaluate.instances import SloInputs
from app.evaluate.round import Evaluator
from app.evaluate.settings import diagnosis_config
from app.evaluate.stream import judge_window
from app.model import Window
from app.read.source import StoreSource, load_recording
from app.read.target import UiData
from app.sim.record import record
from app.sources.recording import record_into
from app.store.sqlite import Store

EPOCH = 1764403200.0  # divisible by 15 and 60: recordings start on the grid


def test_a_window_s_hints_on_the_page_are_the_service_round_s(tmp_path: Path) -> None:
    rec = record("kv_pressure", tmp_path / "rec", duration=420, seed=5, start_unix=EPOCH)
    store = Store(":memory:")
    state, _, last = record_into(store, rec, "kv")
    config = diagnosis_config(Settings())
    end = math.floor(last / 15.0) * 15.0
    slos = SloInputs(store, (), config, latest_s=60.0, ui_base_url="/ui")
    evaluator = Evaluator(
        store,
        config,
        slos,
        targets=lambda: {"kv": state},
        length=60.0,
        stale_after=60.0,
        closed_after=10.0,
        ui_base_url="/ui",
    )
    ((window, theirs),) = evaluator.run(end).streams
    assert window.end == end and str(theirs.cls) == "kv_pressure"
    # The page reports its cache configuration (gpu_memory_utilization 0.6): the round's
    # hints start from it, not from vLLM's default (0.9).
    assert any("(now 0.6, cache_config_info)" in h.action for h in theirs.hints)
    source = StoreSource(
        lambda: store, targets=lambda: [], clock=lambda: last, live=False, settled=0.0
    )
    found = UiData(source, config).diagnosis_at("kv", window.model_name, end)
    assert found is not None
    mine = found[1]
    assert dict(found[0].info) == dict(window.info)
    assert mine.hints == theirs.hints
    assert not any("assumed vLLM default: 0.9" in h.action for h in mine.hints)


def test_a_problem_window_is_compared_on_the_page_as_the_evaluation_compares_it(
    tmp_path: Path,
) -> None:
    """Its run's baseline taken from the page's own windows, a problem window's changes
    and hints are those the evaluation layer's timeline (replay's) gives the same
    windows: the hints that address the headline change are built again under the
    service's configuration, not only reordered."""
    rec = record("prefix_cache_collapse", tmp_path / "rec", seed=5, start_unix=EPOCH)
    source = load_recording(rec)
    ((target, model),) = source.streams()
    config = diagnosis_config(Settings())

    def window_of(a: float, b: float) -> Window | None:
        obs = source.observe(target, model, first_end=b, end=b, length=b - a, step=b - a)
        return obs[0].window if obs else None

    timeline = Timeline(window_of, config=config)
    judged = {}
    end = math.floor(source.now() / 15.0) * 15.0
    for o in source.observe(target, model, first_end=EPOCH, end=end, length=60.0, step=15.0):
        if o.window.intervals == 0 and not o.attempted_scrapes:
            continue  # no data at all: a gap on the page, no window in its timeline
        d = judge_window(
            o.window,
            config,
            failed_scrapes=o.failed_scrapes,
            attempted_scrapes=o.attempted_scrapes,
        )
        judged[o.window.end] = timeline.judge(o.window, d)
    compared = [e for e, d in judged.items() if d.changes]
    assert len(compared) >= 20
    data = UiData(source, config)
    for e in compared:
        found = data.diagnosis_at(target, model, e)
        assert found is not None
        mine, theirs = found[1], judged[e]
        assert (mine.changes, mine.summary) == (theirs.changes, theirs.summary), e
        assert mine.hints == theirs.hints, e
