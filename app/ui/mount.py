"""Mount the UI under ``/ui`` of a FastAPI app: the live service's, or a standalone one.

The Dash (Flask) app is served through ``a2wsgi``'s WSGI bridge, in the same process
and port as the API; its callbacks run in the bridge's worker threads, off the event
loop. What the pages read is assembled by ``app.read.pages``: the live UI reads the
service that the lifespan builds (``app.state.service``) when a request comes, never at
import. The pages' cache warmer (``app.read.warmer``) runs with the app.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from a2wsgi import WSGIMiddleware
from fastapi import FastAPI
from fastapi.responses import RedirectResponse

from app.config import ScrapeConfig, SourceConfig, WindowConfig
from app.read.alertfeed import AlertFeed
from app.read.board import Board
from app.read.fleetpoints import FleetOptions
from app.read.pages import Pages, fixed_pages, live_pages
from app.read.pricing import PagePricer
from app.read.records import DiagnosisConfig
from app.read.source import WindowSource
from app.read.target import UiData
from app.ui.dashapp import build_dash

log = logging.getLogger(__name__)

STOP_S = 5.0  # how long the app's stop waits for the board's and the pricing job's threads


def mount(app: FastAPI, pages: Pages, *, path: str = "/ui", warm: bool = True) -> None:
    """Serve the Dash UI for ``pages`` under ``path``; run their warmer with the app, and
    end a count of their fleets' own before the app's store closes. The overview's board
    (``app.read.board``) is first computed as the app starts (``warm``; else when the
    overview is first asked for: an app without its jobs reads nothing on its own)."""
    board = pages.board if pages.board is not None else Board(pages.data, fleets=pages.fleets)
    pricer = pages.pricer if pages.pricer is not None else PagePricer(pages.data, pages.twin)
    dash_app = build_dash(
        pages.data,
        alert_feed=pages.alerts,
        fleets=pages.fleets,
        prefix=path.rstrip("/") + "/",
        twin=pages.twin,
        board=board,
        pricer=pricer,
    )
    app.mount(path, WSGIMiddleware(dash_app.server))  # type: ignore[arg-type]

    @app.get(path, include_in_schema=False)
    def _slash() -> RedirectResponse:
        return RedirectResponse(path.rstrip("/") + "/")

    warmer, fleets = pages.warmer, pages.fleets
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with inner(a) as state:
            if warm:
                board.start()
            if warmer is not None:
                warmer.start()
            try:
                yield state
            finally:  # before the service (``inner``) closes the store they read
                await asyncio.to_thread(_stop_both, board, pricer)
                if warmer is not None:
                    warmer.stop()
                if fleets is not None and not await asyncio.to_thread(fleets.close, 10.0):
                    log.warning("the pages' SLO count still running at shutdown")

    app.router.lifespan_context = lifespan


def _stop_both(board: Board, pricer: PagePricer, timeout: float = STOP_S) -> None:
    """Stop the board's and the pricing job's threads, waiting for both at once (a twin
    being fitted cannot be interrupted: a daemon thread still running when the store
    closes logs its error and ends)."""
    board.stop(0.0)
    pricer.stop(0.0)
    deadline = time.monotonic() + timeout
    board.stop(max(0.0, deadline - time.monotonic()))
    pricer.stop(max(0.0, deadline - time.monotonic()))


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
    """The UI of the running service (its store, targets, alerts) under ``/ui``
    (``app.read.pages.live_pages`` says what each argument is)."""
    pages = live_pages(
        lambda: getattr(app.state, "service", None),
        window=window,
        scrape=scrape,
        source=source,
        config=config,
        fleet=fleet,
        alerts=alerts,
        warm=warm,
        jobs=jobs,
    )
    mount(app, pages, warm=warm)
    return pages.data


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
    """A FastAPI app serving only the UI (and ``/healthz``) over a fixed source
    (``app.read.pages.fixed_pages``)."""
    app = FastAPI(title=title, docs_url=None, redoc_url=None, openapi_url=None)
    pages = fixed_pages(
        source,
        config,
        length=length,
        step=step,
        alert_feed=alert_feed,
        fleet_options=fleet_options,
    )
    mount(app, pages)

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> dict[str, str]:
        return {"status": "ok", "source": source.label}

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/ui/")

    return app
