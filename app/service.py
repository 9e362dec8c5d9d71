"""The running service: store, collector, scheduler and self-metrics, wired together.

Built by :func:`app.main.create_app` inside the FastAPI lifespan (never at import), so
tests and the CLI can build as many independent services as they like.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

import httpx
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from app.alerts.runtime import Alerting
from app.collector import Collector
from app.config import Settings
from app.selfmetrics import SelfMetrics, build_self_metrics
from app.store.sqlite import Store

log = logging.getLogger(__name__)

RETENTION_EVERY_S = 600.0


class Service:
    """Everything one phasewatch process owns."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.store = Store(settings.storage.path)
        self.client = httpx.AsyncClient(
            follow_redirects=False,
            limits=httpx.Limits(max_connections=settings.scrape.concurrency),
            headers={"User-Agent": "phasewatch"},
        )
        self.collector = Collector(settings, self.store, self.client)
        self.metrics: SelfMetrics = build_self_metrics()
        self.alerting = Alerting(
            settings, self.store, getattr(self.collector, "states", None), self.metrics.registry
        )
        self.metrics.targets.set(len(settings.targets))
        self.scheduler = AsyncIOScheduler()
        self.started_at = time.time()

    async def scrape_job(self) -> None:
        """Run one scrape round and account for it in the self-metrics."""
        t0 = time.perf_counter()
        outcomes = await self.collector.scrape_round()
        for o in outcomes:
            self.metrics.scrapes.labels(o.record.target, o.record.error_kind or "ok").inc()
            self.metrics.scrape_duration.observe(o.record.duration)
        self.metrics.round_duration.observe(time.perf_counter() - t0)

    def retention_job(self) -> None:
        """Drop history older than the configured retention."""
        removed = self.store.enforce_retention(
            time.time(), self.settings.storage.retention_days * 86400.0
        )
        if removed:
            log.info("retention removed %d rows", removed)
        self.metrics.store_bytes.set(self.store.size_bytes())

    def start(self) -> None:
        """Start the scheduled jobs on the running event loop."""
        interval = self.settings.scrape.interval
        self.scheduler.add_job(
            self.scrape_job,
            "interval",
            seconds=interval,
            id="scrape",
            next_run_time=datetime.now(UTC),
            max_instances=1,
            coalesce=True,
            misfire_grace_time=max(1, int(interval)),
        )
        self.scheduler.add_job(
            self.retention_job,
            "interval",
            seconds=RETENTION_EVERY_S,
            id="retention",
            next_run_time=datetime.now(UTC),
            max_instances=1,
            coalesce=True,
        )
        self.alerting.schedule(self.scheduler)
        self.scheduler.start()

    async def stop(self) -> None:
        """Stop the jobs and release the client and the store."""
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        await self.client.aclose()
        await self.alerting.aclose()
        self.store.close()
