"""Overview: the fleets as links to their pages, then every target and model as a card,
worst first; a click on a card opens the target. Cards and fleet links show the error
budget left of each SLO that covers them.

A page holds at most ``CARDS_PER_PAGE`` cards (and ``FLEET_LINKS`` fleet links): the
problem streams first, paged with ``?page=N``, then healthy ones while room is left; the
healthy and idle streams (and quiet fleets) that do not fit are one list of links. The
browser mounts each component of an answer on its own, at a cost that grows with the
square of their number (BENCHMARKS.md, "UI"), so a page of a thousand cards never
renders; a page of two dozen does."""

from __future__ import annotations

from typing import Any

from dash import Dash, Input, Output, State, dcc, html

from app.diagnose.classes import DiagnosisClass
from app.diagnose.records import fmt_value
from app.read import markdown_text as md
from app.read.fleetpoints import FleetBudget, FleetSummary
from app.read.points import RECENT_S, Card
from app.read.records import Budget, budget_text, budget_title
from app.ui import ids, palette
from app.ui.components import badge, data_attrs, mini_band
from app.ui.context import PageContext
from app.ui.figures import utc

CARDS_PER_PAGE = 24
FLEET_LINKS = 12
FINE = (DiagnosisClass.HEALTHY, DiagnosisClass.IDLE)


def page_of(q: dict[str, str]) -> int:
    """The overview page asked for (``?page=N``, from 1); anything else is page 1."""
    raw = q.get("page", "1")
    return max(1, min(int(raw), 1_000_000)) if raw.isdigit() else 1


def layout(ctx: PageContext, q: dict[str, str] | None = None) -> html.Div:
    return html.Div(
        [
            html.H2("Overview"),
            html.P(id=ids.OVERVIEW_STATUS, className="muted"),
            dcc.Store(id=ids.OVERVIEW_PAGE, data=page_of(q or {})),
            html.Div(id=ids.OVERVIEW_FLEETS, className="fleets"),
            html.Div(id=ids.OVERVIEW_PAGER, className="pager"),
            html.Div(id=ids.OVERVIEW_CARDS, className="cards"),
            html.Div(id=ids.OVERVIEW_REST, className="overview-rest"),
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


def link_list(links: list[tuple[str, str]]) -> str:
    """Links as one Markdown paragraph, ``·`` between them (one component, however many);
    each label a code span, so nothing in a scraped name is markup."""
    return " · ".join(f"[{md.code(label)}](<{href}>)" for label, href in links)


def rest_view(ctx: PageContext, cards: list[Card]) -> Any:
    """The streams without a card on this page, as one list of links (healthy ones
    named first by the count of each class)."""
    if not cards:
        return ""
    counts: dict[str, int] = {}
    for c in cards:
        counts[c.cls] = counts.get(c.cls, 0) + 1
    words = ", ".join(f"{n} {cls.replace('_', ' ')}" for cls, n in sorted(counts.items()))
    links = [
        (
            f"{c.target} ({c.model_name})" if c.model_name else c.target,
            ctx.target_href(c.target, c.model_name or None),
        )
        for c in cards
    ]
    return html.Details(
        [
            html.Summary(f"{len(cards)} more stream(s) without a card here: {words}"),
            dcc.Markdown(link_list(links), link_target="_self", className="stream-list"),
        ],
        className="overview-rest-list",
    )


def pager_view(ctx: PageContext, page: int, pages: int, shown: str) -> Any:
    """``problems 61–120 of 300 · ‹ previous · next ›`` when the problems span pages."""
    if pages <= 1:
        return ""
    parts: list[Any] = [html.Span(shown, className="muted")]
    if page > 1:
        parts += [" · ", dcc.Link("‹ previous", href=ctx.relative(f"/?page={page - 1}"))]
    if page < pages:
        parts += [" · ", dcc.Link("next ›", href=ctx.relative(f"/?page={page + 1}"))]
    return parts


def split_page(cards: list[Card], page: int) -> tuple[list[Card], list[Card], int, str]:
    """The cards of a page (problems first; healthy ones while room is left), the streams
    listed without a card, the number of pages and what the page shows."""
    problems = [c for c in cards if c.cls not in FINE]
    fine = [c for c in cards if c.cls in FINE]
    pages = max(1, -(-len(problems) // CARDS_PER_PAGE))
    page = min(page, pages)
    lo = (page - 1) * CARDS_PER_PAGE
    shown = problems[lo : lo + CARDS_PER_PAGE]
    room = CARDS_PER_PAGE - len(shown) if page == pages else 0
    rest = fine[room:] if room else fine
    shown = shown + fine[:room]
    words = f"problems {lo + 1}–{min(lo + CARDS_PER_PAGE, len(problems))} of {len(problems)}"
    return shown, rest, pages, words


def fleets_view(ctx: PageContext, summaries: list[FleetSummary]) -> Any:
    """The fleets: flagged ones first as links with their budgets, at most FLEET_LINKS;
    the others as one list."""
    if not summaries:
        return ""
    order = sorted(summaries, key=lambda f: (not f.flagged, len(f.members) <= 1))
    shown, rest = order[:FLEET_LINKS], order[FLEET_LINKS:]
    out: list[Any] = [html.H3("Fleets"), *(fleet_link_view(ctx, f) for f in shown)]
    if rest:
        links = [(f.key.name, ctx.fleet_href(f.key.model_name, f.key.name)) for f in rest]
        out.append(
            html.Details(
                [
                    html.Summary(
                        f"{len(rest)} more fleet(s), none imbalanced"
                        if not any(f.flagged for f in rest)
                        else f"{len(rest)} more fleet(s)"
                    ),
                    dcc.Markdown(link_list(links), link_target="_self", className="stream-list"),
                ],
                className="overview-rest-list",
            )
        )
    return out


def counts_text(cards: list[Card]) -> str:
    """The overview's count: streams with a problem apart from those that could not be
    judged ("6 stream(s): 0 with a problem, 6 with insufficient data"), never both as
    "not healthy"."""
    unknown = sum(1 for c in cards if c.cls == DiagnosisClass.INSUFFICIENT_DATA)
    problems = sum(1 for c in cards if c.cls not in FINE) - unknown
    n_firing = sum(len(c.firing) for c in cards)
    parts = [f"{problems} with a problem"]
    if unknown:
        parts.append(f"{unknown} with insufficient data")
    return f"{len(cards)} stream(s): {', '.join(parts)}, {n_firing} firing alert(s)"


def register(app: Dash, ctx: PageContext) -> None:
    @app.callback(
        Output(ids.OVERVIEW_CARDS, "children"),
        Output(ids.OVERVIEW_STATUS, "children"),
        Output(ids.OVERVIEW_FLEETS, "children"),
        Output(ids.OVERVIEW_PAGER, "children"),
        Output(ids.OVERVIEW_REST, "children"),
        Input(ids.OVERVIEW_TICK, "n_intervals"),
        State(ids.OVERVIEW_PAGE, "data"),
    )
    def refresh(_n: int | None, page: int | None) -> tuple[Any, ...]:
        firing: dict[tuple[str, str], list[str]] = {}
        for a in ctx.alerts.current():
            if a.state == "firing":
                firing.setdefault((a.target, a.model_name or ""), []).append(a.name)
        cards = ctx.data.cards(firing)
        now = ctx.data.now()
        status = f"{counts_text(cards)} · {ctx.data.source.label} · as of {utc(now)} UTC"
        fd = ctx.fleets
        fleets: Any = ""
        budgets: dict[tuple[str, str], list[FleetBudget]] = {}
        if fd is not None:
            # Never counted in the request: a count runs beside it while none is at hand.
            budgets = fd.budgets(wait=False)
            fleets = fleets_view(ctx, fd.summaries(wait=False))
            if fd.options.specs and not budgets and fd.counting:
                status += " · SLO budgets: being counted, shown at the next refresh"
        shown, rest, pages, words = split_page(cards, page or 1)
        shown = ctx.data.with_recent(shown)
        views = [
            card_view(ctx, c, now=now, budgets=budgets.get((c.target, c.model_name))) for c in shown
        ]
        pager = pager_view(ctx, min(page or 1, pages), pages, words)
        return views, status, fleets, pager, rest_view(ctx, rest)
