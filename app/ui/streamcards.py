"""One stream's card on the overview: its class, its numbers (a p99 over its SLO
marked), the class strip of its last minutes, its error budgets and firing alerts — a
link to its target page. Few components each: the browser's cost grows with them."""

from __future__ import annotations

from typing import Any

from dash import dcc, html

from app.diagnose.classes import DiagnosisClass
from app.diagnose.records import fmt_value
from app.read.fleetpoints import FleetBudget
from app.read.points import RECENT_S, Card
from app.read.records import Budget, budget_text, budget_title
from app.ui import ids
from app.ui.components import badge, data_attrs, mini_band
from app.ui.context import PageContext

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
) -> list[html.Span]:
    """One number of a card, as its name and its value (two cells of the card's grid, no
    wrapper: the browser's cost grows with the components); ``verdict`` (an SLO
    judgement) or ``over`` marks the value; ``above``: the value alone is above its SLO
    (a hover says why it is not marked)."""
    mark, title = SLO_MARKS.get(verdict or "", ("over" if over else "", ""))
    if not mark and verdict == "within" and above:
        title = WITHIN_ABOVE
    return [
        html.Span(name, className="metric-name"),
        html.Span(
            value,
            className=f"metric-value {mark}" if mark else "metric-value",
            title=title or None,
        ),
    ]


def budget_lines(budgets: list[tuple[str, Budget]], *, fleet: str | None = None) -> list[html.Div]:
    """``error budget (default): 87 % left`` for each SLO covering a fleet (``n/a (312
    events)`` until its period holds enough events to judge; early in the period its burn
    rate and what it projects); on a replica's card ``fleet`` names whose budget it is."""
    whose = "error budget" if fleet is None else f"fleet {fleet}'s error budget"
    return [
        html.Div(
            f"{whose} ({name}): {budget_text(b)}",
            className="card-budget over"
            if b.remaining is not None and b.remaining <= 0
            else "card-budget",
            title=budget_title(b),
            **data_attrs(slo=name),
        )
        for name, b in budgets
    ]


def fleet_budget_lines(budgets: list[FleetBudget]) -> list[html.Div]:
    """A replica's card: its fleet's budgets, each saying whose it is (``fleet llama's
    error budget (default): …``; "this replica's" when it is the fleet's only one)."""
    out: list[html.Div] = []
    for b in budgets:
        fleet = None if b.replicas <= 1 else f"{b.fleet} ({b.replicas} replicas)"
        out.extend(budget_lines([(b.slo, b.budget)], fleet=fleet))
    return out


def strip_axis() -> html.Div:
    """The time axis under the class strip: its two ends named, the 5-minute ticks
    between them drawn by the style sheet."""
    return html.Div(
        [html.Span(f"−{RECENT_S / 60:g} min"), html.Span("now")],
        className="mini-band-axis",
        title=f"the last {RECENT_S / 60:g} minutes, a tick every 5: one colour per run of a class",
    )


def card_view(
    ctx: PageContext,
    card: Card,
    *,
    now: float,
    budgets: list[FleetBudget] | None = None,
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
                    *_metric("TTFT p50", fmt_value(p.ttft_p50, "s", p.ttft_p50_ge)),
                    *_metric(
                        "TTFT p99",
                        fmt_value(p.ttft_p99, "s", p.ttft_p99_ge),
                        verdict=d.ttft_slo,
                        above=p.ttft_p99 is not None and p.ttft_p99 > d.slo_ttft_p99,
                    ),
                    *_metric("ITL p50", fmt_value(p.itl_p50, "s", p.itl_p50_ge)),
                    *_metric(
                        "ITL p99",
                        fmt_value(p.itl_p99, "s", p.itl_p99_ge),
                        verdict=d.itl_slo,
                        above=p.itl_p99 is not None and p.itl_p99 > d.slo_itl_p99,
                    ),
                    *_metric("running", fmt_value(p.running_avg)),
                    *_metric("waiting", fmt_value(p.waiting_avg)),
                    *_metric(
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
        body.extend(fleet_budget_lines(budgets or []))
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
