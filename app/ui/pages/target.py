"""Target page: the five metrics with the diagnosis band, and the diagnosis card.

URL: ``/ui/targets/<target>?model=<model_name>`` plus either ``at=<unix>`` (an hour
around that time, the card on the window holding it: the alerts link here) or
``from=<unix>&to=<unix>``. Clicking a chart picks the window the card explains.
"""

from __future__ import annotations

import math
import re
from typing import Any

from dash import Dash, Input, Output, Patch, State, ctx, dcc, html, no_update

from app.ui import effectsview, headroomview, ids, timerange
from app.ui.components import diagnosis_card, engines_table, page_head
from app.ui.context import PageContext
from app.ui.figures import Mark, mark_annotations, mark_shapes, target_figure, utc
from app.ui.probeview import probe_panel

AT_PAD_S = 1800.0


def _models(ctx_: PageContext, target: str) -> list[str]:
    return sorted(m for t, m in ctx_.data.source.streams() if t == target)


def no_stream_text(ctx_: PageContext, target: str) -> str:
    """What a target page without a stream says: no data yet from a target the source
    knows (configured, or with stored streams), else that there is no such target."""
    known = {t.name for t in ctx_.data.source.targets()}
    known |= {t for t, _ in ctx_.data.source.streams()}
    if target in known:
        return f"No data from {target} yet."
    return f"Unknown target {target!r}: no configured target or stored stream has this name."


def layout(ctx_: PageContext, target: str, q: dict[str, str]) -> html.Div:
    models = _models(ctx_, target)
    model = q.get("model") if q.get("model") in models else (models[0] if models else None)
    now = ctx_.data.now()
    at, start, end = timerange.url_times(q, "at", "from", "to")
    bounded = ctx_.data.source.span() is not None
    choice = "1h"
    if at is not None:
        start, end = at - AT_PAD_S, min(at + AT_PAD_S, max(now, at))
        choice = timerange.CUSTOM
    elif start is not None and end is not None and end > start:
        choice = timerange.CUSTOM
    elif bounded:
        choice = timerange.ALL
    return view(
        ctx_,
        target,
        models,
        model,
        choice=choice,
        start=start,
        end=end,
        at=at,
        bounded=bounded,
    )


def view(
    ctx_: PageContext,
    target: str,
    models: list[str],
    model: str | None,
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
            dcc.Store(id=ids.TARGET_STREAM, data={"target": target}),
            dcc.Store(id=ids.TARGET_AT, data=at),
            dcc.Store(id=ids.TARGET_ZOOM, data=None),
            page_head(
                [html.Span(target, className="page-target"), " "],
                ids.TARGET_MODEL,
                models,
                model,
                title_id=ids.TARGET_TITLE,
            ),
            html.Div(
                [
                    timerange.control(
                        ids.TARGET_RANGE,
                        ids.TARGET_FROM,
                        ids.TARGET_TO,
                        ids.TARGET_CUSTOM,
                        value=choice,
                        start=start,
                        end=end,
                        bounded=bounded,
                    ),
                    dcc.Checklist(
                        id=ids.TARGET_LIVE,
                        options=[{"label": " live", "value": "live"}],
                        value=["live"] if ctx_.data.source.live else [],
                        inline=True,
                        className="live-toggle",
                    ),
                    dcc.Link(
                        "Review incidents in this range →",
                        id=ids.TARGET_INCIDENT_LINK,
                        href=ctx_.incident_href(target, model),
                        className="incident-link",
                    ),
                ],
                className="controls",
            ),
            html.P(id=ids.TARGET_STATUS, className="muted status"),
            headroomview.placeholder(ids.TARGET_HEADROOM, ids.TARGET_TWIN_TICK, ctx_.refresh_ms),
            effectsview.placeholder(),
            dcc.Graph(
                id=ids.TARGET_GRAPH,
                config={"displaylogo": False, "responsive": True},
                className="five-metrics",
            ),
            html.Div(
                [
                    html.Div(id=ids.TARGET_CARD, className="col-main"),
                    html.Div(id=ids.TARGET_ENGINES, className="col-side"),
                ],
                className="two-cols",
            ),
            dcc.Interval(
                id=ids.TARGET_TICK,
                interval=ctx_.refresh_ms,
                disabled=not ctx_.data.source.live,
                max_intervals=1,  # one tick after each answer (the refresh raises it)
            ),
        ],
        className="page-target-view",
    )


def clicked_time(click: dict[str, Any] | None) -> float | None:
    """The time of a clicked point: a line's x, or the middle of a band segment.

    Plotly reports a band segment's ``base`` (its start) in Unix milliseconds and its
    ``x`` (its end) as a date string.
    """
    if not click or not click.get("points"):
        return None
    p = click["points"][0]
    try:
        end = timerange.parse_time(_text(p.get("x")))
        if "base" not in p:
            return end
        start = timerange.parse_time(_text(p["base"]))
    except timerange.RangeError:
        return None
    if start is None or end is None:
        return end
    return (start + end) / 2


def zoomed(relayout: dict[str, Any] | None) -> tuple[float, float] | None:
    """The x range the user zoomed to, if any (any row: the rows share one time axis)."""
    if not relayout:
        return None
    for key, value in relayout.items():
        if not re.fullmatch(r"xaxis\d*\.range(\[0\])?", key):
            continue
        if key.endswith("[0]"):
            lo, hi = value, relayout.get(key[:-3] + "[1]")
        elif isinstance(value, list) and len(value) == 2:
            lo, hi = value
        else:
            continue
        try:
            a, b = timerange.parse_time(_text(lo)), timerange.parse_time(_text(hi))
        except timerange.RangeError:
            return None
        if a is not None and b is not None and b > a:
            return a, b
    return None


def _text(value: Any) -> str | None:
    """A relayout range end as text: a date string, or Unix milliseconds → seconds."""
    if isinstance(value, int | float):
        return str(value / 1000.0)
    return None if value is None else str(value)


def register(app: Dash, ctx_: PageContext) -> None:
    _register_zoom(app, ctx_)
    timerange.register_custom(
        app,
        ctx_.data.now,
        choice=ids.TARGET_RANGE,
        custom=ids.TARGET_CUSTOM,
        lo=ids.TARGET_FROM,
        hi=ids.TARGET_TO,
    )
    _register_refresh(app, ctx_)


def _register_refresh(app: Dash, ctx_: PageContext) -> None:
    """The page's charts, card and side panel: on a new stream or range, on each live
    tick, and on a click on a chart (then only the card and its mark)."""

    @app.callback(
        Output(ids.TARGET_GRAPH, "figure"),
        Output(ids.TARGET_CARD, "children"),
        Output(ids.TARGET_ENGINES, "children"),
        Output(ids.TARGET_STATUS, "children"),
        Output(ids.TARGET_INCIDENT_LINK, "href"),
        Output(ids.TARGET_AT, "data"),
        Output(ids.TARGET_ZOOM, "data"),
        Output(ids.TARGET_TICK, "max_intervals"),
        Input(ids.TARGET_MODEL, "value"),
        Input(ids.TARGET_RANGE, "value"),
        Input(ids.TARGET_FROM, "value"),
        Input(ids.TARGET_TO, "value"),
        Input(ids.TARGET_TICK, "n_intervals"),
        Input(ids.TARGET_GRAPH, "clickData"),
        Input(ids.TARGET_LIVE, "value"),
        State(ids.TARGET_STREAM, "data"),
        State(ids.TARGET_AT, "data"),
        State(ids.TARGET_ZOOM, "data"),
    )
    def refresh(
        model: str | None,
        choice: str,
        lo: str | None,
        hi: str | None,
        tick: int | None,
        click: dict[str, Any] | None,
        live: list[str] | None,
        stream: dict[str, str],
        at: float | None,
        zoom: list[float] | None,
    ) -> tuple[Any, ...]:
        # The next live tick once this answer is in (``max_intervals`` raised by it): a
        # tick sent while a long range is still computed would make the renderer drop
        # this answer as stale.
        again = (tick or 0) + 1
        got = _answer(model, choice, lo, hi, click, live, stream, at, zoom)
        return (*got, again)

    def _answer(
        model: str | None,
        choice: str,
        lo: str | None,
        hi: str | None,
        click: dict[str, Any] | None,
        live: list[str] | None,
        stream: dict[str, str],
        at: float | None,
        zoom: list[float] | None,
    ) -> tuple[Any, ...]:
        nothing = (no_update,) * 7
        target = stream["target"]
        if not model:
            msg = html.P(no_stream_text(ctx_, target), className="muted")
            return {}, msg, "", "", no_update, None, None
        # One input changed (a user action) or several (the page's first call).
        fired = set(ctx.triggered_prop_ids)
        if ctx.triggered_id == ids.TARGET_TICK and not live:
            return nothing
        if ctx.triggered_id in (ids.TARGET_MODEL, ids.TARGET_RANGE, ids.TARGET_FROM, ids.TARGET_TO):
            at, zoom = None, None
        if fired == {f"{ids.TARGET_GRAPH}.clickData"}:
            at = clicked_time(click)
            if at is None:
                return nothing
            return _clicked(ctx_, target, model, at)
        return _rendered(ctx_, target, model, choice, lo, hi, at, zoom)


def _clicked(ctx_: PageContext, target: str, model: str, at: float) -> tuple[Any, ...]:
    """A click on a chart: the card on the clicked window, and its mark (a patch)."""
    fig_patch = Patch()
    mark = [Mark(_window_end(ctx_, at), "card")]
    fig_patch["layout"]["shapes"] = mark_shapes(mark)
    fig_patch["layout"]["annotations"] = mark_annotations(mark)
    card = _card(ctx_, target, model, at)
    return (fig_patch, card, no_update, no_update, no_update, at, no_update)


def _rendered(
    ctx_: PageContext,
    target: str,
    model: str,
    choice: str,
    lo: str | None,
    hi: str | None,
    at: float | None,
    zoom: list[float] | None,
) -> tuple[Any, ...]:
    """The whole page for a stream and range: charts, card, side panel, status, link."""
    data = ctx_.data
    try:
        start, end = timerange.resolve(choice, lo, hi, now=data.now(), span=data.source.span())
    except timerange.RangeError as exc:
        return no_update, no_update, no_update, str(exc), no_update, at, no_update
    tl = data.timeline(target, model, start, end)
    marks = [] if at is None else [Mark(_window_end(ctx_, at), "card")]
    shown = None if zoom is None else (zoom[0], zoom[1])
    if shown is None and choice in timerange.PRESETS and tl.points:
        # History shorter than the preset: show the data, not an empty hour.
        first = tl.points[0].end - tl.length
        shown = timerange.fit_to_data(start, end, first, step=tl.step)
    fig = target_figure(
        tl,
        marks=marks,
        uirevision=f"{target}\n{model}\n{choice}",
        x_range=shown,
    )
    view = (start, end) if zoom is None else (zoom[0], zoom[1])
    status = (
        f"{len(tl.points)} windows of {tl.length:g} s every {tl.step:g} s · "
        f"{utc(start)} – {utc(end)} UTC · {data.source.label}"
    )
    return (
        fig,
        _card(ctx_, target, model, at),
        _side(ctx_, target, model),
        status,
        ctx_.incident_href(target, model, start=view[0], end=view[1]),
        at,
        zoom,
    )


def _register_zoom(app: Dash, ctx_: PageContext) -> None:
    # Its own callback: a relayout (every first render emits one) must not supersede the
    # page's refresh, whose result Dash would then drop as stale.
    @app.callback(
        Output(ids.TARGET_ZOOM, "data", allow_duplicate=True),
        Output(ids.TARGET_INCIDENT_LINK, "href", allow_duplicate=True),
        Input(ids.TARGET_GRAPH, "relayoutData"),
        State(ids.TARGET_ZOOM, "data"),
        State(ids.TARGET_STREAM, "data"),
        State(ids.TARGET_MODEL, "value"),
        prevent_initial_call=True,
    )
    def zoom(
        relayout: dict[str, Any] | None,
        current: list[float] | None,
        stream: dict[str, str],
        model: str | None,
    ) -> tuple[Any, Any]:
        """Remember the user's zoom for the live refreshes; review the zoomed range."""
        new = zoom_of(relayout, current)
        if new == current:
            return no_update, no_update
        if new is None:
            return None, no_update
        return new, ctx_.incident_href(stream["target"], model, start=new[0], end=new[1])


def zoom_of(relayout: dict[str, Any] | None, current: list[float] | None) -> list[float] | None:
    """The zoom after a relayout event: a new x range, None after a reset, else unchanged."""
    if not relayout:
        return current
    rng = zoomed(relayout)
    if rng is not None:
        return [rng[0], rng[1]]
    if any(re.fullmatch(r"xaxis\d*\.autorange", k) for k in relayout):
        return None
    return current


def _window_end(ctx_: PageContext, at: float) -> float:
    step = ctx_.data.step
    return math.ceil(at / step - 1e-9) * step


def _side(ctx_: PageContext, target: str, model: str) -> Any:
    """Beside the card: the server's engines, or a probe's readings (``probeview``: a
    probe's stream has no engines)."""
    data = ctx_.data
    engines = data.source.engines(target, model)
    if not engines:
        found = data.current(target, model, compare=False)
        panel = None if found is None else probe_panel(*found)
        if panel is not None:
            return panel
    return engines_table(engines)


def _card(ctx_: PageContext, target: str, model: str, at: float | None) -> Any:
    data = ctx_.data
    found = (
        data.current(target, model)
        if at is None
        else data.diagnosis_at(target, model, _window_end(ctx_, at))
    )
    if found is None:
        return html.P("No window to diagnose here.", className="muted")
    return diagnosis_card(effectsview.cached(ctx_, found[1], found[0]), latest=at is None)
