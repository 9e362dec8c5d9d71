"""The :class:`Service`: what one phasewatch process owns and the scheduler's jobs
(scrape, evaluate, send, stream metrics, roll-ups, retention, heap trim, hint effects),
its start and its stop. The package's docstring (:mod:`app.service`) says how the parts
connect.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from app.alerts.runtime import OUTBOX_JOB_ID, Alerting
from app.alerts.state import Evaluation
from app.config import Settings
from app.evaluate.resume import keep, resume
from app.evaluate.round import Evaluator
from app.evaluate.settings import diagnosis_config
from app.fleet.slo import attainment
from app.fleet.tracker import SloStatus
from app.heap import limit_arenas, trim
from app.logs import Throttled, quiet_job_overlaps
from app.pacing import BACKGROUND_SHARE, Pacer
from app.probemetrics import build_probe_metrics
from app.read.effects import TwinEffects
from app.read.twincache import TwinCache, page_info
from app.read.windows import WindowCache
from app.running_jobs import RunningJobs
from app.scrape.client import OUT_OF_DESCRIPTORS, ClientPool
from app.selfmetrics import (
    PERIOD_WINDOW,
    ReloadStatus,
    SelfMetrics,
    SloReading,
    StreamMetrics,
    StreamReading,
    TargetSeries,
    build_self_metrics,
    build_slo_metrics,
    build_stream_metrics,
    record_reload,
    set_held,
    update_slo_metrics,
    update_stream_metrics,
)
from app.service.clock import RoundClock
from app.service.evaluation import EvaluationJob
from app.service.readings import stream_reading
from app.sources.base import Source
from app.sources.combined import CombinedSource
from app.sources.discovery import discovery_for
from app.sources.follow import PrometheusFollower
from app.sources.live import ScrapeSource
from app.sources.probe import ProbeSource
from app.store.health import error_kind
from app.store.sqlite import Store

log = logging.getLogger(__name__)

RETENTION_EVERY_S = 600.0
# Closed minutes are rolled up (app.store.rollups) every 20 s, each run at most this
# long (a store written before roll-ups is back-filled over several runs).
ROLLUP_EVERY_S = 20.0
ROLLUP_RUN_MAX_S = 15.0
# The hints' effects job looks at its queue this often (its CPU budget decides how much).
EFFECTS_EVERY_S = 10.0
# A target whose fetch starts this many intervals after its previous one had a gap.
GAP_INTERVALS = 1.5
# The C heap's free pages are given back this often (app.heap: held free memory grew by
# ~100 MB in minutes at 1,000 targets; a trim there takes 3 ms, at most 23, in a worker).
HEAP_TRIM_EVERY_S = 5.0
# At a stop, the SLO refresh thread is waited for this long before the store closes.
SLO_STOP_TIMEOUT_S = 10.0
# …and the scheduled jobs that are running (a roll-up ends after its current chunk).
JOBS_STOP_TIMEOUT_S = 10.0


def _settle_s(settings: Settings) -> float:
    """How long after its time a delta may still arrive: a scrape's interval and timeout;
    from a Prometheus source, its lag and a round more (a minute rolled up before its
    deltas arrive takes each of them as a late write: decoded and packed again)."""
    settle = settings.scrape.interval + settings.scrape.timeout + 1.0
    if settings.source.kind == "prometheus":
        settle += settings.source.lag + settings.scrape.interval
    return settle


class Service:
    """Everything one phasewatch process owns."""

    def __init__(self, settings: Settings) -> None:
        # The links in alerts: the configured external URL, or where this process listens
        # (resolved once, so every part that builds alerts reads the same address).
        ui_base_url = settings.ui_url(socket.gethostname())
        settings = settings.model_copy(update={"ui_base_url": ui_base_url})
        self.settings = settings
        limit_arenas()  # before the worker threads start: each would hold a heap (app.heap)
        # Every alert round windows every stream's last minute: keep that in memory.
        recent = settings.window.length + 3.0 * settings.scrape.interval
        self.store = Store(settings.storage.path, recent_s=recent)
        self.source: Source
        self.scrape_clients: ClientPool | None = None
        # A stored target no longer scraped (removed from the list); None: never known.
        self.target_gone: Callable[[str], bool] | None = None
        self.scraped: ScrapeSource | None = None  # the scrape of the targets, if any
        self._open_source(settings)
        self.metrics: SelfMetrics = build_self_metrics()
        self.probes: ProbeSource | None = None
        if settings.probes:  # beside the scraped targets, each probe a target of its own
            self._add_probes(settings)
        self.diagnosis_config = diagnosis_config(settings)
        # Live: SLO burn rates are refreshed beside the alert rounds, not inside them.
        self.evaluator = Evaluator.from_settings(
            settings,
            self.store,
            self.diagnosis_config,
            targets=self.source.targets,
            ui_base_url=ui_base_url,
            background_slo=True,
            gone=self.target_gone,
        )
        self.alerting = Alerting(
            settings.alerts, self.store, self.metrics.registry, ui_base_url=ui_base_url
        )
        # The evaluation round is the service's own job: diagnoses stored, alerts or not.
        self.evaluation = EvaluationJob(self.evaluate_round)
        self.stream_metrics: StreamMetrics = build_stream_metrics(self.metrics.registry)
        self.slo_metrics = build_slo_metrics(self.metrics.registry)
        self.latest_slos: list[SloStatus] = []
        self.latest_readings: list[StreamReading] = []
        # The what-if twin's answers per stream and 5 minutes (app.read.twincache): headroom
        # on demand; the hints' effects priced by a job of their own under a CPU budget.
        # A twin is fitted at the page's cache_config_info (its KV pool) whoever asks.
        self.twin_cache = TwinCache(pages=lambda t, m: page_info(self.store, t, m))
        self.effects: TwinEffects | None = None
        if settings.whatif.hint_effects:
            self.effects = TwinEffects(
                self.store.intervals,
                self.diagnosis_config,
                self.twin_cache,
                cpu_share=settings.whatif.cpu_share,
            )
            self.evaluator.effects = self.effects
        self.window_cache = WindowCache(_settle_s(settings))
        self.metrics.targets.set(len(self.source.targets()))
        self.reload_status = ReloadStatus(last_attempt=time.time(), last_success=time.time())
        record_reload(self.metrics, self.reload_status)
        self.scrape_series = TargetSeries(self.metrics.scrapes)
        self.scheduler = AsyncIOScheduler()
        self.running_jobs = RunningJobs()
        self.running_jobs.attach(self.scheduler)
        self._stopping = threading.Event()  # the long jobs end early once it is set
        self.started_at = time.time()
        self.round_clock: RoundClock | None = None
        self._round_failed = Throttled(log)
        self._fetched_at: dict[str, float] = {}

    def _open_source(self, settings: Settings) -> None:
        """Where the signals come from: the targets scraped (through one client pool), or
        the series another Prometheus holds (``source.kind``)."""
        if settings.source.kind == "prometheus":
            self.source = PrometheusFollower(
                settings.source,
                settings.targets,
                self.store,
                length=settings.window.length,
                interval=settings.scrape.interval,
            )
            return
        self.scrape_clients = ClientPool(
            follow_redirects=False,
            headers={"User-Agent": "phasewatch"},
        )
        scraped = ScrapeSource(
            settings.scrape, discovery_for(settings), self.store, self.scrape_clients
        )
        self.source, self.target_gone = scraped, scraped.is_gone
        self.scraped = scraped

    def _add_probes(self, settings: Settings) -> None:
        """Run the configured probes as a source beside the scraped targets
        (``app.sources.probe``): their answers in the store and on ``/metrics``."""
        probe_metrics = build_probe_metrics(self.metrics.registry)
        scraped = self.source
        probes = self.probes = ProbeSource(
            settings.probes,
            settings.probing,
            self.store,
            max_bytes=settings.scrape.max_body_bytes,
            linked=scraped.targets,
            page_fresh_s=3.0 * settings.scrape.interval,
            observe=probe_metrics.observe,
        )
        self.source = CombinedSource([scraped, probes])
        gone = self.target_gone
        if gone is not None:  # a probe is never a scraped target that went away
            self.target_gone = lambda name: name not in probes.probes and gone(name)

    async def scrape_job(self) -> None:
        """Run one scrape round and account for it in the self-metrics.

        With the job scheduled (:meth:`start`), also the lag of every target's fetch
        behind the round's scheduled time, rounds missed, and per-target gaps.
        """
        t0 = time.perf_counter()
        slot = None
        if self.round_clock is not None:
            slot, missed = self.round_clock.started(time.time())
            if missed:
                self.metrics.rounds_missed.inc(missed)
                log.warning("scrape: %d round(s) missed (a round overran or stalled)", missed)
        try:
            outcomes = await self.source.read_round(time.time())
        except asyncio.CancelledError:
            # The service is stopping: the round's pages are not stored (the next start
            # takes its deltas from the last stored snapshot), which is no error.
            log.info("scrape: round cancelled by shutdown")
            return
        except Exception as exc:
            # A round that stored nothing (out of file descriptors, say) is a round
            # missed; the next one's deltas start from the last stored snapshot.
            self.metrics.rounds_missed.inc()
            self._round_failed.warning(
                "scrape: round failed and was counted as missed: %s: %s",
                type(exc).__name__,
                exc,
            )
            return
        starved = sum(o.record.error == OUT_OF_DESCRIPTORS for o in outcomes)
        if starved:
            # Pages not fetched for want of a descriptor here: the round did not happen
            # for those targets, whatever they would have answered.
            self.metrics.rounds_missed.inc()
            self._round_failed.warning(
                "scrape: %d target(s) not fetched for want of file descriptors; "
                "round counted as missed",
                starved,
            )
        gap = GAP_INTERVALS * self.settings.scrape.interval
        for o in outcomes:
            self.scrape_series.count(o.record.target, o.record.error_kind or "ok")
            self.metrics.scrape_duration.observe(o.record.duration)
            if o.started is not None:
                previous = self._fetched_at.get(o.record.target)
                if previous is not None and o.started - previous > gap:
                    self.metrics.scrape_gaps.inc()
                self._fetched_at[o.record.target] = o.started
                if slot is not None:
                    self.metrics.scrape_lag.observe(max(0.0, o.started - slot))
        self.metrics.round_duration.observe(time.perf_counter() - t0)
        self._account_targets()

    def _account_targets(self) -> None:
        """Drop what the service holds of targets no longer scraped (their series of
        ``phasewatch_scrapes_total``, their last fetch time) and export what is held."""
        live = self.source.targets()
        self.metrics.targets.set(len(live))
        for name in self.scrape_series.keep_only(live):
            self._fetched_at.pop(name, None)
        counts = self.scraped.held() if self.scraped is not None else {}
        counts["fetch_times"] = len(self._fetched_at)
        counts["stream_gauges"] = len(self.latest_readings)
        counts["alerts"] = len(self.alerting.engine.alerts)
        counts["slo_count_streams"] = self.evaluator.tracker.streams_held
        set_held(self.metrics, counts)

    def evaluate_round(self, now: float, *, alerts: bool | None = None) -> Evaluation | None:
        """One evaluation round at ``now`` (blocking): every stream windowed and
        diagnosed; with alerts (default: ``alerts.enabled``) its instances judged by the
        rules and saved with the notifications they plan; then its diagnoses stored."""
        done = self.evaluator.run(now)
        evaluation = None
        if self.settings.alerts.enabled if alerts is None else alerts:
            evaluation = self.alerting.judge(
                done.instances,
                now,
                gone=self.target_gone,
                held_scopes=("slo",) if done.slos_pending else (),
            )
        self.evaluator.save(done)
        return evaluation

    def evaluate_alerts(self, now: float) -> Evaluation:
        """:meth:`evaluate_round` with the rules judged, alerts enabled or not."""
        evaluation = self.evaluate_round(now, alerts=True)
        assert evaluation is not None
        return evaluation

    def _alert_round_fresh(self, now: float) -> bool:
        """The alert engine evaluated every stream within its last interval or two."""
        last = self.alerting.engine.last_evaluation
        every = self.settings.alerts.evaluation_interval
        return self.settings.alerts.enabled and last is not None and now - last <= 2 * every

    def evaluate_streams(self, now: float) -> list[StreamReading]:
        """The latest window of every stored stream, diagnosed (blocking: store reads).

        The last alert round already windowed and diagnosed every live stream: while it
        is fresh, its readings are taken instead of doing the work again.
        """
        if self._alert_round_fresh(now):
            return [stream_reading(w, d) for w, d in self.evaluator.latest_streams]
        return [stream_reading(w, d) for w, d in self.evaluator.stream_windows(now)]

    def evaluate_slos(self, now: float) -> list[SloStatus]:
        """Every SLO on every fleet at ``now`` (blocking: store reads; counts are cached in
        the evaluator's tracker, which the alert rounds share)."""
        alerts = self.settings.alerts
        fresh_for = alerts.slo_evaluation_interval + alerts.evaluation_interval
        reuse = fresh_for if self._alert_round_fresh(now) else None
        return self.evaluator.slo_statuses(now, reuse_within=reuse)

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
        try:
            await self._stream_metrics()
        except asyncio.CancelledError:
            log.info("stream metrics: cancelled by shutdown")  # nothing to save

    async def _stream_metrics(self) -> None:
        readings = await asyncio.to_thread(self.evaluate_streams, time.time())
        firing = self.alerts_firing()
        readings = [
            replace(r, alerts_firing=firing.get((r.target, r.model_name), 0)) for r in readings
        ]
        self.latest_readings = readings
        update_stream_metrics(self.stream_metrics, readings)
        statuses = await asyncio.to_thread(self.evaluate_slos, time.time())
        self.latest_slos = statuses
        update_slo_metrics(
            self.slo_metrics,
            [
                SloReading(
                    slo=s.spec.name,
                    model_name=s.key.model_name,
                    fleet=s.key.name,
                    attainment=attainment(s.latest),
                    budget_remaining=s.budget.remaining,
                    burn_rates={**s.burn, PERIOD_WINDOW: s.budget.burn},
                )
                for s in statuses
            ],
        )

    def retention_job(self) -> None:
        """Drop history older than the configured retention."""
        try:
            removed = self.store.enforce_retention(
                time.time(),
                self.settings.storage.retention_days * 86400.0,
                self.settings.storage.rollup_retention_days * 86400.0,
            )
        except sqlite3.Error as exc:
            log.warning("retention skipped (store %s: %s)", error_kind(exc), exc)
            return
        if removed:
            log.info("retention removed %d rows", removed)
        self.metrics.store_bytes.set(self.store.size_bytes())

    def rollup_job(self) -> None:
        """Roll up the minutes that closed (every delta in them is stored: a scrape
        interval and its timeout have passed), in at most half of the interpreter."""
        try:
            self.store.roll_up(
                time.time() - self.window_cache.settle,
                pace=Pacer(BACKGROUND_SHARE),
                deadline=time.monotonic() + ROLLUP_RUN_MAX_S,
                stop=self._stopping,
            )
        except sqlite3.Error as exc:
            log.warning("roll-up skipped (store %s: %s)", error_kind(exc), exc)

    def heap_job(self) -> None:
        """Give the C heap's free pages back to the system (:mod:`app.heap`): a round's
        pages, windows and store reads are freed, but glibc would keep them."""
        trim()

    def start(self) -> None:
        """Start the scheduled jobs on the running event loop, from the last rounds a
        stopped service kept (the overview's first view; ``app.evaluate.resume``)."""
        resume(self.evaluator, time.time())
        interval = self.settings.scrape.interval
        anchor = datetime.now(UTC)
        self.round_clock = RoundClock(anchor.timestamp(), interval)
        self.scheduler.add_job(
            self.scrape_job,
            "interval",
            seconds=interval,
            start_date=anchor,
            id="scrape",
            next_run_time=anchor,
            max_instances=1,
            coalesce=True,
            misfire_grace_time=max(1, int(interval)),
        )
        self.scheduler.add_job(  # at start-up too: a store left over its limit
            self.retention_job,
            "interval",
            seconds=RETENTION_EVERY_S,
            id="retention",
            next_run_time=datetime.now(UTC),
            max_instances=1,
            coalesce=True,
        )
        background = [
            (self.stream_metrics_job, self.settings.window.step, "stream_metrics"),
            (self.rollup_job, ROLLUP_EVERY_S, "rollups"),
            (self.heap_job, HEAP_TRIM_EVERY_S, "heap_trim"),
        ]
        if self.effects is not None:
            background.append((self.effects_job, EFFECTS_EVERY_S, "hint_effects"))
        for job, seconds, job_id in background:
            self.scheduler.add_job(
                job, "interval", seconds=seconds, id=job_id, max_instances=1, coalesce=True
            )
        self.evaluation.schedule(self.scheduler, self.settings.alerts.evaluation_interval)
        self.alerting.schedule(self.scheduler)
        # Their next tick does the work of a skipped one: no warning when they overlap.
        quiet_job_overlaps([job_id for _, _, job_id in background] + [OUTBOX_JOB_ID])
        self.scheduler.start()

    def effects_job(self) -> None:
        """Price the queued hints under their CPU budget and export what it cost."""
        effects, m = self.effects, self.metrics
        if effects is None:
            return
        spent, priced, failed = effects.spent_s, effects.priced, effects.failed
        try:
            effects.work()
        finally:
            m.effects_cpu.inc(max(0.0, effects.spent_s - spent))
            m.effects_priced.inc(effects.priced - priced)
            m.effects_failed.inc(effects.failed - failed)
            m.effects_queued.set(effects.queued)

    async def stop(self) -> None:
        """Stop the jobs, deliver the notifications that are due, release the clients and
        the store."""
        if self.scheduler.running:
            # Nothing new starts; the runs in flight end before the scheduler (which
            # would cancel them) and the store (which they may be writing) go.
            self.scheduler.pause()
            self._stopping.set()
            if not await asyncio.to_thread(self.running_jobs.wait_idle, JOBS_STOP_TIMEOUT_S):
                log.warning(
                    "%d scheduled job(s) still running after %g s; stopping anyway",
                    self.running_jobs.running,
                    JOBS_STOP_TIMEOUT_S,
                )
            self.scheduler.shutdown(wait=False)
        await self.alerting.drain(self.settings.alerts.send_timeout)
        if self.scrape_clients is not None:
            await self.scrape_clients.aclose()
        await self.source.aclose()
        await self.alerting.aclose()
        # The SLO refresh reads the store in a thread of its own: it ends first.
        if not await asyncio.to_thread(self.evaluator.slos.stop, SLO_STOP_TIMEOUT_S):
            log.warning(
                "the SLO refresh did not end within %g s; closing the store", SLO_STOP_TIMEOUT_S
            )
        try:  # the last rounds, for the next start's first view
            await asyncio.to_thread(keep, self.evaluator, time.time())
        except Exception:
            log.exception("could not keep the last rounds for the next start")
        self.store.close()
