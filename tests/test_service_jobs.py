"""The service's jobs: which overlaps it keeps quiet, and its SLO refresh ended at a stop."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from app.config import load_settings
from app.logs import SCHEDULER_LOGGERS, QuietJobOverlaps
from app.service import Service

PAGES = Path(__file__).parent / "fixtures" / "vllm-generated"


def test_only_jobs_whose_next_run_does_the_work_are_quiet_and_the_slo_refresh_ends(
    tmp_path: Path,
) -> None:
    page = sorted(PAGES.glob("*.prom"))[-1]
    settings = load_settings(
        None,
        {
            "targets": [{"name": "t", "url": f"file://{page}"}],
            "storage": {"path": str(tmp_path / "pw.db")},
        },
    )

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
