"""The running service: store, collector, scheduler and self-metrics, wired together.

Built by :func:`app.main.create_app` inside the FastAPI lifespan (never at import), so
tests and the CLI can build as many independent services as they like.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from datetime import UTC, datetime

import httpx
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from app.alerts.runtime import Alerting
from app.collector import Collector
from app.config import Settings
from app.diagnose import DiagnosisConfig, SloOverride, diagnose
from app.selfmetrics import (
    SelfMetrics,
    StreamMetrics,
    StreamReading,
    build_self_metrics,
    build_stream_metrics,
    update_stream_metrics,
)
from app.store.sqlite import Store
from app.windows.aggregate import window

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
        self.collector: Collector
        if settings.source.kind == "prometheus":
            from app.sources.collector import PrometheusCollector

            self.collector = PrometheusCollector(settings, self.store, self.client)
        else:
            self.collector = Collector(settings, self.store, self.client)
        self.metrics: SelfMetrics = build_self_metrics()
        self.alerting = Alerting(
            settings, self.store, getattr(self.collector, "states", None), self.metrics.registry
        )
        self.stream_metrics: StreamMetrics = build_stream_metrics(self.metrics.registry)
        self.diagnosis_config = diagnosis_config(settings)
        self.latest_readings: list[StreamReading] = []
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

    def evaluate_streams(self, now: float) -> list[StreamReading]:
        """The latest window of every stored stream, diagnosed (blocking: store reads)."""
        length = self.settings.window.length
        end = now - (self.settings.source.lag if self.settings.source.kind == "prometheus" else 0)
        readings = []
        for target, model in self.store.streams():
            deltas = self.store.intervals(target, model, end - length, end)
            if not deltas:
                continue
            w = window(deltas, start=end - length, end=end, target=target, model_name=model)
            scrapes = self.store.scrapes(target, end - length, end)
            failed = sum(1 for r in scrapes if not r.ok)
            d = diagnose(
                w, self.diagnosis_config, failed_scrapes=failed, attempted_scrapes=len(scrapes)
            )
            kv = w.gauges.get("kv_usage")
            waiting = w.gauges.get("waiting")
            readings.append(
                StreamReading(
                    target=target,
                    model_name=model,
                    ttft_p99=d.ttft_p99,
                    itl_p99=d.itl_p99,
                    kv_usage_max=kv.max if kv is not None else None,
                    waiting_avg=waiting.avg if waiting is not None else None,
                    diagnosis_class=d.cls.value,
                )
            )
        return readings

    def alerts_firing(self) -> dict[tuple[str, str], int]:
        """Firing alerts per (target, model_name), from the alert engine's last round."""
        counts: dict[tuple[str, str], int] = {}
        for alert in self.alerting.engine.alerts.values():
            model = alert.labels.get("model_name")
            if str(alert.state) == "firing" and model is not None:
                key = (alert.labels.get("target", ""), model)
                counts[key] = counts.get(key, 0) + 1
        return counts

    async def stream_metrics_job(self) -> None:
        """Evaluate the latest window of every stream and export it on ``/metrics``."""
        readings = await asyncio.to_thread(self.evaluate_streams, time.time())
        firing = self.alerts_firing()
        readings = [
            replace(r, alerts_firing=firing.get((r.target, r.model_name), 0)) for r in readings
        ]
        self.latest_readings = readings
        update_stream_metrics(self.stream_metrics, readings)

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
            self.stream_metrics_job,
            "interval",
            seconds=self.settings.window.step,
            id="stream_metrics",
            max_instances=1,
            coalesce=True,
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
        aclose = getattr(self.collector, "aclose", None)
        if aclose is not None:
            await aclose()
        await self.alerting.aclose()
        self.store.close()


def diagnosis_config(settings: Settings) -> DiagnosisConfig:
    """The diagnosis thresholds with the configured SLOs (a target key beats a model key)."""
    overrides: list[SloOverride] = []
    for key, v in settings.slo.overrides.items():
        overrides.append(SloOverride(target=key, ttft_p99=v.ttft_p99, itl_p99=v.itl_p99))
        overrides.append(SloOverride(model_name=key, ttft_p99=v.ttft_p99, itl_p99=v.itl_p99))
    return DiagnosisConfig(
        slo_ttft_p99=settings.slo.ttft_p99,
        slo_itl_p99=settings.slo.itl_p99,
        slo_overrides=tuple(overrides),
    )
