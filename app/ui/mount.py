"""Mount the UI under ``/ui`` of a FastAPI app: the live service's, or a standalone one.

The Dash (Flask) app is served through ``a2wsgi``'s WSGI bridge, in the same process
and port as the API; its callbacks run in the bridge's worker threads, off the event
loop. The live UI reads the service that the lifespan builds (``app.state.service``)
when a request comes, never at import.

A cache warmer keeps the newest windows of the 6 h and 24 h views computed in the
background, so opening a day of history costs a page render, not a day of windowing.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from a2wsgi import WSGIMiddleware
from fastapi import FastAPI
from fastapi.responses import RedirectResponse

from app.config import ScrapeConfig, Settings, SourceConfig, WindowConfig
from app.diagnose import Diagnosis, DiagnosisConfig
from app.fleet.specs import slo_specs
from app.fleet.tracker import SloTracker
from app.model import Window
from app.pacing import Pacer
from app.read.twincache import TwinCache
from app.redact import redact_url
from app.ui.alertfeed import AlertFeed, NoAlerts, StoreAlerts
from app.ui.dashapp import build_dash
from app.ui.data import UiData
from app.ui.fleetdata import FleetData, FleetOptions
from app.ui.source import StoreSource, WindowSource, live_targets

log = logging.getLogger(__name__)

WARM_EVERY_S = 30.0
WARM_RANGES_S = (21600.0, 86400.0)
WARM_MAX_STREAMS = 50
WARM_VIEWED_S = 3600.0
WARM_SHARE = 0.25


class Warmer:
    """Keeps the cache of the most-viewed ranges filled, in a daemon thread."""

    def __init__(self, data: UiData, every: float = WARM_EVERY_S) -> None:
        self.data = data
        self.every = every
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def warm_once(self) -> None:
        """The long views of the streams viewed in the last ``WARM_VIEWED_S`` (at most
        ``WARM_MAX_STREAMS``, the most recent first): a page opened again is served from
        the cache; a stream nobody looks at costs nothing (at 1,000 targets, warming the
        first 50 streams regardless took 14 % of the service's CPU)."""
        now = self.data.now()
        pace = Pacer(WARM_SHARE)  # a nicety: it yields to the scrape loop and the alerts
        for target, model in self.data.viewed(WARM_VIEWED_S)[:WARM_MAX_STREAMS]:
            for span in WARM_RANGES_S:
                if self._stop.is_set():
                    return
                pace()
                self.data.timeline(target, model, now - span, now, warm=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.warm_once()
            except Exception:  # keep warming after a bad read; the page will show the error
                log.exception("UI cache warm-up failed")
            self._stop.wait(self.every)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="phasewatch-ui-warm", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)


def mount(
    app: FastAPI,
    data: UiData,
    *,
    alert_feed: AlertFeed | None = None,
    fleets: FleetData | None = None,
    warmer: Warmer | None = None,
    path: str = "/ui",
    twin: TwinCache | None = None,
) -> None:
    """Serve the Dash UI for ``data`` under ``path``; run ``warmer`` with the app, and
    end a count of ``fleets``' own before the app's store closes."""
    dash_app = build_dash(
        data, alert_feed=alert_feed, fleets=fleets, prefix=path.rstrip("/") + "/", twin=twin
    )
    app.mount(path, WSGIMiddleware(dash_app.server))  # type: ignore[arg-type]

    @app.get(path, include_in_schema=False)
    def _slash() -> RedirectResponse:
        return RedirectResponse(path.rstrip("/") + "/")

    if warmer is None and fleets is None:
        return
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with inner(a) as state:
            if warmer is not None:
                warmer.start()
            try:
                yield state
            finally:  # before the service (``inner``) closes the store they read
                if warmer is not None:
                    warmer.stop()
                if fleets is not None and not await asyncio.to_thread(fleets.close, 10.0):
                    log.warning("the pages' SLO count still running at shutdown")

    app.router.lifespan_context = lifespan


def mount_live(
    app: FastAPI,
    *,
    window: WindowConfig,
    scrape: ScrapeConfig,
    source: SourceConfig,
    config: DiagnosisConfig,
    fleet: FleetOptions,
    alerts: bool = True,
    warm: bool = True,
    jobs: bool = True,
) -> UiData:
    """The UI of the running service (its store, targets, alerts) under ``/ui``.

    ``config`` is the service's diagnosis configuration, ``fleet`` how it forms and
    judges fleets; ``alerts`` False (alerting off) shows none; ``warm`` runs the cache
    warmer with the app; ``jobs`` False: the service's jobs do not run (its rounds do not
    count the SLOs: the pages count them).
    """

    def service() -> Any:
        return app.state.service

    store_source = StoreSource(
        lambda: service().store,
        targets=live_targets(lambda: service().source.targets()),
        settled=scrape.interval + scrape.timeout + 1.0,
        label=_live_label(source),
    )
    data = UiData(store_source, config, length=window.length, step=window.step)

    def latest() -> list[tuple[Window, Diagnosis]]:
        svc = getattr(app.state, "service", None)
        found: list[tuple[Window, Diagnosis]] = [] if svc is None else svc.evaluator.latest_streams
        return found

    def recent_of(target: str, model: str) -> tuple[tuple[float, str, str | None], ...]:
        svc = getattr(app.state, "service", None)
        return () if svc is None else svc.evaluator.recent.get(target, model)

    def wait_latest(timeout: float) -> bool:
        svc = getattr(app.state, "service", None)
        return svc is not None and bool(svc.evaluator.wait_judged(timeout))

    data.latest = latest
    data.wait_latest = wait_latest
    data.recent_of = recent_of
    feed: AlertFeed = StoreAlerts(lambda: service().store) if alerts else NoAlerts()

    def tracker() -> SloTracker:  # the evaluator's: one cache for alerts, gauges and UI
        found: SloTracker = service().evaluator.tracker
        return found

    fleets = FleetData(
        store_source,
        data.config,
        fleet,
        length=window.length,
        step=window.step,
        tracker=tracker,
        counted_elsewhere=jobs,
    )
    fleets.round_windows = latest
    # The service's twin answers (headroom, the hints' effects its job priced), once it runs.
    twin = TwinCache(
        shared=lambda: getattr(getattr(app.state, "service", None), "twin_cache", None)
    )
    mount(
        app, data, alert_feed=feed, fleets=fleets, warmer=Warmer(data) if warm else None, twin=twin
    )
    return data


def _live_label(source: SourceConfig) -> str:
    if source.kind == "prometheus":
        return f"live from Prometheus {redact_url(source.url or '')}"
    return "live"


def _default_fleet_options() -> FleetOptions:
    """The default settings' fleets: the built-in SLO, no grouping labels."""
    defaults = Settings()
    return FleetOptions.from_config(defaults.fleet, defaults.storage, slo_specs(defaults))


def standalone(
    source: WindowSource,
    config: DiagnosisConfig,
    *,
    length: float = 60.0,
    step: float = 15.0,
    alert_feed: AlertFeed | None = None,
    title: str = "phasewatch UI",
    fleet_options: FleetOptions | None = None,
) -> FastAPI:
    """A FastAPI app serving only the UI (and ``/healthz``) over a fixed source.

    Fleet pages need a source that also yields deltas (a :class:`StoreSource`);
    ``fleet_options`` default to the built-in SLO (``Settings()``'s).
    """
    app = FastAPI(title=title, docs_url=None, redoc_url=None, openapi_url=None)
    data = UiData(source, config, length=length, step=step)
    fleets = None
    if isinstance(source, StoreSource):
        options = fleet_options or _default_fleet_options()
        fleets = FleetData(source, config, options, length=length, step=step)
    mount(app, data, alert_feed=alert_feed, fleets=fleets)

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> dict[str, str]:
        return {"status": "ok", "source": source.label}

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/ui/")

    return app
