"""Overview: the problem streams as cards, worst first; the fleets as links to their
pages; then every stream in one table (``app.ui.streamgrid``: virtualised, sortable,
filterable). A click on a card or a row's name opens the target. Cards, fleet links and
rows show the error budget left of each SLO that covers them.

Nothing here computes a stream's window: the cards are the overview's board
(``app.read.board``), kept by a thread of its own, and the budgets and fleets are read
without waiting (``FleetData``). Before the first board the page says it is being
computed and asks again within a second.

A page holds at most ``CARDS_PER_PAGE`` cards (and ``FLEET_LINKS`` fleet links): the
problem streams, paged with ``?page=N``; a fleet small enough to fit on one page is all
cards, healthy ones after the problems. The browser mounts each component of an answer
on its own, at a cost that grows with the square of their number (BENCHMARKS.md, "UI"),
so a thousand streams are rows of one table, never a thousand cards."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Any

from dash import Dash, Input, Output, State, dcc, html, no_update

from app.diagnose.classes import DiagnosisClass
from app.read import markdown_text as md
from app.read.board import Snapshot, stripped, with_firing
from app.read.fleetpoints import FleetBudget, FleetSummary
from app.read.points import Card
from app.read.records import Budget
from app.ui import ids, palette, streamgrid
from app.ui.components import data_attrs
from app.ui.context import PageContext
from app.ui.figures import utc
from app.ui.streamcards import budget_lines, card_view

CARDS_PER_PAGE = 24
FLEET_LINKS = 12
WAITING_MS = 1000  # the refresh while the first board is computed
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
            dcc.Store(id=ids.OVERVIEW_ROWS_KEY),
            html.Div(id=ids.OVERVIEW_PAGER, className="pager"),
            html.Div(id=ids.OVERVIEW_CARDS, className="cards"),
            html.Div(id=ids.OVERVIEW_FLEETS, className="fleets"),
            html.H3("Every stream", className="grid-head"),
            streamgrid.grid(ctx),
            # One tick after each answer (``max_intervals`` raised by the answer): the
            # next request never goes out while one is in flight, which the renderer
            # would answer by dropping the first's answer.
            dcc.Interval(id=ids.OVERVIEW_TICK, interval=WAITING_MS, max_intervals=1),
        ],
        className="page-overview",
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


def link_list(links: list[tuple[str, str]]) -> str:
    """Links as one Markdown paragraph, ``·`` between them (one component, however many);
    each label a code span, so nothing in a scraped name is markup."""
    return " · ".join(f"[{md.code(label)}](<{href}>)" for label, href in links)


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


def split_page(cards: list[Card], page: int) -> tuple[list[Card], int, str]:
    """The cards of a page — the problems, worst first; all of them, healthy ones after,
    when every stream fits on one page — the number of pages and what the page shows."""
    problems = [c for c in cards if c.cls not in FINE]
    if len(cards) <= CARDS_PER_PAGE:
        return list(cards), 1, f"{len(problems)} problem(s)"
    pages = max(1, -(-len(problems) // CARDS_PER_PAGE))
    page = min(page, pages)
    lo = (page - 1) * CARDS_PER_PAGE
    shown = problems[lo : lo + CARDS_PER_PAGE]
    if not problems:
        return [], 1, "no stream with a problem"
    words = f"problems {lo + 1}–{min(lo + CARDS_PER_PAGE, len(problems))} of {len(problems)}"
    return shown, pages, words


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


def firing_of(ctx: PageContext) -> dict[tuple[str, str], list[str]]:
    """The firing alerts by stream (a target's alert without a model: model "")."""
    firing: dict[tuple[str, str], list[str]] = {}
    for a in ctx.alerts.current():
        if a.state == "firing":
            firing.setdefault((a.target, a.model_name or ""), []).append(a.name)
    return firing


def waiting_status(ctx: PageContext) -> str:
    """What the page says before the first board."""
    why = ctx.board.failed
    if why is not None:
        return f"the streams could not be read ({why}); trying again"
    return (
        "computing every stream's latest window (the first time after a start); "
        f"shown within {WAITING_MS / 1000:g} s of being ready · {ctx.data.source.label}"
    )


def register(app: Dash, ctx: PageContext) -> None:
    @app.callback(
        Output(ids.OVERVIEW_CARDS, "children"),
        Output(ids.OVERVIEW_STATUS, "children"),
        Output(ids.OVERVIEW_FLEETS, "children"),
        Output(ids.OVERVIEW_PAGER, "children"),
        Output(ids.OVERVIEW_ROWS_KEY, "data"),
        Output(ids.OVERVIEW_TICK, "interval"),
        Output(ids.OVERVIEW_TICK, "max_intervals"),
        Input(ids.OVERVIEW_TICK, "n_intervals"),
        State(ids.OVERVIEW_PAGE, "data"),
        State(ids.OVERVIEW_ROWS_KEY, "data"),
    )
    def refresh(n: int | None, page: int | None, shown_key: str | None) -> tuple[Any, ...]:
        again = (n or 0) + 1  # the next tick, and none before this answer is in
        snap = ctx.board.read()
        if snap is None:
            return "", waiting_status(ctx), "", "", no_update, WAITING_MS, again
        o = read(ctx, snap)
        views, status, fleets, pager = answer(ctx, o, page or 1)
        key = o.key()
        return (
            views,
            status,
            fleets,
            pager,
            no_update if key == shown_key else key,  # the table's rows, when they changed
            ctx.refresh_ms,
            again if ctx.data.source.live else 0,
        )

    # The table's rows in a request of their own, after the cards and only when they
    # changed: the cards paint without waiting for a thousand rows.
    @app.callback(Output(ids.OVERVIEW_GRID, "rowData"), Input(ids.OVERVIEW_ROWS_KEY, "data"))
    def rows(key: str | None) -> Any:
        snap = ctx.board.read()
        if snap is None or key is None:
            return no_update
        o = read(ctx, snap)
        return streamgrid.rows(
            o.cards, {k: [(b.slo, b.budget) for b in v] for k, v in o.budgets.items()}
        )


@dataclass(frozen=True)
class Read:
    """What one answer reads: the board's cards with their firing alerts, the budgets
    and the fleets' summaries with them, and whether the budgets are being counted."""

    snap: Snapshot
    cards: list[Card]
    budgets: dict[tuple[str, str], list[FleetBudget]]
    fleets: list[FleetSummary]
    counting: bool

    def key(self) -> str:
        """What the table's rows depend on, as a short text (a change: new rows)."""
        firing = sorted((c.target, c.model_name, c.firing) for c in self.cards if c.firing)
        budgets = sorted(
            (k, tuple((b.slo, b.budget.remaining, b.budget.events) for b in v))
            for k, v in self.budgets.items()
        )
        return hashlib.sha1(repr((self.snap.at, firing, budgets)).encode()).hexdigest()


def read(ctx: PageContext, snap: Snapshot) -> Read:
    """The board, the firing alerts and the budgets at hand (never counted here: a
    count runs beside the request while none is); the fleets' list is the board's, with
    the budgets counted since."""
    cards = with_firing(snap.cards, firing_of(ctx))
    fd = ctx.fleets
    if fd is None:
        return Read(snap, cards, {}, [], False)
    statuses = fd.statuses(wait=False)
    budgets = fd.budgets(wait=False)
    of_fleet: dict[Any, list[tuple[str, Budget]]] = {}
    for s in statuses:
        of_fleet.setdefault(s.key, []).append((s.spec.name, s.budget))
    fleets = [replace(f, budgets=tuple(of_fleet.get(f.key, f.budgets))) for f in snap.fleets]
    counting = bool(fd.options.specs and not budgets and fd.counting)
    return Read(snap, cards, budgets, fleets, counting)


def answer(ctx: PageContext, o: Read, page: int) -> tuple[Any, ...]:
    """The overview's cards, status, fleets and pager."""
    snap = o.snap
    status = f"{counts_text(o.cards)} · {ctx.data.source.label} · as of {utc(snap.end)} UTC"
    if ctx.board.computing:
        status += " · the next window's cards are being computed"
    if o.counting:
        status += " · SLO budgets: being counted, shown at the next refresh"
    shown, pages, words = split_page(o.cards, page)
    shown = stripped(ctx.data, snap, shown)
    views = [
        card_view(ctx, c, now=snap.end, budgets=o.budgets.get((c.target, c.model_name)))
        for c in shown
    ]
    pager = pager_view(ctx, min(page, pages), pages, words)
    fleets = fleets_view(ctx, o.fleets) if ctx.fleets is not None else ""
    return views, status, fleets, pager
