"""``create_app(settings)``: the FastAPI application with the service in its lifespan."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import anyio.to_thread
from fastapi import APIRouter, FastAPI
from fastapi.exceptions import RequestValidationError

from app import __version__
from app.alerts.rules import check_rule_files
from app.api.connections import ConnectionGuard
from app.api.errors import document_message_details, validation_error
from app.api.limits import DEFAULT_MAX_BODY, BodyLimit
from app.api.routes import (
    alerts,
    diagnoses,
    fleet,
    headroom,
    health,
    probes,
    reload,
    silences,
    slo,
    targets,
    windows,
)
from app.config import Settings
from app.evaluate.settings import diagnosis_config
from app.fleet.specs import slo_specs
from app.read.fleetpoints import FleetOptions
from app.reload import ConfigReloader
from app.service import Service
from app.sources.probe import probe_target
from app.ui.mount import mount_live


def create_app(
    settings: Settings,
    *,
    start_jobs: bool = True,
    reload_config: Callable[[], Settings] | None = None,
    configure_logging: Callable[[Settings], None] | None = None,
    reload_on_sighup: bool = False,
    connections: ConnectionGuard | None = None,
) -> FastAPI:
    """Build the app; the service (store, scheduler, client) lives in the lifespan.

    A rule file that cannot be used raises :class:`~app.alerts.rules.RuleError` here,
    before anything is built (``config`` cannot check it: it knows no rules).
    ``reload_config`` reads the configuration again for ``POST /-/reload`` (and
    ``SIGHUP`` with ``reload_on_sighup``, for a process's main thread): ``app.reload``.
    ``connections``: the server's connection guard, told how many targets are scraped
    (a file descriptor is kept for each) and exported on ``/metrics``.
    """
    check_rule_files(settings.alerts)
    lifespan = _lifespan(
        settings,
        start_jobs=start_jobs,
        reload_config=reload_config,
        configure_logging=configure_logging,
        reload_on_sighup=reload_on_sighup,
        connections=connections,
    )
    app = FastAPI(
        title="phasewatch",
        version=__version__,
        description="Why is this vLLM server slow, and what should change.",
        lifespan=lifespan,
    )
    _api(app)
    mount_live(  # the Dash UI under /ui
        app,
        window=settings.window,
        scrape=settings.scrape,
        source=settings.source,
        config=diagnosis_config(settings),
        fleet=FleetOptions.from_config(
            settings.fleet,
            settings.storage,
            slo_specs(settings),
            [*settings.targets, *map(probe_target, settings.probes)],  # probes: no replicas
        ),
        alerts=settings.alerts.enabled,
        warm=start_jobs,
        jobs=start_jobs,
    )
    return app


def _lifespan(
    settings: Settings,
    *,
    start_jobs: bool,
    reload_config: Callable[[], Settings] | None,
    configure_logging: Callable[[Settings], None] | None,
    reload_on_sighup: bool,
    connections: ConnectionGuard | None,
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """The app's lifespan: the service built, its jobs started (``start_jobs``), its
    reloader (and ``SIGHUP``), and all of it stopped at the end."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Starlette runs every sync dependency in anyio's thread pool; the first call
        # imports anyio's asyncio backend (~10 ms): paid here, not by the first request.
        anyio.to_thread.current_default_thread_limiter()
        service = Service(settings)
        app.state.service = service
        if connections is not None:
            connections.scraped = lambda: len(service.source.targets())
            connections.register(service.metrics.registry)
        reloader = ConfigReloader(service, reload_config, configure_logging=configure_logging)
        app.state.reloader = reloader
        loop = asyncio.get_running_loop()
        pending: set[asyncio.Task[object]] = set()

        def on_sighup() -> None:
            task = loop.create_task(reloader.reload("SIGHUP"))
            pending.add(task)
            task.add_done_callback(pending.discard)

        if reload_on_sighup:
            loop.add_signal_handler(signal.SIGHUP, on_sighup)
        if start_jobs:
            service.start()
        try:
            yield
        finally:
            if reload_on_sighup:
                loop.remove_signal_handler(signal.SIGHUP)
            await service.stop()

    return lifespan


def _api(app: FastAPI) -> None:
    """The API's limits, errors and routes (``/api/v1``, health, reload)."""
    # Every request body is capped (1 MiB; silences far less), and counted as it streams.
    app.add_middleware(
        BodyLimit, default=DEFAULT_MAX_BODY, caps={"/api/v1/silences": silences.MAX_BODY}
    )
    app.add_exception_handler(RequestValidationError, validation_error)
    document_message_details(app)
    api = APIRouter(prefix="/api/v1")
    api.include_router(targets.router)
    api.include_router(windows.router)
    api.include_router(alerts.router)
    api.include_router(silences.router)
    api.include_router(diagnoses.router)
    api.include_router(fleet.router)
    api.include_router(slo.router)
    api.include_router(headroom.router)
    api.include_router(probes.router)
    app.include_router(api)
    app.include_router(health.router)
    app.include_router(reload.router)
