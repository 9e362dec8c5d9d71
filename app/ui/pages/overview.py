"""Overview: every fleet as a link to its page, then every target and model as a card,
worst first; a click on a card opens the target. Cards and fleet links show the error
budget left of each SLO that covers them."""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, dcc, html

from app.diagnose.classes import DiagnosisClass
from app.diagnose.records import fmt_value
from app.ui import ids, palette
from app.ui.components import badge, data_attrs, mini_band
from app.ui.context import PageContext
from app.ui.data import Card
from app.ui.figures import utc
from app.ui.fleet_components import budget_text
from app.ui.fleetdata import FleetSummary

RECENT_S = 900.0


def layout(ctx: PageContext) -> html.Div:
    return html.Div(
        [
            html.H2("Fleet"),
            html.P(id=ids.OVERVIEW_STATUS, className="muted"),
            html.Div(id=ids.OVERVIEW_FLEETS, className="fleets"),
            html.Div(id=ids.OVERVIEW_CARDS, className="cards"),
            dcc.Interval(
                id=ids.OVERVIEW_TICK,
                interval=ctx.refresh_ms,
                disabled=not ctx.data.source.live,
            ),
        ],
        className="page-overview",
    )


def _metric(name: str, value: str, *, over: bool = False) -> html.Div:
    return html.Div(
        [html.Span(name, className="metric-name"), html.Span(value, className="metric-value")],
        className="metric over" if over else "metric",
    )


def budget_lines(budgets: list[tuple[str, float | None]]) -> list[html.Div]:
    """``budget left (default): 87 % left`` for each SLO covering a stream or fleet."""
    return [
        html.Div(
            [f"error budget ({name}): ", html.Strong(budget_text(left))],
            className="card-budget over" if left is not None and left <= 0 else "card-budget",
            **data_attrs(slo=name),
        )
        for name, left in budgets
    ]


def fleet_link_view(ctx: PageContext, f: FleetSummary) -> dcc.Link:
    """One fleet on the overview: its replicas, who is imbalanced (in words), its budgets."""
    n = len(f.members)
    state: Any
    if f.flagged:
        state = html.Span(
            [
                html.Span(", ".join(f.flagged), className="fleet-flagged"),
                " ",
                html.Span(palette.IMBALANCED_LABEL, className="flag-imbalanced"),
            ]
        )
    else:
        state = html.Span("replicas in line" if n > 1 else "one replica", className="muted")
    return dcc.Link(
        html.Div(
            [
                html.Span(f.key.name, className="fleet-name"),
                html.Span(f"{n} replica(s)", className="muted"),
                state,
                *budget_lines(list(f.budgets)),
            ],
            className="fleet-summary",
            **data_attrs(flagged=",".join(f.flagged)),
        ),
        href=ctx.fleet_href(f.key.model_name, f.key.name),
        id=ids.fleet_link(f.key.name),
        className="fleet-link",
    )


def card_view(
    ctx: PageContext,
    card: Card,
    *,
    now: float,
    budgets: list[tuple[str, float | None]] | None = None,
) -> dcc.Link:
    """One stream's card, linking to its target page."""
    body: list[Any] = [
        html.Div(
            [html.Span(card.target, className="card-target"), html.Span(card.model_name)],
            className="card-title",
        )
    ]
    if card.error:
        state = "partial: " if card.up else "down: "  # partial: the page was used
        body.append(html.Div([state, card.error], className="card-error"))
    d, p = card.diagnosis, card.point
    if d is not None and p is not None:
        body.append(badge(card.cls, None if d.sub_cause is None else str(d.sub_cause)))
        body.append(
            html.Div(
                [
                    _metric(
                        "TTFT p99",
                        fmt_value(p.ttft_p99, "s", p.ttft_p99_ge),
                        over=p.ttft_p99 is not None and p.ttft_p99 > d.slo_ttft_p99,
                    ),
                    _metric(
                        "ITL p99",
                        fmt_value(p.itl_p99, "s", p.itl_p99_ge),
                        over=p.itl_p99 is not None and p.itl_p99 > d.slo_itl_p99,
                    ),
                    _metric("waiting", fmt_value(p.waiting_avg)),
                    _metric(
                        "KV",
                        fmt_value(p.kv_max, "ratio"),
                        over=p.kv_max is not None and p.kv_max >= 0.9,
                    ),
                ],
                className="metrics",
            )
        )
        body.append(mini_band(card.recent, ctx.data.step, start=now - RECENT_S, end=now))
        body.extend(budget_lines(budgets or []))
    elif card.up or not card.error:
        body.append(badge(DiagnosisClass.INSUFFICIENT_DATA.value))
        body.append(html.Div("no data yet", className="muted"))
    alerts = (
        html.Div(["firing: ", ", ".join(card.firing)], className="card-alerts firing")
        if card.firing
        else html.Div("no firing alerts", className="card-alerts muted")
    )
    body.append(alerts)
    return dcc.Link(
        html.Div(body, className="card", **data_attrs(**{"class": card.cls})),
        href=ctx.target_href(card.target, card.model_name or None),
        id=ids.target_card(card.target, card.model_name),
        className="card-link",
    )


def register(app: Dash, ctx: PageContext) -> None:
    @app.callback(
        Output(ids.OVERVIEW_CARDS, "children"),
        Output(ids.OVERVIEW_STATUS, "children"),
        Output(ids.OVERVIEW_FLEETS, "children"),
        Input(ids.OVERVIEW_TICK, "n_intervals"),
    )
    def refresh(_n: int | None) -> tuple[list[dcc.Link], str, Any]:
        firing: dict[tuple[str, str], list[str]] = {}
        for a in ctx.alerts.current():
            if a.state == "firing":
                firing.setdefault((a.target, a.model_name or ""), []).append(a.name)
        cards = ctx.data.cards(firing)
        now = ctx.data.now()
        fine = (DiagnosisClass.HEALTHY, DiagnosisClass.IDLE)
        problems = sum(1 for c in cards if c.cls not in fine)
        n_firing = sum(len(c.firing) for c in cards)
        status = (
            f"{len(cards)} stream(s), {problems} not healthy, {n_firing} firing alert(s) · "
            f"{ctx.data.source.label} · as of {utc(now)} UTC"
        )
        fd = ctx.fleets
        fleets: Any = ""
        budgets: dict[tuple[str, str], list[tuple[str, float | None]]] = {}
        if fd is not None:
            budgets = fd.budgets()
            summaries = fd.summaries()
            if summaries:
                fleets = [html.H3("Fleets"), *(fleet_link_view(ctx, f) for f in summaries)]
        views = [
            card_view(ctx, c, now=now, budgets=budgets.get((c.target, c.model_name))) for c in cards
        ]
        return views, status, fleets
