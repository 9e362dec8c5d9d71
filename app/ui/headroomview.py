"""Headroom on the target and fleet pages: "1.6× today's traffic before TTFT p99 breaks
2 s; the queue breaks first" — the what-if twin on the stream's last 15 minutes, read from
the pricing job's cache (``app.read.pricing``: the page never fits a twin). Until the
job has priced the stream the line says when it is due, and the page asks again at each
refresh; after a 5-minute boundary it shows the last answer, as of its time, until the
next one is priced."""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, dcc, html

from app.read.headroom import StreamHeadroom, fleet_headroom
from app.read.pricing import Pending, due_text
from app.read.twincache import bucket_end
from app.ui import ids
from app.ui.components import data_attrs
from app.ui.context import PageContext
from app.ui.figures import utc

PENDING = "headroom: asking the twin's pricing job …"


def placeholder(component_id: str, tick_id: str, refresh_ms: int) -> html.Div:
    """The page's slot, and the refresh that asks the job again."""
    return html.Div(
        [
            html.Div(PENDING, id=component_id, className="headroom muted"),
            dcc.Interval(id=tick_id, interval=refresh_ms),
        ]
    )


def pending_line(p: Pending, now: float, what: str = "headroom") -> tuple[str, str]:
    return f"{what}: {due_text(p, now)}", "headroom muted pending"


def _line(r: StreamHeadroom | None, now: float, prefix: str = "") -> tuple[Any, str]:
    if r is None:
        return "headroom: no replica has enough history yet", "headroom muted"
    if r.headroom is None:
        return f"headroom: cannot tell — {r.error}", "headroom muted"
    h = r.headroom
    replay = "" if r.replay_error is None else f" (the twin's replay is {r.replay_error:.0%} off)"
    tip = f"the what-if twin fitted to {r.target} over the last 15 minutes{replay}; " + "; ".join(
        r.warnings
    )
    when = "the last 15 minutes"
    if r.end < bucket_end(now):  # the last bucket's, while this one's is priced
        when = f"the 15 minutes to {utc(r.end)} UTC; the next is being priced"
    words: list[Any] = [html.Strong(f"Headroom ({when}): "), prefix, h.text()]
    kind = "headroom over" if h.rate_scale < 1 else "headroom"
    attrs = data_attrs(limit=h.limit.value if h.limit else "", scale=f"{h.rate_scale:.3g}")
    return html.Span(words, title=tip, **attrs), kind


def register(app: Dash, ctx: PageContext) -> None:
    @app.callback(
        Output(ids.TARGET_HEADROOM, "children"),
        Output(ids.TARGET_HEADROOM, "className"),
        Input(ids.TARGET_STREAM, "data"),
        Input(ids.TARGET_MODEL, "value"),
        Input(ids.TARGET_TWIN_TICK, "n_intervals"),
    )
    def target(stream: dict[str, Any] | None, model: str | None, _n: int | None) -> Any:
        if not stream or model is None:
            return "", "headroom muted"
        now = ctx.data.now()
        r = ctx.pricer.headroom(stream["target"], model)
        if isinstance(r, str):
            return r, "headroom muted"
        if isinstance(r, Pending):
            return pending_line(r, now)
        return _line(r, now)

    @app.callback(
        Output(ids.FLEET_HEADROOM, "children"),
        Output(ids.FLEET_HEADROOM, "className"),
        Input(ids.FLEET_MODEL, "data"),
        Input(ids.FLEET_TWIN_TICK, "n_intervals"),
    )
    def fleet(data: dict[str, Any] | None, _n: int | None) -> Any:
        if not data:
            return "", "headroom muted"
        model, now = data["model"], ctx.data.now()
        answers = [
            ctx.pricer.headroom(t, model)
            for t, m in sorted(ctx.data.source.streams())
            if m == model
        ]
        if any(isinstance(a, str) for a in answers):
            return next(a for a in answers if isinstance(a, str)), "headroom muted"
        pending = [a for a in answers if isinstance(a, Pending)]
        results = [a for a in answers if isinstance(a, StreamHeadroom)]
        tightest = fleet_headroom(results)
        if pending and tightest is None:
            due = [p for p in pending if p.due_at is not None]
            first = max(due, key=lambda p: p.due_at or 0.0) if due else pending[0]
            return pending_line(first, now, f"headroom of {len(pending)} replica(s)")
        prefix = "" if tightest is None else f"its tightest replica, {tightest.target}: "
        line, kind = _line(tightest, now, prefix)
        if pending:  # said apart: a replica not priced yet may be tighter
            line = [line, html.Span(f" ({len(pending)} replica(s) not priced yet)")]
        return line, kind
