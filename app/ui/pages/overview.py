"""Overview: every fleet as a link to its page, then every target and model as a card,
worst first; a click on a card opens the target. Cards and fleet links show the error
budget left of each SLO that covers them."""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, dcc, html

from app.diagnose.classes import DiagnosisClass
from app.diagnose.records import fmt_value
from app.fleet.slo import Budget
from app.ui import ids, palette
from app.ui.components import badge, data_attrs, mini_band
from app.ui.context import PageContext
from app.ui.data import Card
from app.ui.figures import utc
from app.ui.fleet_components import budget_text, budget_title
from app.ui.fleetdata import FleetSummary

RECENT_S = 900.0


def layout(ctx: PageContext) -> html.Div:
    return html.Div(
        [
            html.H2("Overview"),
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


# The SLO judgement of a p99 (``app.diagnose.slo.verdict``) → its marker's class and
# tooltip: ▲ proven over, ≈ unproven (the style sheet draws the marks).
SLO_MARKS: dict[str, tuple[str, str]] = {
    "over": ("over", "over its SLO: the histogram's bucket edges prove more than 1 % above it"),
    "unproven": (
        "unproven",
        "maybe over its SLO: the p99 lies in a histogram bucket around the SLO, more likely "
        "over than not, but the bucket edges cannot prove it (the default alerts fire on it "
        "only with alerts.fire_on_unproven)",
    ),
}
# A p99 above its SLO that the judgement still calls within (the bucket around the SLO
# says less than even odds; or speculative decoding, judged per token): said on hover.
WITHIN_ABOVE = (
    "within its SLO as judged on the histogram: the p99 lies in a bucket around the SLO and "
    "is more likely within than over, or (ITL under speculative decoding) the per-token "
    "latency is within"
)


def _metric(
    name: str,
    value: str,
    *,
    over: bool = False,
    verdict: str | None = None,
    above: bool = False,
) -> html.Div:
    """One number of a card; ``verdict`` (an SLO judgement) or ``over`` marks it;
    ``above``: the value alone is above its SLO (a hover says why it is not marked)."""
    mark, title = SLO_MARKS.get(verdict or "", ("over" if over else "", ""))
    if not mark and verdict == "within" and above:
        title = WITHIN_ABOVE
    return html.Div(
        [html.Span(name, className="metric-name"), html.Span(value, className="metric-value")],
        className=f"metric {mark}" if mark else "metric",
        title=title or None,
    )


def budget_lines(budgets: list[tuple[str, Budget]]) -> list[html.Div]:
    """``error budget (default): 87 % left`` for each SLO covering a stream or fleet
    (``n/a (312 events)`` until its period holds enough events to judge)."""
    return [
        html.Div(
            [f"error budget ({name}): ", html.Strong(budget_text(b))],
            className="card-budget over"
            if b.remaining is not None and b.remaining <= 0
            else "card-budget",
            title=budget_title(b),
            **data_attrs(slo=name),
        )
        for name, b in budgets
    ]


# Ticks under a card's class strip: (seconds before now, label); the strip spans RECENT_S.
STRIP_TICKS = ((900.0, "−15 min"), (600.0, "−10"), (300.0, "−5"), (0.0, "now"))


def strip_axis() -> html.Div:
    """The time axis under the class strip: each tick where its time falls on it."""
    ticks = []
    for ago, text in STRIP_TICKS:
        share = 1.0 - ago / RECENT_S
        shift = "0" if share <= 0 else ("-100%" if share >= 1 else "-50%")
        ticks.append(
            html.Span(
                text,
                className="mini-band-tick",
                style={"left": f"{share:.1%}", "transform": f"translateX({shift})"},
            )
        )
    return html.Div(
        ticks,
        className="mini-band-axis",
        title=f"the last {RECENT_S / 60:g} minutes: one segment per run of a class",
    )


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
    budgets: list[tuple[str, Budget]] | None = None,
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
                    _metric("TTFT p50", fmt_value(p.ttft_p50, "s", p.ttft_p50_ge)),
                    _metric(
                        "TTFT p99",
                        fmt_value(p.ttft_p99, "s", p.ttft_p99_ge),
                        verdict=d.ttft_slo,
                        above=p.ttft_p99 is not None and p.ttft_p99 > d.slo_ttft_p99,
                    ),
                    _metric("ITL p50", fmt_value(p.itl_p50, "s", p.itl_p50_ge)),
                    _metric(
                        "ITL p99",
                        fmt_value(p.itl_p99, "s", p.itl_p99_ge),
                        verdict=d.itl_slo,
                        above=p.itl_p99 is not None and p.itl_p99 > d.slo_itl_p99,
                    ),
                    _metric("running", fmt_value(p.running_avg)),
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
        body.append(strip_axis())
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
        budgets: dict[tuple[str, str], list[tuple[str, Budget]]] = {}
        if fd is not None:
            budgets = fd.budgets()
            summaries = fd.summaries()
            if summaries:
                fleets = [html.H3("Fleets"), *(fleet_link_view(ctx, f) for f in summaries)]
        views = [
            card_view(ctx, c, now=now, budgets=budgets.get((c.target, c.model_name))) for c in cards
        ]
        return views, status, fleets
