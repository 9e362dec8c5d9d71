"""Reload the configuration while the service runs: ``SIGHUP`` and ``POST /-/reload``.

As Prometheus does: the file (with the environment and the command-line flags it was
started with) is read and checked again; a configuration that does not load, or whose
rule file does not, is refused and the running one is kept — the error is logged, shown
in ``/api/v1/health/components`` (``config``) and exported as
``phasewatch_config_last_reload_successful`` 0 until a reload succeeds.

**Reloadable**: ``targets``, ``file_sd`` and ``http_sd`` (an added target is scraped from
the next round; a removed one stops, its history stays for the retention, it is listed
as gone, and its firing alerts resolve with ``resolution: target removed``), ``scrape``,
``window``, ``slo``, ``slos``, ``fleet`` (the evaluation is rebuilt: the next round
judges with them, SLO counts are read again), ``alerts`` (rules, receivers and
intervals: the alerts keep their state, an alert whose rule is gone resolves), ``log``
and ``storage.retention_days``.

**Not reloadable** (:data:`RESTART_ONLY`): where the service listens, the store's path,
the API token, the source kind and its Prometheus, the probes (``probes``, ``probing``),
the what-if twin's pricing of hints (``whatif``) and the UI's external address. A
reload that changes one is refused whole, saying a restart is needed.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from app.alerts.rules import RuleError
from app.config import ConfigError, Settings
from app.evaluate.round import Evaluator
from app.evaluate.settings import diagnosis_config
from app.selfmetrics import record_reload
from app.service import RoundClock, Service
from app.sources.discovery import discovery_for, unused

__all__ = ["RESTART_ONLY", "ConfigReloader", "Reloaded", "restart_needed"]

log = logging.getLogger(__name__)

RESTART_ONLY = (
    "server",
    "storage.path",
    "api_token",
    "source",
    "probes",
    "whatif",
    "ui_base_url",
)


class RestartNeeded(ValueError):
    """A new configuration changes what only a restart can change."""


@dataclass(frozen=True)
class Reloaded:
    """A reload's outcome: ``changed`` names the top-level sections that changed."""

    ok: bool
    message: str
    changed: tuple[str, ...] = ()


def restart_needed(running: Settings, new: Settings, *, hostname: str) -> list[str]:
    """The settings of :data:`RESTART_ONLY` that ``new`` changes (``running`` holds the
    resolved ``ui_base_url``; ``hostname``: this machine's, to resolve ``new``'s)."""
    out = []
    if new.server != running.server:
        out.append("server")
    if new.storage.path != running.storage.path:
        out.append("storage.path")
    if new.api_token != running.api_token:
        out.append("api_token")
    if new.source != running.source:
        out.append("source")
    if new.probes != running.probes or new.probing != running.probing:
        out.append("probes")
    if new.whatif != running.whatif:
        out.append("whatif")
    if new.ui_url(hostname) != running.ui_base_url:
        out.append("ui_base_url")
    return out


def _evaluation_inputs(s: Settings) -> tuple[Any, ...]:
    """What the evaluator is built from: a change rebuilds it."""
    a = s.alerts
    return (
        diagnosis_config(s),
        s.slo,
        s.slos,
        s.window,
        s.fleet,
        s.scrape.interval,
        s.storage.retention_days,
        a.evaluation_interval,
        a.slo_evaluation_interval,
        a.fire_on_unproven,
    )


class ConfigReloader:
    """Reloads one service's configuration, one reload at a time."""

    def __init__(
        self,
        service: Service,
        load: Callable[[], Settings] | None,
        *,
        configure_logging: Callable[[Settings], None] | None = None,
    ) -> None:
        """``load``: reads the configuration as at start-up (None: started without one,
        nothing to reload); ``configure_logging``: applies a new ``log`` section."""
        self.service = service
        self.load = load
        self.configure_logging = configure_logging
        self._lock = asyncio.Lock()

    async def reload(self, trigger: str) -> Reloaded:
        """Load, check and apply the configuration; refuse it whole if it is bad."""
        if self.load is None:  # nothing was loaded from outside: nothing to refuse either
            log.warning("config reload (%s): started without a configuration to read", trigger)
            return Reloaded(False, "no configuration to reload: started without one")
        async with self._lock:
            status = self.service.reload_status
            now = time.time()
            status.last_attempt, status.trigger = now, trigger
            try:
                new = await asyncio.to_thread(self.load)
                restart = restart_needed(self.service.settings, new, hostname=socket.gethostname())
                if restart:
                    raise RestartNeeded(
                        f"a restart is needed to change {', '.join(restart)}; "
                        "the running configuration is kept"
                    )
                changed = await apply(self.service, new)
                if changed and self.configure_logging is not None:
                    self.configure_logging(self.service.settings)
            except (ConfigError, RuleError, RestartNeeded) as exc:
                return self._refused(trigger, str(exc))
            except Exception as exc:  # a bug: say so, keep serving
                log.exception("config reload (%s) failed", trigger)
                return self._refused(trigger, f"internal error: {type(exc).__name__}: {exc}")
            status.successful, status.last_success, status.error = True, now, None
            record_reload(self.service.metrics, status)
            what = ", ".join(changed) if changed else "nothing changed"
            log.info("config reloaded (%s): %s", trigger, what)
            return Reloaded(True, f"reloaded: {what}", tuple(changed))

    def _refused(self, trigger: str, error: str) -> Reloaded:
        status = self.service.reload_status
        status.successful, status.error = False, error
        record_reload(self.service.metrics, status)
        log.error("config reload (%s) refused: %s", trigger, error)
        return Reloaded(False, error)


async def apply(service: Service, new: Settings) -> list[str]:
    """Apply a checked configuration to the running service; the sections changed."""
    old = service.settings
    new = new.model_copy(update={"ui_base_url": old.ui_base_url})
    changed = [k for k in type(new).model_fields if getattr(new, k) != getattr(old, k)]
    # First, and every time (a rule file may change under the same name): a rule file that
    # no longer loads raises before anything is changed.
    rules = list(service.alerting.engine.rules)
    service.alerting.reconfigure(new.alerts, service.scheduler)
    if new.alerts.evaluation_interval != old.alerts.evaluation_interval:
        service.evaluation.reschedule(service.scheduler, new.alerts.evaluation_interval)
    if service.alerting.engine.rules != rules:
        changed.append("rules")
    if not changed:
        return []
    scraped = service.scraped  # None: a Prometheus source (its section needs a restart)
    if scraped is not None:
        running = scraped.discovery
        if {"targets", "file_sd", "http_sd"} & set(changed):
            scraped.reconfigure(new.scrape, discovery_for(new, previous=running))
        else:
            scraped.reconfigure(new.scrape, running)
        for dropped in unused(running, scraped.discovery):
            await dropped.aclose()
    if _evaluation_inputs(new) != _evaluation_inputs(old):
        config = diagnosis_config(new)
        service.evaluator = await asyncio.to_thread(
            Evaluator.from_settings,
            new,
            service.store,
            config,
            targets=service.source.targets,
            ui_base_url=old.ui_base_url or "",
            background_slo=True,
            gone=service.target_gone,
        )
        service.evaluator.effects = service.effects  # the hints' priced effects, as at start
        if service.effects is not None:
            service.effects.config = config
        service.diagnosis_config = config
    _reschedule(service, old, new)
    service.window_cache.settle = new.scrape.interval + new.scrape.timeout + 1.0
    service.settings = new
    return changed


def _reschedule(service: Service, old: Settings, new: Settings) -> None:
    scheduler = service.scheduler
    if not scheduler.running:
        return
    if new.scrape.interval != old.scrape.interval:
        anchor = datetime.now(UTC)
        service.round_clock = RoundClock(anchor.timestamp(), new.scrape.interval)
        scheduler.reschedule_job(
            "scrape", trigger="interval", seconds=new.scrape.interval, start_date=anchor
        )
    if new.window.step != old.window.step:
        scheduler.reschedule_job("stream_metrics", trigger="interval", seconds=new.window.step)
