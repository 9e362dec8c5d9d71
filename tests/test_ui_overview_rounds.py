"""The overview inside the service: the evaluation rounds' latest windows order the cards
and their classes draw the strips (``app.evaluate.recent``), so a first view does not
window every stream again."""

from __future__ import annotations

import math
import time
from pathlib import Path

from app.config import Settings, load_settings
from app.evaluate.recent import RecentClasses
from app.evaluate.round import Evaluator
from app.evaluate.settings import diagnosis_config
from app.read.points import RECENT_S, on_grid
from app.read.source import StoreSource, TargetInfo
from app.read.target import UiData
from app.sim.record import record
from app.sources.recording import record_into
from app.store.sqlite import Store


def _one_stream(
    tmp_path: Path, scenario: str = "healthy", duration: int = 300
) -> tuple[float, Store, Settings]:
    """A store with one simulated stream ``r0`` ending now (on the 15 s grid), and the
    settings of a service scraping it."""
    now = math.floor(time.time() / 15) * 15
    store = Store(tmp_path / "pw.db")
    rec = record(scenario, tmp_path / "r0", duration=duration, seed=1, start_unix=now - duration)
    record_into(store, rec, "r0")
    targets = [{"name": "r0", "url": "http://127.0.0.1:9/metrics"}]
    settings = load_settings(None, {"targets": targets, "storage": {"path": str(tmp_path / "x")}})
    return now, store, settings


def test_strips_from_rounds_sit_on_the_ui_grid_with_gaps_where_rounds_were_missed() -> None:
    judged = [(float(t), "healthy", None) for t in range(0, 301, 30)]  # a round every 30 s
    points = on_grid(judged, 0.0, 300.0, 15.0)
    assert [p.end for p in points] == [15.0 * k for k in range(1, 21)]  # no gap at 30 s
    judged = [j for j in judged if j[0] not in (120.0, 150.0)]  # two rounds missed
    ends = {p.end for p in on_grid(judged, 0.0, 300.0, 15.0)}
    assert 165.0 not in ends and 180.0 in ends, "a missed round leaves a gap"


def test_recent_classes_keep_their_minutes_and_forget_removed_streams() -> None:
    import dataclasses

    from app.diagnose import DiagnosisConfig, diagnose
    from tests.diagnose_windows import make_window

    ring = RecentClasses(keep_s=60.0)
    for end in (0.0, 15.0, 30.0, 45.0, 60.0, 75.0):
        w = dataclasses.replace(make_window(), end=end, start=end - 60.0)
        ring.add([(w, diagnose(w, DiagnosisConfig()))], end)
    got = ring.get(w.target, w.model_name)
    assert [g[0] for g in got] == [15.0, 30.0, 45.0, 60.0, 75.0]
    ring.add([], 200.0)  # the stream is no longer judged
    assert len(ring) == 0


def test_the_overview_reads_the_rounds(tmp_path: Path) -> None:
    now, store, settings = _one_stream(tmp_path, "queue_overload", 1200)
    config = diagnosis_config(settings)
    ev = Evaluator.from_settings(settings, store, config, targets=dict, ui_base_url="http://x")
    for k in range(int(RECENT_S // 15) + 2):  # a round every 15 s over the last 15 minutes
        ev.run(now - RECENT_S - 15 + 15 * k)
    infos = [TargetInfo("r0", "http://127.0.0.1:9/metrics", True, None, None, ())]
    data = UiData(
        StoreSource(lambda: store, targets=lambda: infos, clock=lambda: now, settled=0.0), config
    )
    data.latest = lambda: ev.latest_streams
    data.recent_of = ev.recent.get
    cards = data.cards()
    assert len(cards) == 1 and cards[0].diagnosis is ev.latest_streams[0][1]
    shown = data.with_recent(cards)[0].recent
    assert len(shown) == RECENT_S / 15 and all(p.requests == 0.0 for p in shown)  # the rounds'
    assert {p.cls for p in shown} == {"queue_bound"}
    # Outside the service (no rounds), the same strip is windowed from the store.
    alone = UiData(
        StoreSource(lambda: store, targets=lambda: infos, clock=lambda: now, settled=0.0), config
    )
    strip = alone.with_recent(alone.cards())[0].recent
    assert [p.cls for p in strip][-5:] == [p.cls for p in shown][-5:]
    store.close()


def test_a_rounds_windows_reach_the_pages_before_its_slo_counts(tmp_path: Path) -> None:
    """After a start with nothing kept, the first round's SLO counts take seconds at
    1,000 streams: the cards read the round's windows while they are counted."""
    import threading

    now, store, settings = _one_stream(tmp_path)
    ev = Evaluator.from_settings(
        settings, store, diagnosis_config(settings), targets=dict, ui_base_url="http://x"
    )
    counting, release = threading.Event(), threading.Event()
    count = ev.slos.instances

    def slow_count(*args: object, **kwargs: object) -> list[object]:
        counting.set()
        assert release.wait(30), "the test never released the count"
        return list(count(*args, **kwargs))  # type: ignore[arg-type]

    ev.slos.instances = slow_count  # type: ignore[method-assign, assignment]
    done: list[object] = []
    first = threading.Thread(target=lambda: done.append(ev.run(now)))
    first.start()
    try:
        assert counting.wait(30), "the round never reached its SLO counts"
        assert [w.target for w, _ in ev.latest_streams] == ["r0"]  # already the pages'
        assert not done
    finally:
        release.set()
        first.join(30)
    assert done and ev.tracker.last  # and the round then counted the SLOs
    store.close()


def test_the_first_view_waits_for_a_first_round_under_way_not_for_none(tmp_path: Path) -> None:
    """``Evaluator.wait_judged``: while a round runs and none has judged its windows yet
    (those a restart took back are too old), a page waits for them (they then serve the
    cards); with no round under way it does not wait at all."""
    import threading

    now, store, settings = _one_stream(tmp_path)
    config = diagnosis_config(settings)
    ev = Evaluator.from_settings(settings, store, config, targets=dict, ui_base_url="http://x")
    t0 = time.monotonic()
    assert ev.wait_judged(30) is False and time.monotonic() - t0 < 5  # no round: no wait
    # What a restart took back: windows two minutes old, too old to show (2 steps).
    kept = Evaluator.from_settings(settings, store, config, targets=dict, ui_base_url="http://x")
    kept.run(now - 120)
    ev.latest_streams = kept.latest_streams
    infos = [TargetInfo("r0", "http://127.0.0.1:9/metrics", True, None, None, ())]
    data = UiData(
        StoreSource(lambda: store, targets=lambda: infos, clock=lambda: now, settled=0.0), config
    )
    data.latest = lambda: ev.latest_streams
    waiting, windowing, go = threading.Event(), threading.Event(), threading.Event()

    def wait_latest(timeout: float) -> bool:
        waiting.set()
        return ev.wait_judged(timeout)

    data.wait_latest = wait_latest
    targets_of = ev._targets

    def held(*args: object) -> object:  # the round starts, then waits for the test
        windowing.set()
        assert go.wait(30), "the test never let the round go on"
        yield from targets_of(*args)  # type: ignore[arg-type]

    ev._targets = held  # type: ignore[method-assign, assignment]
    first = threading.Thread(target=ev.run, args=(now,))
    first.start()
    try:
        assert windowing.wait(30)
        cards: list[object] = []
        asking = threading.Thread(target=lambda: cards.extend(data.cards()))
        asking.start()
        assert waiting.wait(30), "the cards did not wait for the round under way"
        go.set()
        asking.join(30)
    finally:
        go.set()
        first.join(30)
    (card,) = cards
    assert card.diagnosis is ev.latest_streams[0][1]  # type: ignore[attr-defined]
    store.close()


def test_a_services_first_round_says_its_slo_count_is_pending(tmp_path: Path) -> None:
    """The service counts SLOs in the background: its first round has no SLO instance
    and says so (the alert engine then holds the SLO alerts); a later one has them."""
    now, store, settings = _one_stream(tmp_path)
    ev = Evaluator.from_settings(
        settings,
        store,
        diagnosis_config(settings),
        targets=dict,
        ui_base_url="http://x",
        background_slo=True,
    )
    first = ev.run(now)
    assert first.slos_pending and not [i for i in first.instances if i.scope == "slo"]
    assert ev.slos.wait(60), "the first count never ended"  # rounds go on beside it
    later = ev.run(now)
    assert not later.slos_pending
    assert [i for i in later.instances if i.scope == "slo"] and ev.tracker.last
    ev.slos.stop(30)
    store.close()
