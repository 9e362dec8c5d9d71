"""What the pages read, assembled: the running service's data or a fixed source's.

:func:`live_pages` reads the service the app's lifespan builds when a request comes,
never at assembly: its store and targets, its evaluation rounds' latest windows and
classes (the overview's cards and strips), its SLO tracker (one cache for alerts,
gauges and pages) and its twin answers. :func:`fixed_pages` reads a recording or a
Prometheus range loaded into a store (``app.read.source``). The UI (``app.ui.mount``)
renders whichever it is handed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.config import ScrapeConfig, SourceConfig, WindowConfig
from app.diagnose.config import DiagnosisConfig
from app.diagnose.records import Diagnosis
from app.fleet.tracker import SloTracker
from app.model import Window
from app.read.alertfeed import AlertFeed, NoAlerts, StoreAlerts
from app.read.board import Board
from app.read.effects import TwinEffects
from app.read.fleetpage import FleetData
from app.read.fleetpoints import FleetOptions
from app.read.pricing import PagePricer
from app.read.source import StoreSource, WindowSource, live_targets
from app.read.target import UiData
from app.read.twincache import TwinCache
from app.read.warmer import Warmer
from app.redact import redact_url


@dataclass(frozen=True)
class Pages:
    """Everything the pages read: streams, alerts, fleets, the twin's answers, the
    overview's board (``app.read.board``; None: one over ``data``) and the cache warmer
    to run with the app (None: none)."""

    data: UiData
    alerts: AlertFeed = field(default_factory=NoAlerts)
    fleets: FleetData | None = None
    twin: TwinCache = field(default_factory=TwinCache)
    warmer: Warmer | None = None
    board: Board | None = None
    # The twin's answers from the pricing job's cache (app.read.pricing; None: one over
    # ``data`` and ``twin``, pricing with a job of the pages' own).
    pricer: PagePricer | None = None


def live_label(source: SourceConfig) -> str:
    """How the pages name the live source."""
    if source.kind == "prometheus":
        return f"live from Prometheus {redact_url(source.url or '')}"
    return "live"


def live_pages(
    service: Callable[[], Any],
    *,
    window: WindowConfig,
    scrape: ScrapeConfig,
    source: SourceConfig,
    config: DiagnosisConfig,
    fleet: FleetOptions,
    alerts: bool = True,
    warm: bool = True,
    jobs: bool = True,
) -> Pages:
    """The pages of the running service (``service()``: it, or None before it runs).

    ``config`` is the service's diagnosis configuration, ``fleet`` how it forms and
    judges fleets; ``alerts`` False (alerting off) shows none; ``warm`` runs the cache
    warmer; ``jobs`` False: the service's jobs do not run (its rounds do not count the
    SLOs: the pages count them).
    """
    store_source = StoreSource(
        lambda: service().store,
        targets=live_targets(lambda: service().source.targets()),
        settled=scrape.interval + scrape.timeout + 1.0,
        label=live_label(source),
    )
    data = UiData(store_source, config, length=window.length, step=window.step)

    def latest() -> list[tuple[Window, Diagnosis]]:
        svc = service()
        found: list[tuple[Window, Diagnosis]] = [] if svc is None else svc.evaluator.latest_streams
        return found

    def recent_of(target: str, model: str) -> tuple[tuple[float, str, str | None], ...]:
        svc = service()
        return () if svc is None else svc.evaluator.recent.get(target, model)

    def wait_latest(timeout: float) -> bool:
        svc = service()
        return svc is not None and bool(svc.evaluator.wait_judged(timeout))

    data.latest = latest
    data.wait_latest = wait_latest
    data.recent_of = recent_of

    def tracker() -> SloTracker:  # the evaluator's: one cache for alerts, gauges and UI
        found: SloTracker = service().evaluator.tracker
        return found

    fleets = FleetData(
        store_source,
        config,
        fleet,
        length=window.length,
        step=window.step,
        tracker=tracker,
        counted_elsewhere=jobs,
    )
    fleets.round_windows = latest
    # The service's twin answers (headroom, the hints' effects its job priced), once it runs.
    twin = TwinCache(shared=lambda: getattr(service(), "twin_cache", None))

    def job() -> TwinEffects | None:  # the service's pricing job, where it runs
        found: TwinEffects | None = getattr(service(), "effects", None)
        return found

    def share() -> float:  # the service's whatif.cpu_share (the pages' own job's floor)
        found = getattr(service(), "effects", None)
        return float(getattr(found, "cpu_share", 0.0))

    return Pages(
        data,
        alerts=StoreAlerts(lambda: service().store) if alerts else NoAlerts(),
        fleets=fleets,
        twin=twin,
        warmer=Warmer(data) if warm else None,
        board=Board(data, fleets=fleets),
        pricer=PagePricer(data, twin, job if jobs else None, share),
    )


def fixed_pages(
    source: WindowSource,
    config: DiagnosisConfig,
    *,
    length: float = 60.0,
    step: float = 15.0,
    alert_feed: AlertFeed | None = None,
    fleet_options: FleetOptions | None = None,
) -> Pages:
    """The pages of a fixed source (a recording, a Prometheus range). Fleet pages need a
    source that also yields deltas (a :class:`StoreSource`); ``fleet_options`` default
    to the built-in SLO (``Settings()``'s)."""
    data = UiData(source, config, length=length, step=step)
    fleets = None
    if isinstance(source, StoreSource):
        options = fleet_options or FleetOptions.defaults()
        fleets = FleetData(source, config, options, length=length, step=step)
    return Pages(
        data, alerts=alert_feed or NoAlerts(), fleets=fleets, board=Board(data, fleets=fleets)
    )
