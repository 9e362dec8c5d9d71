"""Every stream of the overview in one table: an AG Grid (``dash-ag-grid``) that renders
only the rows in view, sorts and filters in the browser, and keeps its rows by id across
refreshes — a thousand streams are one component, where a card each was a thousand
(the renderer's cost grows with the components: BENCHMARKS.md, "UI").

The rows are pure data (:func:`rows`): each number as a value to sort and filter on and
its text as the cards write it (``fmt_value``), so a table and a card never disagree.
The stream's name links to its target page through ``assets/grid.js``'s ``StreamLink``
(in-app navigation, as ``dcc.Link``); every label is text, never markup.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import dash_ag_grid as dag

from app.diagnose.records import fmt_value
from app.read.points import Card
from app.read.records import Budget, budget_text
from app.ui import ids, palette
from app.ui.context import PageContext

HEIGHT_PX = 460

# (field, header, unit of fmt_value or None for text, the SLO verdict's field)
COLUMNS: tuple[tuple[str, str, str | None, str | None], ...] = (
    ("class", "class", None, None),
    ("ttft_p99", "TTFT p99", "s", "ttft_slo"),
    ("itl_p99", "ITL p99", "s", "itl_slo"),
    ("running", "running", "", None),
    ("waiting", "waiting", "", None),
    ("kv", "KV", "ratio", None),
    ("budget", "error budget", "ratio", None),
    ("alerts", "firing alerts", None, None),
)


def _budget(budgets: Sequence[tuple[str, Budget]]) -> tuple[float | None, str, str]:
    """The least budget left of the SLOs covering a stream, it as the cell says it, and
    each SLO's in words (the cell's hover)."""
    least = min(
        (b for _, b in budgets if b.remaining is not None),
        key=lambda b: b.remaining or 0.0,
        default=None,
    )
    words = "; ".join(f"error budget ({name}): {budget_text(b)}" for name, b in budgets)
    if least is None:
        return None, ("no SLO" if not budgets else budget_text(budgets[0][1])), words
    return least.remaining, budget_text(least), words


def row(card: Card, rank: int, budgets: Sequence[tuple[str, Budget]]) -> dict[str, Any]:
    """One stream as a row: values to sort on, ``<field>_text`` to show (left out where
    the value is unknown: the cell says "n/a"); ``rank`` its place in the overview's
    order, from 0. Its link is made in the browser (``assets/grid.js``)."""
    p, d = card.point, card.diagnosis
    sub = None if d is None or d.sub_cause is None else str(d.sub_cause)
    style = palette.style(card.cls)
    left, budget_cell, budget_words = _budget(budgets)
    out: dict[str, Any] = {
        "rank": rank + 1,
        "target": card.target,
        "model": card.model_name,
        "class": palette.label(card.cls, sub),
        "bg": style.colour,
        "fg": style.text,
        "budget_text": budget_cell,
    }
    if budget_words:
        out["budget_words"] = budget_words
    if card.firing:
        out["alerts"] = ", ".join(card.firing)
    if card.error:
        out["class"] = f"{'partial' if card.up else 'down'}: {card.error}"
    if p is not None and d is not None:
        values = {
            "ttft_p99": (p.ttft_p99, "s", p.ttft_p99_ge),
            "itl_p99": (p.itl_p99, "s", p.itl_p99_ge),
            "running": (p.running_avg, "", False),
            "waiting": (p.waiting_avg, "", False),
            "kv": (p.kv_max, "ratio", False),
        }
        for key, (value, unit, ge) in values.items():
            if value is not None:
                out[key] = value
                out[f"{key}_text"] = fmt_value(value, unit, ge)
        for key, verdict in (("ttft_slo", d.ttft_slo), ("itl_slo", d.itl_slo)):
            if verdict in ("over", "unproven"):
                out[key] = verdict
    if left is not None:
        out["budget"] = left
    return out


def rows(
    cards: Sequence[Card],
    budgets: Mapping[tuple[str, str], Sequence[tuple[str, Budget]]],
) -> list[dict[str, Any]]:
    """Every stream's row, in the overview's order (``rank``: worst first)."""
    return [row(c, k, budgets.get((c.target, c.model_name), ())) for k, c in enumerate(cards)]


def _column(name: str, header: str, unit: str | None, verdict: str | None) -> dict[str, Any]:
    col: dict[str, Any] = {"field": name, "headerName": header}
    if unit is None:
        col["filter"] = "agTextColumnFilter"
    else:
        col["filter"] = "agNumberColumnFilter"
        col["type"] = "numericColumn"
        col["valueFormatter"] = {"function": f"params.data.{name}_text || 'n/a'"}
    if name == "class":
        col["cellStyle"] = {"function": "({background: params.data.bg, color: params.data.fg})"}
    if name == "budget":
        col["tooltipField"] = "budget_words"
        col["cellClassRules"] = {"over": "params.value !== null && params.value <= 0"}
    if verdict is not None:
        col["cellClassRules"] = {
            "over": f"params.data.{verdict} === 'over'",
            "unproven": f"params.data.{verdict} === 'unproven'",
        }
    return col


def column_defs() -> list[dict[str, Any]]:
    """The stream (a link), its model, then :data:`COLUMNS`; the worst first until sorted."""
    return [
        {"field": "rank", "headerName": "#", "width": 70, "filter": False, "sort": "asc"},
        {
            "field": "target",
            "headerName": "target",
            "cellRenderer": "StreamLink",
            "filter": "agTextColumnFilter",
            "pinned": "left",
        },
        {
            "field": "model",
            "headerName": "model",
            "filter": "agTextColumnFilter",
            "tooltipField": "model",
            "minWidth": 180,
        },
        *(_column(*c) for c in COLUMNS),
    ]


def grid(ctx: PageContext) -> dag.AgGrid:
    """The empty table (its rows come after the overview's cards)."""
    return dag.AgGrid(
        id=ids.OVERVIEW_GRID,
        columnDefs=column_defs(),
        rowData=[],
        defaultColDef={
            "sortable": True,
            "resizable": True,
            "floatingFilter": True,
            "minWidth": 90,
            "flex": 1,
        },
        getRowId="params.data.target + '\\n' + params.data.model",
        dashGridOptions={
            # Where the target pages are (``StreamLink`` makes each row's link).
            "context": {"targets": ctx.relative("/targets/")},
            "animateRows": False,
            "tooltipShowDelay": 300,
            "overlayNoRowsTemplate": "no streams yet",
        },
        style={"height": f"{HEIGHT_PX}px", "width": "100%"},
        className="stream-grid",
    )
