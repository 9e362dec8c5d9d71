"""Alerts: firing, pending, recently resolved, and silences; each opens the page that
explains it at its time (a target's page, or a fleet's for the SLO alerts)."""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, dcc, html

from app.read.alertfeed import AlertRow, SilenceRow
from app.ui import ids
from app.ui.context import PageContext
from app.ui.figures import utc

RESOLVED_WINDOW_S = 86400.0


def layout(ctx: PageContext) -> html.Div:
    return html.Div(
        [
            html.H2("Alerts"),
            html.Div(id=ids.ALERTS_TABLES),
            dcc.Interval(
                id=ids.ALERTS_TICK,
                interval=ctx.refresh_ms,
                disabled=not ctx.data.source.live,
            ),
        ],
        className="page-alerts",
    )


def _alert_table(ctx: PageContext, rows: list[AlertRow], state: str) -> html.Div:
    if not rows:
        return html.Div(
            [
                html.H3(f"{state.capitalize()} (0)"),
                html.P(f"No {state} alerts.", className="muted"),
            ],
            className=f"alerts-{state}",
        )
    head = html.Tr(
        [html.Th(h) for h in ("at (UTC)", "alert", "severity", "target", "model", "summary")]
    )
    body = []
    for a in sorted(rows, key=lambda r: -r.at):
        at = a.fired_at or a.active_at or a.at
        body.append(
            html.Tr(
                [
                    html.Td(
                        dcc.Link(
                            utc(a.at),
                            href=ctx.alert_href(a, at=at),
                            className="alert-link",
                        )
                    ),
                    html.Td(a.name),
                    html.Td(a.severity, className=f"sev-{a.severity}"),
                    html.Td(a.target or html.Span("fleet", className="muted")),
                    html.Td(a.model_name or ""),
                    html.Td(a.summary),
                ],
                className=f"alert-row state-{state}",
            )
        )
    return html.Div(
        [
            html.H3(f"{state.capitalize()} ({len(rows)})"),
            html.Table([html.Thead(head), html.Tbody(body)], className="alerts"),
        ],
        className=f"alerts-{state}",
    )


def _silence_table(rows: list[SilenceRow]) -> html.Div:
    if not rows:
        return html.Div([html.H3("Silences (0)"), html.P("No silences.", className="muted")])
    head = html.Tr(
        [html.Th(h) for h in ("status", "matchers", "from (UTC)", "until (UTC)", "by", "comment")]
    )
    body = [
        html.Tr(
            [
                html.Td(s.status),
                html.Td(html.Code(s.matchers)),
                html.Td(utc(s.starts_at)),
                html.Td(utc(s.ends_at)),
                html.Td(s.created_by),
                html.Td(s.comment),
            ]
        )
        for s in rows
    ]
    return html.Div(
        [
            html.H3(f"Silences ({len(rows)})"),
            html.Table([html.Thead(head), html.Tbody(body)], className="silences"),
        ]
    )


def register(app: Dash, ctx: PageContext) -> None:
    @app.callback(Output(ids.ALERTS_TABLES, "children"), Input(ids.ALERTS_TICK, "n_intervals"))
    def refresh(_n: int | None) -> Any:
        if not ctx.alerts.enabled:
            return html.P(
                f"No alert evaluation for this source ({ctx.data.source.label}).",
                className="muted",
            )
        now = ctx.data.now()
        current = ctx.alerts.current()
        firing = [a for a in current if a.state == "firing"]
        pending = [a for a in current if a.state == "pending"]
        resolved = [a for a in current if a.state == "resolved"]
        seen = {(a.name, a.target, a.model_name, a.at) for a in resolved}
        for a in ctx.alerts.history(now - RESOLVED_WINDOW_S, now):
            key = (a.name, a.target, a.model_name, a.at)
            if a.state == "resolved" and a.previous != "pending" and key not in seen:
                resolved.append(a)
                seen.add(key)
        return [
            _alert_table(ctx, firing, "firing"),
            _alert_table(ctx, pending, "pending"),
            _alert_table(ctx, resolved, "resolved"),
            _silence_table(ctx.alerts.silences(now)),
        ]
