"""Alerting inside the service: the evaluation job, the outbox sender job, their metrics.

Built by :class:`app.service.Service`; :meth:`Alerting.schedule` adds two APScheduler
jobs — ``alerts`` (every ``alerts.evaluation_interval``, first run shortly after the
first scrape) and ``outbox`` (every ``alerts.send_interval``, first run at once, which is
what delivers notifications left undelivered by a crash or a kill). An ``alerts`` round
is the ``evaluate`` it is given (the service's: the evaluation round's instances judged
by :class:`~app.alerts.engine.AlertEngine`), run off the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from prometheus_client import CollectorRegistry, Counter, Gauge

from app.alerts.engine import AlertEngine, configured_rules
from app.alerts.outbox import Outbox, ReceiverHealth, Sender
from app.alerts.receivers import Notifier
from app.alerts.state import AlertState, Evaluation
from app.config import AlertsConfig
from app.store.health import error_kind
from app.store.sqlite import Store

log = logging.getLogger(__name__)

__all__ = ["OUTBOX_JOB_ID", "Alerting"]

# The first evaluation waits this long after start-up so the first scrape is stored.
FIRST_EVALUATION_DELAY_S = 2.0
# The scheduler's id of the job that sends the outbox (every ``alerts.send_interval``).
OUTBOX_JOB_ID = "outbox"


class Alerting:
    """The alert engine, the outbox sender and their HTTP client."""

    def __init__(
        self,
        config: AlertsConfig,
        store: Store,
        registry: CollectorRegistry | None = None,
        *,
        ui_base_url: str,
        evaluate: Callable[[float], Evaluation],
    ) -> None:
        """``ui_base_url``: where the UI is reached, for the links in notifications."""
        cfg = self.config = config
        self.engine = AlertEngine(cfg, store, ui_base_url=ui_base_url)
        # One alert round at a time (blocking: store reads and one transaction).
        self.evaluate = evaluate
        self.outbox = Outbox(store)
        # Rounds finished (saved or not): liveness of the two jobs, shown by /healthz.
        self.evaluations = 0
        self.send_rounds = 0
        self.client = httpx.AsyncClient(headers={"User-Agent": "phasewatch"})
        self._alerts_gauge: Gauge | None = None
        self._sent: Counter | None = None
        if registry is not None:
            self._alerts_gauge = Gauge(
                "phasewatch_alerts", "Alerts by state", ["state"], registry=registry
            )
            self._sent = Counter(
                "phasewatch_notifications_total",
                "Notification attempts by receiver kind and outcome (sent, retry, rejected)",
                ["kind", "outcome"],
                registry=registry,
            )
        self.sender = Sender(
            self.outbox,
            self.engine.receivers,
            self.client,
            timeout=cfg.send_timeout,
            retry_initial=cfg.retry_initial,
            retry_max=cfg.retry_max,
            give_up_after=cfg.give_up_after,
            on_result=self._count,
        )

    def reconfigure(self, config: AlertsConfig, scheduler: Any | None = None) -> None:
        """Take new alert settings, rules and receivers (a reload): the alerts keep their
        state, the outbox keeps its rows (a receiver no longer configured keeps its rows
        undelivered, as after a restart), the jobs take the new intervals. Raises
        :class:`~app.alerts.rules.RuleError` before changing anything if a rule file is bad.
        """
        rules = configured_rules(config)
        old = self.config
        self.config = config
        self.engine.reconfigure(config, rules)
        sender = self.sender
        sender.receivers = {r.id: r for r in self.engine.receivers}
        for r in self.engine.receivers:
            sender.health.setdefault(r.id, ReceiverHealth())
        sender.timeout = config.send_timeout
        sender.retry_initial = config.retry_initial
        sender.retry_max = config.retry_max
        sender.give_up_after = config.give_up_after
        if scheduler is None or not scheduler.running:
            return
        if old.enabled and not config.enabled:
            for job in ("alerts", "outbox"):
                scheduler.remove_job(job)
        elif config.enabled and not old.enabled:
            self.schedule(scheduler)
        elif config.enabled:
            if config.evaluation_interval != old.evaluation_interval:
                scheduler.reschedule_job(
                    "alerts", trigger="interval", seconds=config.evaluation_interval
                )
            if config.send_interval != old.send_interval:
                scheduler.reschedule_job("outbox", trigger="interval", seconds=config.send_interval)

    def _count(self, receiver: Notifier, outcome: str) -> None:
        if self._sent is not None:
            self._sent.labels(receiver.kind, outcome).inc()

    async def evaluate_job(self) -> None:
        """One evaluation round, off the event loop."""
        try:
            await self._evaluate()
        finally:
            self.evaluations += 1

    async def _evaluate(self) -> None:
        try:
            await asyncio.to_thread(self.evaluate, time.time())
        except asyncio.CancelledError:
            # Stopping: the round saves in one transaction, so it either saved or not.
            log.info("alert evaluation interrupted by shutdown")
            return
        except sqlite3.Error as exc:
            # Nothing was saved and the state did not move on: the next round redoes it.
            log.warning("alert evaluation not saved (store %s: %s)", error_kind(exc), exc)
            return
        except Exception:
            log.exception("alert evaluation failed")
            return
        if self._alerts_gauge is not None:
            for state in AlertState:
                n = sum(1 for a in self.engine.alerts.values() if a.state == state)
                self._alerts_gauge.labels(str(state)).set(n)

    async def send_job(self) -> None:
        """Deliver what is due in the outbox."""
        try:
            await self._send()
        finally:
            self.send_rounds += 1

    async def _send(self) -> None:
        try:
            await self.sender.run_once()
        except asyncio.CancelledError:
            # Stopping: a row sent but not yet marked is sent again after the restart.
            log.info("outbox send interrupted by shutdown")
            return
        except sqlite3.Error as exc:
            # A row sent but not marked goes out again: at least once, as documented.
            log.warning(
                "outbox: store %s (%s); delivery resumes when it is writable", error_kind(exc), exc
            )
        except Exception:
            log.exception("outbox send failed")

    def schedule(self, scheduler: Any) -> None:
        """Add the two jobs to an APScheduler scheduler (not yet started or running)."""
        cfg = self.config
        if not cfg.enabled:
            return
        now = datetime.now(UTC)
        scheduler.add_job(
            self.evaluate_job,
            "interval",
            seconds=cfg.evaluation_interval,
            id="alerts",
            next_run_time=now + timedelta(seconds=FIRST_EVALUATION_DELAY_S),
            max_instances=1,
            coalesce=True,
            misfire_grace_time=max(1, int(cfg.evaluation_interval)),
        )
        scheduler.add_job(
            self.send_job,
            "interval",
            seconds=cfg.send_interval,
            id=OUTBOX_JOB_ID,
            next_run_time=now,
            max_instances=1,
            coalesce=True,
            misfire_grace_time=max(1, int(cfg.send_interval)),
        )

    async def drain(self, deadline_s: float) -> int:
        """Deliver what is due before the process exits (a graceful stop), for at most
        ``deadline_s`` seconds; what is left (a receiver down, a row backing off) stays
        in the outbox for the next start. Returns the rows delivered."""
        if not self.config.enabled:
            return 0
        sent = 0
        try:
            async with asyncio.timeout(deadline_s):
                while (n := await self.sender.run_once()) > 0:
                    sent += n
        except TimeoutError:
            log.warning("outbox: stopped draining after %g s", deadline_s)
        except Exception:
            log.exception("outbox drain failed")
        if sent:
            log.info("outbox: %d notification(s) delivered while stopping", sent)
        return sent

    async def aclose(self) -> None:
        await self.client.aclose()
