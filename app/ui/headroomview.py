"""Headroom on the target and fleet pages: "1.6× today's traffic before TTFT p99 breaks
2 s; the queue breaks first" (``app.read.headroom``: the what-if twin on the stream's last
15 minutes, computed when the page asks and kept 5 minutes)."""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, html

from app.read.headroom import StreamHeadroom, fleet_headroom, stream_headroom
from app.ui import ids
from app.ui.components import data_attrs
from app.ui.context import PageContext

PENDING = "headroom: computing (the twin replays the last 15 minutes) …"


def placeholder(component_id: str) -> html.Div:
    """The page's slot, shown until the headroom is computed."""
    return html.Div(PENDING, id=component_id, className="headroom muted")


def _line(r: StreamHeadroom | None, prefix: str = "") -> tuple[Any, str]:
    if r is None:
        return "headroom: no replica has enough history yet", "headroom muted"
    if r.headroom is None:
        return f"headroom: cannot tell — {r.error}", "headroom muted"
    h = r.headroom
    replay = "" if r.replay_error is None else f" (the twin's replay is {r.replay_error:.0%} off)"
    tip = f"the what-if twin fitted to {r.target} over the last 15 minutes{replay}; " + "; ".join(
        r.warnings
    )
    words: list[Any] = [html.Strong("Headroom (the last 15 minutes): "), prefix, h.text()]
    kind = "headroom over" if h.rate_scale < 1 else "headroom"
    attrs = data_attrs(limit=h.limit.value if h.limit else "", scale=f"{h.rate_scale:.3g}")
    return html.Span(words, title=tip, **attrs), kind


def _intervals(ctx: PageContext) -> Any:
    return getattr(ctx.data.source, "intervals", None)


def register(app: Dash, ctx: PageContext) -> None:
    @app.callback(
        Output(ids.TARGET_HEADROOM, "children"),
        Output(ids.TARGET_HEADROOM, "className"),
        Input(ids.TARGET_STREAM, "data"),
        Input(ids.TARGET_MODEL, "value"),
    )
    def target(stream: dict[str, Any] | None, model: str | None) -> tuple[Any, str]:
        intervals = _intervals(ctx)
        if not stream or model is None:
            return "", "headroom muted"
        if intervals is None:
            return "headroom: needs the stored history (not this source)", "headroom muted"
        r = stream_headroom(
            intervals,
            stream["target"],
            model,
            now=ctx.data.now(),
            config=ctx.data.config,
            cache=ctx.twin,
        )
        return _line(r)

    @app.callback(
        Output(ids.FLEET_HEADROOM, "children"),
        Output(ids.FLEET_HEADROOM, "className"),
        Input(ids.FLEET_MODEL, "data"),
    )
    def fleet(data: dict[str, Any] | None) -> tuple[Any, str]:
        intervals = _intervals(ctx)
        if not data:
            return "", "headroom muted"
        if intervals is None:
            return "headroom: needs the stored history (not this source)", "headroom muted"
        model = data["model"]
        now = ctx.data.now()
        results = [
            stream_headroom(intervals, t, model, now=now, config=ctx.data.config, cache=ctx.twin)
            for t, m in sorted(ctx.data.source.streams())
            if m == model
        ]
        tightest = fleet_headroom(results)
        prefix = "" if tightest is None else f"its tightest replica, {tightest.target}: "
        return _line(tightest, prefix)
