"""Fleet page: the replicas of one model side by side, their imbalance, and its SLOs.

URL: ``/ui/fleets/<model_name>``, plus ``fleet=<fleet name>`` when ``fleet.group_by``
splits the model into several fleets, and either ``at=<unix>`` (the hour around that
time, the tables on the window holding it: the SLO alerts link here) or
``from=<unix>&to=<unix>``. The tables and the bars show one window (the latest, or the
one holding ``at``); the charts the range; the SLO panel the budget now.
"""

from __future__ import annotations

import math
from typing import Any

from dash import Dash, Input, Output, State, ctx, dcc, html, no_update

from app.read.fleetpage import FleetData
from app.read.fleetpoints import replica_points
from app.read.records import FleetKey
from app.ui import headroomview, ids, timerange
from app.ui.components import diagnosis_card, page_head
from app.ui.context import PageContext
from app.ui.figures import utc
from app.ui.fleet_components import imbalance_panel, replicas_table, slo_panel
from app.ui.fleet_figures import replicas_bars, replicas_figure, slo_figure
from app.ui.pools_components import pools_panel

AT_PAD_S = 1800.0


def _fleets(ctx_: PageContext, model: str) -> dict[str, tuple[FleetKey, list[str]]]:
    if ctx_.fleets is None:
        return {}
    return {k.name: (k, m) for k, m in ctx_.fleets.of_model(model).items()}


def layout(ctx_: PageContext, model: str, q: dict[str, str]) -> html.Div:
    names = sorted(_fleets(ctx_, model))
    fleet = q.get("fleet") if q.get("fleet") in names else (names[0] if names else None)
    now = ctx_.data.now()
    at, start, end = timerange.url_times(q, "at", "from", "to")
    bounded = ctx_.data.source.span() is not None
    choice = timerange.ALL if bounded else "1h"
    if at is not None:
        start, end = at - AT_PAD_S, min(at + AT_PAD_S, max(now, at))
        choice = timerange.CUSTOM
    elif start is not None and end is not None and end > start:
        choice = timerange.CUSTOM
    return view(
        ctx_, model, names, fleet, choice=choice, start=start, end=end, at=at, bounded=bounded
    )


def view(
    ctx_: PageContext,
    model: str,
    fleets: list[str],
    fleet: str | None,
    *,
    choice: str,
    start: float | None,
    end: float | None,
    at: float | None,
    bounded: bool,
) -> html.Div:
    """The page's components (no data access: also the validation skeleton)."""
    return html.Div(
        [
            dcc.Store(id=ids.FLEET_MODEL, data={"model": model}),
            dcc.Store(id=ids.FLEET_AT, data=at),
            page_head(
                [html.Span(model, className="page-target"), " · fleet"],
                ids.FLEET_SELECT,
                fleets,
                fleet,
                title_id=None,
            ),
            html.Div(
                timerange.control(
                    ids.FLEET_RANGE,
                    ids.FLEET_FROM,
                    ids.FLEET_TO,
                    ids.FLEET_CUSTOM,
                    value=choice,
                    start=start,
                    end=end,
                    bounded=bounded,
                ),
                className="controls",
            ),
            html.P(id=ids.FLEET_STATUS, className="muted status"),
            headroomview.placeholder(ids.FLEET_HEADROOM, ids.FLEET_TWIN_TICK, ctx_.refresh_ms),
            html.Div(
                [
                    html.Div(id=ids.FLEET_IMBALANCE, className="col-main"),
                    html.Div(id=ids.FLEET_SLO, className="col-side"),
                ],
                className="two-cols",
            ),
            html.Div(id=ids.FLEET_POOLS),
            html.H3("Replicas side by side"),
            html.Div(id=ids.FLEET_TABLE, className="table-wrap"),
            dcc.Graph(id=ids.FLEET_BARS, config={"displaylogo": False}, className="chart"),
            html.H3("Replicas over time"),
            dcc.Graph(id=ids.FLEET_GRAPH, config={"displaylogo": False}, className="chart"),
            html.H3("SLO attainment and error budget"),
            dcc.Graph(id=ids.FLEET_SLO_GRAPH, config={"displaylogo": False}, className="chart"),
            html.H3("Fleet diagnosis"),
            html.Div(id=ids.FLEET_CARD, className="col-main"),
            dcc.Interval(
                id=ids.FLEET_TICK, interval=ctx_.refresh_ms, disabled=not ctx_.data.source.live
            ),
        ],
        className="page-fleet-view",
    )


def _window_end(fd: FleetData, at: float) -> float:
    return math.ceil(at / fd.step - 1e-9) * fd.step


def _render(
    ctx_: PageContext,
    fd: FleetData,
    model: str,
    fleet: str,
    start: float,
    end: float,
    at: Any,
    *,
    fit: bool = False,
) -> tuple[Any, ...]:
    """The page's parts; ``fit``: charts of a preset range show only where data is, when
    the history is shorter than the range."""
    found = _fleets(ctx_, model).get(fleet)
    if found is None:
        msg = html.P(f"No fleet {fleet} of {model}.", className="muted")
        return msg, msg, "", "", {}, {}, "", {}, ""
    key, members = found
    view = fd.latest(key, members, None if at is None else _window_end(fd, at))
    points = replica_points(view)
    specs = fd.specs_for(key, members)
    attainment = fd.attainment_of(view, specs[0]) if specs else {}
    table = replicas_table(
        view, points, attainment, href=lambda t: ctx_.target_href(t, model, at=at)
    )
    bars = replicas_bars(points, members, fair_share=view.imbalance.fair_share)
    series = fd.series(key, members, start, end)
    statuses = fd.fleet_statuses(key, members)
    over_time = replicas_figure(
        series, flagged=view.imbalance.flagged, uirevision=f"{fleet}\n{start}"
    )
    slo_fig = slo_figure(fd.slo_series(key, members, start, end))
    ends = [p.end for ps in series.points.values() for p in ps]
    shown = (
        timerange.fit_to_data(start, end, min(ends) - series.length, step=series.step)
        if fit and ends
        else None
    )
    if shown is not None:
        for fig in (over_time, slo_fig):
            fig.update_xaxes(range=[shown[0] * 1000.0, shown[1] * 1000.0])
    when = "latest window" if at is None else "chosen window"
    status = (
        f"{len(view.fleet.replicas)} of {len(members)} replica(s) with data · tables: {when} "
        f"{utc(view.fleet.window.start)} – {utc(view.fleet.window.end)} UTC · charts: "
        f"{len(series.fleet_points)} windows of {series.length:g} s every {series.step:g} s · "
        f"{ctx_.data.source.label}"
    )
    return (
        status,
        imbalance_panel(view, min_replicas=fd.options.thresholds.min_replicas),
        pools_panel(view),
        table,
        bars,
        over_time,  # its legend calls imbalanced who the table does: one window, one verdict
        slo_panel(statuses),
        slo_fig,
        diagnosis_card(view.diagnosis, latest=at is None),
    )


def register(app: Dash, ctx_: PageContext) -> None:
    data = ctx_.data

    timerange.register_custom(
        app,
        data.now,
        choice=ids.FLEET_RANGE,
        custom=ids.FLEET_CUSTOM,
        lo=ids.FLEET_FROM,
        hi=ids.FLEET_TO,
    )

    @app.callback(
        Output(ids.FLEET_STATUS, "children"),
        Output(ids.FLEET_IMBALANCE, "children"),
        Output(ids.FLEET_POOLS, "children"),
        Output(ids.FLEET_TABLE, "children"),
        Output(ids.FLEET_BARS, "figure"),
        Output(ids.FLEET_GRAPH, "figure"),
        Output(ids.FLEET_SLO, "children"),
        Output(ids.FLEET_SLO_GRAPH, "figure"),
        Output(ids.FLEET_CARD, "children"),
        Output(ids.FLEET_AT, "data"),
        Input(ids.FLEET_SELECT, "value"),
        Input(ids.FLEET_RANGE, "value"),
        Input(ids.FLEET_FROM, "value"),
        Input(ids.FLEET_TO, "value"),
        Input(ids.FLEET_TICK, "n_intervals"),
        State(ids.FLEET_MODEL, "data"),
        State(ids.FLEET_AT, "data"),
    )
    def refresh(
        fleet: str | None,
        choice: str,
        lo: str | None,
        hi: str | None,
        _tick: int | None,
        stored: dict[str, str],
        at: float | None,
    ) -> tuple[Any, ...]:
        model = stored["model"]
        fd = ctx_.fleets
        if fd is None or not fleet:
            msg = html.P(f"No data for {model} yet.", className="muted")
            return msg, "", "", "", {}, {}, "", {}, "", None
        if ctx.triggered_id in (ids.FLEET_SELECT, ids.FLEET_RANGE, ids.FLEET_FROM, ids.FLEET_TO):
            at = None
        try:
            start, end = timerange.resolve(choice, lo, hi, now=data.now(), span=data.source.span())
        except timerange.RangeError as exc:
            return (str(exc), *((no_update,) * 8), at)
        fit = choice in timerange.PRESETS and at is None
        return (*_render(ctx_, fd, model, fleet, start, end, at, fit=fit), at)
