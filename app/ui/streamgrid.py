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
from app.read.records import Budget
from app.ui import ids, palette
from app.ui.context import PageContext
from app.ui.fleet_components import budget_text

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


def row(
    ctx: PageContext, card: Card, rank: int, budgets: Sequence[tuple[str, Budget]]
) -> dict[str, Any]:
    """One stream as a row: values to sort on, ``<field>_text`` to show; ``rank`` its
    place in the overview's order, from 0."""
    p, d = card.point, card.diagnosis
    sub = None if d is None or d.sub_cause is None else str(d.sub_cause)
    style = palette.style(card.cls)
    left, budget_cell, budget_words = _budget(budgets)
    out: dict[str, Any] = {
        "id": f"{card.target}\n{card.model_name}",
        "rank": rank + 1,
        "target": card.target,
        "model": card.model_name,
        "href": ctx.target_href(card.target, card.model_name or None),
        "class": palette.label(card.cls, sub),
        "class_style": {"background": style.colour, "color": style.text},
        "ttft_p99": None if p is None else p.ttft_p99,
        "ttft_p99_text": "n/a" if p is None else fmt_value(p.ttft_p99, "s", p.ttft_p99_ge),
        "ttft_slo": None if d is None else d.ttft_slo,
        "itl_p99": None if p is None else p.itl_p99,
        "itl_p99_text": "n/a" if p is None else fmt_value(p.itl_p99, "s", p.itl_p99_ge),
        "itl_slo": None if d is None else d.itl_slo,
        "running": None if p is None else p.running_avg,
        "waiting": None if p is None else p.waiting_avg,
        "kv": None if p is None else p.kv_max,
        "budget": left,
        "budget_text": budget_cell,
        "budget_words": budget_words or "no SLO covers this stream",
        "alerts": ", ".join(card.firing),
    }
    for key, unit in (("running", ""), ("waiting", ""), ("kv", "ratio")):
        out[f"{key}_text"] = fmt_value(out[key], unit)
    if card.error:
        out["class"] = f"{'partial' if card.up else 'down'}: {card.error}"
    return out


def rows(
    ctx: PageContext,
    cards: Sequence[Card],
    budgets: Mapping[tuple[str, str], Sequence[tuple[str, Budget]]],
) -> list[dict[str, Any]]:
    """Every stream's row, in the overview's order (``rank``: worst first)."""
    return [row(ctx, c, k, budgets.get((c.target, c.model_name), ())) for k, c in enumerate(cards)]


def _column(name: str, header: str, unit: str | None, verdict: str | None) -> dict[str, Any]:
    col: dict[str, Any] = {"field": name, "headerName": header}
    if unit is None:
        col["filter"] = "agTextColumnFilter"
    else:
        col["filter"] = "agNumberColumnFilter"
        col["type"] = "numericColumn"
        col["valueFormatter"] = {"function": f"params.data.{name}_text"}
    if name == "class":
        col["cellStyle"] = {"function": "params.data.class_style"}
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


def grid() -> dag.AgGrid:
    """The empty table (its rows come with the overview's refresh)."""
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
        getRowId="params.data.id",
        dashGridOptions={
            "animateRows": False,
            "tooltipShowDelay": 300,
            "overlayNoRowsTemplate": "no streams yet",
        },
        style={"height": f"{HEIGHT_PX}px", "width": "100%"},
        className="stream-grid",
    )
