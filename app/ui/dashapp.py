"""``build_dash``: the Dash app (shell, routing, pages) over what ``app.read.pages`` assembles.

One Dash app per call — nothing at module level — so every ``create_app`` (and every
test) gets its own. Pages are routed by hand from ``dcc.Location`` (Dash's page
registry is process-global); each page module gives ``layout(...)`` and
``register(app, ctx)``. Assets (Dash's bundles, Plotly.js, ``assets/style.css``) are
served by the app itself: no CDN, so the UI works without internet.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import unquote

from dash import Dash, Input, Output, dcc, html

from app.read.alertfeed import AlertFeed, NoAlerts
from app.read.board import Board
from app.read.fleetpage import FleetData
from app.read.pricing import PagePricer
from app.read.target import UiData
from app.read.twincache import TwinCache
from app.ui import effectsview, headroomview, ids, timerange
from app.ui.callbody import BoundedJson
from app.ui.context import PageContext
from app.ui.pages import alerts, fleet, incident, overview, target

ASSETS = Path(__file__).parent / "assets"
PREFIX = "/ui/"

MAX_CALLBACK_BODY = 1024 * 1024
"""The largest UI callback request body, bytes."""


def _shell(ctx: PageContext) -> html.Div:
    nav = [
        dcc.Link("Overview", href=ctx.relative("/"), className="nav-link"),
        dcc.Link("Incident review", href=ctx.relative("/incident"), className="nav-link"),
        dcc.Link("Alerts", href=ctx.relative("/alerts"), className="nav-link"),
    ]
    return html.Div(
        [
            dcc.Location(id=ids.URL, refresh=False),
            html.Header(
                [
                    html.Span("phasewatch", className="brand"),
                    html.Nav(nav),
                    html.Span(ctx.data.source.label, id=ids.SOURCE_LABEL, className="source"),
                ],
                className="topbar",
            ),
            html.Main(id=ids.PAGE),
        ]
    )


def route(ctx: PageContext, path: str, search: str | None) -> Any:
    """The layout for a path relative to the UI root (``targets/x``, ``alerts``…); a URL
    whose times cannot be shown (``?to=1e300``) gets a page saying so."""
    q = timerange.query(search)
    parts = [unquote(p) for p in path.strip("/").split("/") if p]
    try:
        return _page(ctx, parts, q)
    except timerange.RangeError as exc:
        return html.Div(
            [
                html.H2("Cannot show this page"),
                html.P(str(exc), id=ids.PAGE_ERROR, className="card-error"),
                dcc.Link("back to the overview", href=ctx.relative("/")),
            ]
        )


def _page(ctx: PageContext, parts: list[str], q: dict[str, str]) -> Any:
    if not parts:
        return overview.layout(ctx, q)
    if parts[0] == "targets" and len(parts) == 2:
        return target.layout(ctx, parts[1], q)
    if parts[0] == "fleets" and len(parts) == 2:
        return fleet.layout(ctx, parts[1], q)
    if parts == ["incident"]:
        return incident.layout(ctx, q)
    if parts == ["alerts"]:
        return alerts.layout(ctx)
    return html.Div(
        [html.H2("Not found"), dcc.Link("back to the overview", href=ctx.relative("/"))]
    )


def build_dash(
    data: UiData,
    *,
    alert_feed: AlertFeed | None = None,
    fleets: FleetData | None = None,
    prefix: str = PREFIX,
    refresh_ms: int = 5000,
    twin: TwinCache | None = None,
    board: Board | None = None,
    pricer: PagePricer | None = None,
) -> Dash:
    """The UI for ``data`` (and ``fleets``: the fleet pages), to be served under ``prefix``
    (mounted there by the caller); ``board``: the overview's (``app.read.board``; None:
    one made here, computed when the overview is first asked); ``pricer``: the twin's
    answers (``app.read.pricing``; None: one made here, with a pricing job of its own)."""
    app = Dash(
        __name__,
        requests_pathname_prefix=prefix,
        routes_pathname_prefix="/",
        serve_locally=True,
        assets_folder=str(ASSETS),
        title="phasewatch",
        update_title="",
        suppress_callback_exceptions=True,
    )
    # Callback bodies are small; Flask answers 413 past this, with or without the API's
    # body limit in front (``phasewatch ui`` runs the UI alone).
    app.server.config["MAX_CONTENT_LENGTH"] = MAX_CALLBACK_BODY
    # ...and one nested thousands deep is a 400, not a RecursionError's 500.
    app.server.json = BoundedJson(app.server)
    ctx = PageContext(
        data=data,
        alerts=alert_feed or NoAlerts(),
        relative=app.get_relative_path,
        refresh_ms=refresh_ms,
        fleets=fleets,
        twin=twin if twin is not None else TwinCache(),
        board_given=board,
        pricer_given=pricer,
    )
    app.layout = _shell(ctx)
    app.validation_layout = html.Div(  # type: ignore[assignment]
        [
            _shell(ctx),
            overview.layout(ctx),
            target.view(
                ctx, "", [], None, choice="1h", start=None, end=None, at=None, bounded=False
            ),
            incident.skeleton(
                [], incident.ALL_STREAMS, choice="6h", start=None, end=None, bounded=False
            ),
            html.Div(incident.view({}, [], "")),
            fleet.view(
                ctx, "", [], None, choice="1h", start=None, end=None, at=None, bounded=False
            ),
            alerts.layout(ctx),
        ]
    )

    @app.callback(
        Output(ids.PAGE, "children"),
        Input(ids.URL, "pathname"),
        Input(ids.URL, "search"),
    )
    def render(pathname: str | None, search: str | None) -> Any:
        return route(ctx, app.strip_relative_path(pathname or prefix) or "", search)

    for page in (overview, target, fleet, incident, alerts):
        page.register(app, ctx)
    headroomview.register(app, ctx)
    effectsview.register(app, ctx)
    return app
