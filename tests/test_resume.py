"""A stopping service keeps its last rounds for the next start (``app.evaluate.resume``):
the overview's first view after a restart orders by them and draws their strips instead
of windowing every stream again — once, from the same version and configuration only."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from pathlib import Path
from typing import Any

import pytest

from app.config import Settings, load_settings
from app.evaluate.resume import NAME, fingerprint, keep, resume
from app.evaluate.round import Evaluator
from app.evaluate.settings import diagnosis_config
from app.read.points import RECENT_S
from app.read.source import StoreSource, TargetInfo
from app.read.target import UiData
from app.service import Service
from app.sim.record import record
from app.sources.recording import record_into
from app.store.resume import ResumeState, ResumeStore
from app.store.sqlite import Store
from tests.waiting import wait_for

URL = "http://127.0.0.1:9/metrics"


def _settings(tmp_path: Path, **slo: float) -> Settings:
    extra = {"slo": slo} if slo else {}
    return load_settings(
        None,
        {
            "targets": [{"name": "r0", "url": URL}],
            "storage": {"path": str(tmp_path / "pw.db")},
            **extra,
        },
    )


def _evaluator(settings: Settings, store: Store) -> Evaluator:
    config = diagnosis_config(settings)
    return Evaluator.from_settings(settings, store, config, targets=dict, ui_base_url="http://x")


def _recorded(tmp_path: Path, now: float) -> Store:
    store = Store(tmp_path / "pw.db")
    rec = record("queue_overload", tmp_path / "r0", duration=1200, seed=1, start_unix=now - 1200)
    record_into(store, rec, "r0")
    return store


def _rounds(ev: Evaluator, now: float) -> None:
    for k in range(int(RECENT_S // 15) + 2):  # a round every 15 s over the last 15 minutes
        ev.run(now - RECENT_S - 15 + 15 * k)


def _judged(tmp_path: Path) -> tuple[float, Settings, Store, Evaluator]:
    """A store with 20 minutes of one stream and an evaluator that judged its last 15."""
    now = math.floor(time.time() / 15) * 15
    settings = _settings(tmp_path)
    store = _recorded(tmp_path, now)
    before = _evaluator(settings, store)
    _rounds(before, now)
    return now, settings, store, before


def _ui(store: Store, ev: Evaluator, settings: Settings, now: float) -> UiData:
    infos = [TargetInfo("r0", URL, True, None, None, ())]
    data = UiData(
        StoreSource(lambda: store, targets=lambda: infos, clock=lambda: now, settled=0.0),
        diagnosis_config(settings),
    )
    data.latest = lambda: ev.latest_streams  # as app.ui.mount feeds it
    data.recent_of = ev.recent.get
    return data


def test_a_restart_takes_back_the_last_rounds_once(tmp_path: Path) -> None:
    now, settings, store, before = _judged(tmp_path)
    assert keep(before, now) == 1
    after = _evaluator(settings, store)  # a fresh process: no rounds of its own
    assert after.latest_streams == [] and len(after.recent) == 0
    assert resume(after, now + 3.0) == 1
    ((w, d),) = after.latest_streams
    ((w0, d0),) = before.latest_streams
    assert (w.target, w.model_name, w.end, d.cls, d.ttft_p99) == (
        w0.target,
        w0.model_name,
        w0.end,
        d0.cls,
        d0.ttft_p99,
    )
    assert after.recent.get("r0", w.model_name) == before.recent.get("r0", w.model_name)
    # …and the SLO budgets of the last evaluation (the overview's, while fresh).
    assert after.tracker.last and [(s.key, s.end, s.budget) for s in after.tracker.last] == [
        (s.key, s.end, s.budget) for s in before.tracker.last
    ]
    # The overview takes them: the card is the kept diagnosis, the strip the rounds'.
    data = _ui(store, after, settings, now)
    cards = data.with_recent(data.cards())
    assert cards[0].diagnosis is d
    assert len(cards[0].recent) == RECENT_S / 15
    assert all(p.requests == 0.0 for p in cards[0].recent)  # drawn from the rounds' classes
    assert {p.cls for p in cards[0].recent} == {"queue_bound"}
    assert resume(_evaluator(settings, store), now + 4.0) == 0, "taken once"
    store.close()


def test_another_slo_or_an_old_state_is_not_taken_back(tmp_path: Path) -> None:
    now, settings, store, before = _judged(tmp_path)
    keep(before, now)
    changed = _evaluator(_settings(tmp_path, ttft_p99=0.5), store)
    assert resume(changed, now + 3.0) == 0 and changed.latest_streams == []
    keep(before, now)
    late = _evaluator(settings, store)
    assert resume(late, now + late.recent.keep_s + 1.0) == 0 and late.latest_streams == []
    store.close()


def test_a_state_that_does_not_read_back_is_dropped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = _settings(tmp_path)
    store = Store(tmp_path / "pw.db")
    ev = _evaluator(settings, store)
    ResumeStore(store).put(NAME, ResumeState(100.0, fingerprint(ev), b"not zlib"))
    with caplog.at_level(logging.WARNING, logger="app.evaluate.resume"):
        assert resume(ev, 101.0) == 0
    assert "not resuming the last rounds" in caplog.text
    assert ev.latest_streams == [] and ResumeStore(store).take(NAME) is None
    store.close()


def test_the_service_keeps_its_rounds_at_a_stop_and_the_next_start_takes_them(
    tmp_path: Path,
) -> None:
    now = time.time()
    settings = _settings(tmp_path)
    store = _recorded(tmp_path, math.floor(now / 15) * 15)
    store.close()

    async def first() -> int:
        service = Service(settings)
        service.start()
        try:
            done = await asyncio.to_thread(service.evaluator.run, time.time())
            return len(done.streams)
        finally:
            await service.stop()

    async def second() -> list[str]:
        service = Service(settings)
        service.start()  # before any round of its own
        try:
            return [str(d.cls) for _, d in service.evaluator.latest_streams]
        finally:
            await service.stop()

    assert asyncio.run(first()) == 1
    assert asyncio.run(second()) == ["queue_bound"]


def test_the_overview_after_a_restart_reads_no_raw_deltas(tmp_path: Path) -> None:
    """The UI of the running app takes what the stop kept: its overview's first answer —
    the cards, their strips, the fleets' budgets and the fleet list — windows no stream
    (``Store.intervals`` is never called), where without it every part would."""
    from app.main import create_app
    from tests.dash_calls import dash_callback
    from tests.test_e2e import ServiceThread

    now, settings, store, before = _judged(tmp_path)
    keep(before, now)
    store.close()
    app = create_app(settings, start_jobs=False)  # no rounds of its own: only what was kept
    svc = ServiceThread(app)
    try:
        service = app.state.service
        assert resume(service.evaluator, now) == 1
        reads: list[str] = []
        intervals = service.store.intervals

        def counted(target: str, *args: Any, **kwargs: Any) -> Any:
            reads.append(target)
            return intervals(target, *args, **kwargs)

        service.store.intervals = counted
        values = {("overview-tick", "n_intervals"): 0, ("overview-page", "data"): 1}

        def cards() -> str | None:
            """The overview's answer once its board is computed (the first ones say it is
            being computed: app.read.board)."""
            answer = dash_callback(
                svc.url, "overview-cards.children", values, "overview-tick.n_intervals"
            )
            return answer if "queue_bound" in answer else None

        answer = wait_for(cards, 60, "the overview's cards")
        assert "error budget (default)" in answer
        assert reads == []
    finally:
        svc.close()
