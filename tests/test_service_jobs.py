"""The service's jobs: which overlaps it keeps quiet, and its SLO refresh ended at a stop."""

from __future__ import annotations

import asyncio
import logging
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from app.config import Settings, load_settings
from app.logs import SCHEDULER_LOGGERS, QuietJobOverlaps
from app.model import ErrorKind
from app.service import Service

PAGES = Path(__file__).parent / "fixtures" / "vllm-generated"


def _settings(tmp_path: Path) -> Settings:
    """One file target (a generated vLLM page) and a store in ``tmp_path``."""
    page = sorted(PAGES.glob("*.prom"))[-1]
    return load_settings(
        None,
        {
            "targets": [{"name": "t", "url": f"file://{page}"}],
            "storage": {"path": str(tmp_path / "pw.db")},
        },
    )


def test_only_jobs_whose_next_run_does_the_work_are_quiet_and_the_slo_refresh_ends(
    tmp_path: Path,
) -> None:
    settings = _settings(tmp_path)

    async def run() -> Service:
        service = Service(settings)
        service.start()
        try:
            scheduled = {job.id for job in service.scheduler.get_jobs()}
            for name in SCHEDULER_LOGGERS:
                (quiet,) = [
                    f for f in logging.getLogger(name).filters if isinstance(f, QuietJobOverlaps)
                ]
                assert {"outbox", "rollups", "heap_trim", "stream_metrics"} <= quiet.job_ids
                assert quiet.job_ids <= scheduled
                assert not {"scrape", "alerts", "retention"} & quiet.job_ids
        finally:
            await service.stop()
        return service

    service = asyncio.run(run())
    assert service.evaluator.slos._stopping.is_set()  # asked to end before the store closed


def test_a_stop_waits_for_the_jobs_running_before_the_store_closes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A job in flight at a stop (a roll-up writing the store) is asked to end and waited
    for: it still reads the store, and nothing is cancelled (no "Error running job")."""
    settings = _settings(tmp_path)
    started = threading.Event()
    ended: list[object] = []

    async def run() -> Service:
        service = Service(settings)
        service.start()

        def long_job() -> None:
            started.set()
            assert service._stopping.wait(30)  # as the roll-up ends after its chunk
            ended.append(service.store.streams())  # the store is still open

        service.scheduler.add_job(
            long_job, id="long", next_run_time=datetime.now(UTC), coalesce=True
        )
        assert await asyncio.to_thread(started.wait, 30)
        assert service.running_jobs.running >= 1
        await service.stop()
        return service

    with caplog.at_level(logging.INFO):
        service = asyncio.run(run())
    assert len(ended) == 1  # it ran to its end, reading the open store
    assert service.running_jobs.running == 0
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


def test_a_roll_up_asked_to_stop_ends_after_its_chunk(tmp_path: Path) -> None:
    from app.sim.record import record
    from app.sources.recording import record_into
    from app.store.sqlite import Store

    pages = record("healthy", tmp_path / "rec", duration=600, seed=1, start_unix=1764403200)
    store = Store(tmp_path / "pw.db")
    record_into(store, pages, "a")
    record_into(store, pages, "b")
    stop = threading.Event()
    stop.set()
    first = store.roll_up(2e9, stop=stop)  # one stream's first chunk, then it ends
    assert first > 0
    rest = store.roll_up(2e9)
    assert rest > 0  # the rest was left for the next run
    assert store.roll_up(2e9) == 0
    store.close()


@pytest.mark.parametrize("alerts", [False, True])
def test_diagnoses_are_stored_whether_alerts_are_enabled_or_not(
    tmp_path: Path, alerts: bool
) -> None:
    """The evaluation round is the service's own job: with ``alerts.enabled: false`` the
    diagnosis rows are written as with alerts on (alerting only receives the rounds)."""
    import httpx

    from app.main import create_app
    from tests.test_e2e import PageServer, ServiceThread
    from tests.waiting import wait_for

    vllm = PageServer()
    settings = load_settings(
        None,
        {
            "targets": [{"name": "t", "url": vllm.url + "/metrics"}],
            "scrape": {"interval": 0.25, "timeout": 5.0},
            "storage": {"path": str(tmp_path / "pw.db")},
            "alerts": {"enabled": alerts, "evaluation_interval": 0.25},
        },
    )
    svc = ServiceThread(create_app(settings))
    try:

        def diagnoses() -> list[dict[str, object]]:
            rows: list[dict[str, object]] = httpx.get(
                svc.url + "/api/v1/diagnoses", params={"target": "t"}, timeout=10
            ).json()
            return rows

        rows = wait_for(diagnoses, 60, "a diagnosis row stored")
        assert rows[0]["model_name"]
        health = httpx.get(svc.url + "/healthz", timeout=10).json()
        assert health["evaluations"] >= 1
        alert_rules = httpx.get(svc.url + "/api/v1/alerts/rules", timeout=10).json()
        assert (alert_rules["lastEvaluation"] is not None) is alerts
    finally:
        svc.close()
        vllm.close()


def _missed(service: Service) -> float:
    return float(
        service.metrics.registry.get_sample_value("phasewatch_scrape_rounds_missed_total") or 0.0
    )


def test_a_round_that_raises_or_lacks_descriptors_is_counted_missed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A round that stored nothing — it raised, or its fetches found no file descriptor
    in phasewatch — counts in ``phasewatch_scrape_rounds_missed_total``, with one warning
    for a run of them."""
    from app.scrape.client import OUT_OF_DESCRIPTORS, FetchResult
    from app.sources.process import failed_outcome

    service = Service(_settings(tmp_path))

    async def raises(now: float) -> list[object]:
        raise OSError(24, "Too many open files")

    async def starved(now: float) -> list[object]:
        result = FetchResult(url="http://t/metrics", started=now, duration=0.0)
        return [failed_outcome("t", result, now, ErrorKind.CONNECT, OUT_OF_DESCRIPTORS)]

    async def run() -> list[float]:
        seen = [_missed(service)]
        try:
            for read in (raises, raises, starved):
                service.source.read_round = read  # type: ignore[method-assign, assignment]
                await service.scrape_job()
                seen.append(_missed(service))
        finally:
            await service.stop()
        return seen

    with caplog.at_level(logging.WARNING, "app.service.core"):
        assert asyncio.run(run()) == [0.0, 1.0, 2.0, 3.0]
    warned = [r.getMessage() for r in caplog.records if "missed" in r.getMessage()]
    assert len(warned) == 1 and "OSError" in warned[0], warned
