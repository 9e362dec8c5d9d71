"""Alerting inside the service: the alert engine fed by each evaluation round, the outbox
sender job, their metrics.

Built by :class:`app.service.Service`, whose own evaluation round
(:mod:`app.service.evaluation`, alerts on or off) hands each round's instances to
:meth:`Alerting.judge` when alerts are enabled. :meth:`Alerting.schedule` adds the
``outbox`` job (every ``alerts.send_interval``, first run at once, which is what
delivers notifications left undelivered by a crash or a kill).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import httpx
from prometheus_client import CollectorRegistry, Counter, Gauge

from app.alerts.engine import AlertEngine, configured_rules
from app.alerts.fields import Instance
from app.alerts.outbox import Outbox, ReceiverHealth, Sender
from app.alerts.receivers import Notifier
from app.alerts.state import AlertState, Evaluation
from app.config import AlertsConfig
from app.store.health import error_kind
from app.store.sqlite import Store

log = logging.getLogger(__name__)

__all__ = ["OUTBOX_JOB_ID", "Alerting"]

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
    ) -> None:
        """``ui_base_url``: where the UI is reached, for the links in notifications."""
        cfg = self.config = config
        self.engine = AlertEngine(cfg, store, ui_base_url=ui_base_url)
        self.outbox = Outbox(store)
        # Send rounds finished (sent or not): the outbox job's liveness, shown by /healthz.
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
            scheduler.remove_job(OUTBOX_JOB_ID)
        elif config.enabled and not old.enabled:
            self.schedule(scheduler)
        elif config.enabled and config.send_interval != old.send_interval:
            scheduler.reschedule_job(
                OUTBOX_JOB_ID, trigger="interval", seconds=config.send_interval
            )

    def _count(self, receiver: Notifier, outcome: str) -> None:
        if self._sent is not None:
            self._sent.labels(receiver.kind, outcome).inc()

    def judge(
        self,
        instances: Sequence[Instance],
        now: float,
        *,
        gone: Callable[[str], bool] | None = None,
        held_scopes: tuple[str, ...] = (),
    ) -> Evaluation:
        """Judge one evaluation round's instances (blocking: the engine's transaction is
        the round's to commit) and export the alerts by state."""
        evaluation = self.engine.evaluate_once(instances, now, gone=gone, held_scopes=held_scopes)
        if self._alerts_gauge is not None:
            for state in AlertState:
                n = sum(1 for a in self.engine.alerts.values() if a.state == state)
                self._alerts_gauge.labels(str(state)).set(n)
        return evaluation

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
        """Add the outbox job to an APScheduler scheduler (alerts enabled)."""
        cfg = self.config
        if not cfg.enabled:
            return
        now = datetime.now(UTC)
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
