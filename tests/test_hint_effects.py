"""Hints carry the what-if twin's predicted effect: what the words mean
(``app.diagnose.effects``), how the evaluation layer attaches them
(``app.evaluate.effects``), and the service pricing them off the round, under its CPU
budget, until an alert's annotation carries one (``app.read.effects``)."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Iterator
from typing import Any

import pytest

from app.config import load_settings
from app.diagnose.effects import Effect, Figure, Verdict
from app.diagnose.records import Hint
from app.evaluate.effects import attach
from app.main import create_app
from app.sim.record import record
from app.sources.recording import record_into
from app.store.sqlite import Store
from tests.test_e2e import ServiceThread
from tests.waiting import wait_for


def _effect(ttft: tuple[float, float], itl: tuple[float, float], slo_itl: float = 0.1) -> Effect:
    return Effect(
        "max_num_seqs=16",
        Figure(ttft[0], ttft[1], ttft[1] * 0.8, ttft[1] * 1.3, 2.0),
        Figure(itl[0], itl[1], itl[1] * 0.9, itl[1] * 1.1, slo_itl),
        0.05,
    )


def test_the_verdict_and_the_words_of_an_effect() -> None:
    helps = _effect((39.0, 2.1), (0.040, 0.0432))
    assert helps.verdict is Verdict.HELPS and not helps.flagged
    assert helps.text() == (
        "predicted: TTFT p99 39 s → 2.1 s (1.68–2.73 s), ITL p99 +8 % (replay error 5%)"
    )
    nothing = _effect((1.0, 1.02), (0.040, 0.041))
    assert nothing.verdict is Verdict.NO_EFFECT and nothing.flagged
    assert nothing.text().startswith("predicted to change nothing: TTFT p99 +2 %")
    harms = _effect((1.0, 1.0), (0.040, 0.090))
    assert harms.verdict is Verdict.HARMS and harms.flagged
    assert harms.text() == (
        "predicted to harm: TTFT p99 +0 %, ITL p99 40 ms → 90 ms (81–99 ms) (replay error 5%)"
    )
    trade = _effect((10.0, 1.0), (0.040, 0.150))
    assert trade.verdict is Verdict.HELPS
    assert trade.text().endswith("— trade-off: ITL p99 over its SLO (replay error 5%)")
    cannot = Effect("replicas=2", None, None, error="the span has no TTFT or ITL histogram")
    assert cannot.verdict is None and not cannot.flagged
    assert cannot.to_dict()["text"].startswith("predicted effect: cannot tell — the span")


def test_flagged_hints_go_last_and_keep_their_effect() -> None:
    from app.diagnose import DiagnosisConfig, diagnose
    from tests.diagnose_windows import make_window

    d = diagnose(make_window(), DiagnosisConfig())
    more = ("replicas", 2.0)
    fewer = ("max_num_seqs", 8.0)
    hints = (
        Hint("a", "More replicas", "run more", "why a", setting=more),
        Hint("b", "Fewer sequences", "--max-num-seqs 8", "why b", setting=fewer),
        Hint("c", "Look", "look at it", "why c"),
    )
    d = dataclasses.replace(d, hints=hints)
    harmful = _effect((1.0, 1.0), (0.040, 0.090))
    helpful = _effect((39.0, 2.1), (0.040, 0.0432))
    out = attach(d, {more: harmful, fewer: helpful})
    assert [h.id for h in out.hints] == ["b", "c", "a"]
    assert out.hints[-1].effect == harmful and out.hints[0].effect == helpful
    assert out.hints[1].effect is None
    assert "predicted to harm" in out.hints[-1].line()
    assert out.to_dict()["hints"][-1]["effect"]["verdict"] == "harms"
    assert out.to_dict()["hints"][-1]["setting"] == {"replicas": 2.0}


MODEL = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A service over a store holding the last 20 minutes of an overloaded replica (its
    queue grows: queue-bound, hints to add replicas), and its next 15: the pages and the
    rounds judge the window ending now, which must still be the overload however long
    the module's tests take on a busy machine (recorded up to the fixture's start only,
    the latest window had no data a minute later)."""
    root = tmp_path_factory.mktemp("effects")
    start = math.floor((time.time() - 1200) / 5) * 5
    store = Store(root / "pw.db")
    rec = record("queue_overload", root / "r0", duration=1200 + 900, seed=1, start_unix=start)
    record_into(store, rec, "r0")
    store.close()
    targets = [{"name": "r0", "url": "http://127.0.0.1:9/metrics", "server": {"max_num_seqs": 32}}]
    settings = load_settings(
        None,
        {
            "targets": targets,
            "storage": {"path": str(root / "pw.db")},
            "whatif": {"cpu_share": 1.0},
        },
    )
    app = create_app(settings, start_jobs=False)
    svc = ServiceThread(app)
    try:
        app.state.service.url = svc.url
        yield app.state.service
    finally:
        svc.close()


def test_the_round_queues_the_job_prices_and_the_alert_carries_the_effect(service: Any) -> None:
    # Just past a window end: the round a second later judges the same window (on the
    # wall clock, one in fifteen runs crossed into the next window, whose hints differ).
    step = service.settings.window.step
    now = math.floor(time.time() / step) * step + 1.0
    first = service.evaluate_alerts(now)
    stream = [i for i in service.evaluator.run(now).instances if i.scope == "stream"][0]
    assert "predicted" not in (stream.fields.get("hints") or ""), "nothing priced yet"
    assert service.effects.queued == 1, "the problem stream is queued, the round not held"
    assert service.effects.work() == 1 and service.effects.queued == 0
    done = service.evaluator.run(now)
    stream = [i for i in done.instances if i.scope == "stream"][0]
    assert stream.fields["class"] == "queue_bound"
    assert "predicted: TTFT p99" in stream.fields["hints"], stream.fields["hints"]
    evaluation = service.evaluate_alerts(now + 1)
    annotated = [
        a for a in evaluation.alerts.values() if "predicted" in a.annotations.get("hints", "")
    ]
    assert annotated, [a.annotations for a in evaluation.alerts.values()] or first
    # The effect is the twin's: adding a replica halves the traffic and drains the queue.
    d = done.streams[0][1]
    effects = [h.effect for h in d.hints if h.effect is not None]
    assert any(e.verdict is Verdict.HELPS and e.change.startswith("replicas=") for e in effects)


def test_the_target_page_shows_the_hints_effects(service: Any) -> None:
    """The target page prices the hints when it opens (the twin, seconds) and lists each
    effect; once priced, the diagnosis card shows it under its hint too."""
    from tests.test_ui_browser import TWIN_TIMEOUT_MS, Session, chromium

    with chromium() as browser:
        session = Session(browser, service.url)
        page = session.page
        page.goto(service.url + "/ui/targets/r0")
        box = page.locator("#target-effects")
        box.locator("li").first.wait_for(timeout=TWIN_TIMEOUT_MS)  # the twin runs when asked
        assert box.inner_text().startswith("Predicted effects of the hints")
        items = box.locator("li")
        assert items.count() >= 1
        assert "predicted" in items.first.inner_text()
        assert items.first.get_attribute("data-verdict") in ("helps", "no_effect", "harms")
        page.reload()  # the card now finds the effects in the cache

        def card_shows_the_effect() -> bool:
            """The card peeks at the cache of the window's 5-minute bucket: when the
            pricing above ended in the next bucket (a busy machine), the page prices that
            one first, and the card finds it once the page is opened again."""
            page.locator(".diagnosis-card .hint").first.wait_for(timeout=TWIN_TIMEOUT_MS)
            if page.locator(".diagnosis-card .hint .effect").count():
                return True
            box.locator("li").first.wait_for(timeout=TWIN_TIMEOUT_MS)
            page.reload()
            return False

        wait_for(card_shows_the_effect, 2 * TWIN_TIMEOUT_MS / 1000, "the card's effect", every=0)
        assert "predicted" in page.locator(".diagnosis-card .hint .effect").first.inner_text()
        session.shot("target-effects")


def test_the_pricing_job_keeps_to_its_cpu_share(service: Any) -> None:
    """``whatif.cpu_share``: after a twin costing C seconds of CPU, the job prices nothing
    more until C / share seconds have passed (the cost at 1,000 problem streams is
    bounded by it, whatever their number)."""
    from app.read.effects import TwinEffects
    from app.read.twincache import TwinCache

    clock = [1000.0]
    effects = TwinEffects(
        service.store.intervals,
        service.diagnosis_config,
        TwinCache(),
        cpu_share=0.05,
        clock=lambda: clock[0],
        pricing_share=1.0,  # the average is what this test holds the job to
    )
    window = service.evaluator.run(time.time()).streams[0][0]
    effects.effects(window, [("replicas", 2.0)])
    assert effects.work() == 1 and effects.spent_s > 0
    effects.effects(window, [("max_num_seqs", 64.0)])
    assert effects.work() == 0 and effects.queued == 1, "over its share: it waits"
    clock[0] += effects.spent_s / 0.05 - 1e-3
    assert effects.work() == 0
    clock[0] += 2e-3
    assert effects.work() == 1 and effects.queued == 0


def test_the_pricing_job_exports_its_cost(service: Any) -> None:
    """The scheduled job exports its own CPU time, the streams priced and the queue, so a
    deployment (and ``bench/scale.py``) sees what the pricing costs."""

    def value(name: str) -> float:
        got = service.metrics.registry.get_sample_value(name)
        return 0.0 if got is None else float(got)

    cpu0 = value("phasewatch_hint_effects_cpu_seconds_total")
    priced0 = value("phasewatch_hint_effects_priced_streams_total")
    window = service.evaluator.run(time.time()).streams[0][0]
    service.effects.effects(window, [("max_num_seqs", 48.0)])
    assert service.effects.queued == 1
    service.effects_job()
    assert value("phasewatch_hint_effects_priced_streams_total") == priced0 + 1
    assert value("phasewatch_hint_effects_cpu_seconds_total") > cpu0
    assert value("phasewatch_hint_effects_queued_streams") == 0
    # The overloaded replica's twin fits: nothing counted as failed.
    assert value("phasewatch_hint_effects_failed_streams_total") == 0
    assert service.effects.failed == 0


def test_a_twin_priced_by_the_job_leaves_the_interpreter_its_share(
    service: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job prices inside a pacer (``app.pacing.paced``): the twin's replay calls it
    between its steps, so a stream's seconds of CPU never hold the scrape loop off."""
    import app.read.effects as module
    from app.pacing import Pacer
    from app.read.effects import TwinEffects
    from app.read.twincache import TwinCache

    calls = []

    class Counting(Pacer):
        def __call__(self) -> None:
            calls.append(self.share)

    monkeypatch.setattr(module, "Pacer", Counting)
    effects = TwinEffects(service.store.intervals, service.diagnosis_config, TwinCache())
    window = service.evaluator.run(time.time()).streams[0][0]
    effects.effects(window, [("replicas", 2.0)])
    assert effects.work() == 1
    assert len(calls) > 100, len(calls)  # the replays' steps, each a chance to yield
    assert set(calls) == {0.25}


def test_a_stream_whose_twin_cannot_be_fitted_counts_as_failed(service: Any) -> None:
    """Priced, but with nothing to fit the twin on: every effect carries its error and the
    job counts the stream as failed (what ``bench/scale.py`` prints beside the priced)."""
    from app.read.effects import TwinEffects
    from app.read.twincache import TwinCache

    effects = TwinEffects(
        lambda *args, **kwargs: [], service.diagnosis_config, TwinCache(), pricing_share=1.0
    )
    window = service.evaluator.run(time.time()).streams[0][0]
    effects.effects(window, [("replicas", 2.0)])
    assert effects.work() == 1
    assert effects.priced == 1 and effects.failed == 1


def test_a_pricing_whose_owner_stops_ends_at_its_next_step(service: Any) -> None:
    """At shutdown the pages' pricing thread is told to stop (its store is about to
    close): the twin's next step raises ``Stopped`` through the pacer, the job ends there
    and counts nothing priced (it used to go on reading a closed store)."""
    import threading

    from app.pacing import pace
    from app.read.effects import TwinEffects
    from app.read.twincache import TwinCache

    stop = threading.Event()
    pricing: list[bool] = []

    def intervals(*args: Any, **kwargs: Any) -> list[Any]:
        if pricing:
            stop.set()  # the owner stops while the stream is being priced
            pace()  # the next step of the work
        return []

    effects = TwinEffects(
        intervals, service.diagnosis_config, TwinCache(), pricing_share=1.0, stop=stop
    )
    window = service.evaluator.run(time.time()).streams[0][0]
    effects.effects(window, [("replicas", 2.0)])
    assert effects.queued == 1
    pricing.append(True)
    assert effects.work() == 0
    assert stop.is_set() and effects.priced == 0 and effects.failed == 0
