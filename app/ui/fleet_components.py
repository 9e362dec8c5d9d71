"""Pure builders of the fleet page's text parts: imbalance, replicas table, SLO summary.

Every label value (target names, model names, fleet labels) goes into Dash components as
text, which Dash escapes. An imbalanced replica says so in words ("imbalanced: load,
queue"), besides its colour.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dash import dcc, html

from app.diagnose.records import fmt_value
from app.read.fleetpoints import ReplicaPoint
from app.read.records import FleetView, Imbalance, SloStatus, budget_text, budget_title
from app.ui import palette
from app.ui.components import badge, data_attrs, evidence_table, hints_list
from app.ui.fleet_figures import objective_label

KIND_TEXT = {
    "load": "load",
    "queue": "queue",
    "kv_spread": "KV spread",
    "ttft": "TTFT",
    "itl": "ITL",
    "pool": "pool ratio",  # a P/D fleet's pool, saturated beside an idle one
}


def flag(kinds: Sequence[str]) -> html.Span:
    """The imbalance label of a replica, in text: ``imbalanced: load, queue``."""
    words = ", ".join(KIND_TEXT.get(k, k) for k in kinds)
    return html.Span(f"{palette.IMBALANCED_LABEL}: {words}", className="flag-imbalanced")


def kinds_of(imbalance: Imbalance) -> dict[str, list[str]]:
    """Each flagged replica's outlier kinds, in the order found."""
    out: dict[str, list[str]] = {}
    for o in imbalance.outliers:
        out.setdefault(o.replica, []).append(o.kind)
    return out


def imbalance_panel(view: FleetView, *, min_replicas: int = 2) -> html.Div:
    """Who departs from its peers in the window, why (evidence), and what to change."""
    imb = view.imbalance
    n = len(view.fleet.replicas)
    parts: list[Any] = [html.H3("Imbalance")]
    if n < max(2, min_replicas):
        parts.append(
            html.P(f"{n} replica(s) with data: no peers to compare with.", className="muted")
        )
        return html.Div(parts, className="imbalance-panel", **data_attrs(flagged=""))
    if not imb.outliers:
        parts.append(
            html.P(
                f"All {n} replicas are in line with their peers in this window.",
                className="balanced",
            )
        )
        return html.Div(parts, className="imbalance-panel", **data_attrs(flagged=""))
    kinds = kinds_of(imb)
    for replica in imb.flagged:
        outliers = [o for o in imb.outliers if o.replica == replica]
        parts.append(
            html.Div(
                [
                    html.Div([html.Strong(replica), " ", flag(kinds[replica])]),
                    html.Ul([html.Li(o.summary) for o in outliers]),
                    evidence_table([e for o in outliers for e in o.evidence]),
                ],
                className="outlier",
                **data_attrs(replica=replica),
            )
        )
    parts.append(html.H4("What to change"))
    parts.append(hints_list(imb.hints))
    return html.Div(parts, className="imbalance-panel", **data_attrs(flagged=",".join(imb.flagged)))


def _attainment_text(att: Mapping[str, float | None]) -> str:
    known = [f"{k} {v:.1%}" for k, v in sorted(att.items()) if v is not None]
    return " · ".join(known) or "n/a"


def replicas_table(
    view: FleetView,
    points: Mapping[str, ReplicaPoint],
    attainment: Mapping[str, Mapping[str, float | None]],
    *,
    href: Callable[[str], str],
) -> html.Table:
    """The latest window's replicas side by side: status in words, class, load, latency,
    attainment; the fleet's own row first."""
    total = sum(p.running_avg or 0.0 for p in points.values())
    kinds = kinds_of(view.imbalance)
    head = html.Tr(
        [
            html.Th(h)
            for h in (
                "replica",
                "status",
                "class",
                "running (share)",
                "waiting",
                "KV (avg)",
                "TTFT p99",
                "ITL p99",
                "attainment",
            )
        ]
    )
    d = view.diagnosis
    fw = view.fleet.window
    fleet_row = html.Tr(
        [
            html.Td(html.Strong("fleet")),
            html.Td(f"{len(view.fleet.replicas)} replica(s) up"),
            html.Td(badge(str(d.cls), None if d.sub_cause is None else str(d.sub_cause))),
            html.Td(fmt_value(total), className="num"),
            html.Td(fmt_value(_gauge(fw.gauges.get("waiting"))), className="num"),
            html.Td(fmt_value(_gauge(fw.gauges.get("kv_usage")), "ratio"), className="num"),
            html.Td(_q(fw.quantiles, "ttft"), className="num"),
            html.Td(_q(fw.quantiles, "itl"), className="num"),
            html.Td(_attainment_text(attainment.get("", {}))),
        ],
        className="fleet-row",
    )
    rows = [fleet_row]
    for replica, p in points.items():
        rd = view.per_replica.get(replica)
        share = (p.running_avg / total) if p.running_avg is not None and total > 0 else None
        status: Any = flag(kinds[replica]) if replica in kinds else "in line with its peers"
        rows.append(
            html.Tr(
                [
                    html.Td(dcc.Link(replica, href=href(replica))),
                    html.Td(status),
                    html.Td(
                        badge(str(rd.cls), None if rd.sub_cause is None else str(rd.sub_cause))
                        if rd is not None
                        else ""
                    ),
                    html.Td(
                        f"{fmt_value(p.running_avg)} ({fmt_value(share, 'ratio')})",
                        className="num",
                    ),
                    html.Td(fmt_value(p.waiting_avg), className="num"),
                    html.Td(fmt_value(p.kv_avg, "ratio"), className="num"),
                    html.Td(fmt_value(p.ttft_p99, "s", p.ttft_p99_ge), className="num"),
                    html.Td(fmt_value(p.itl_p99, "s", p.itl_p99_ge), className="num"),
                    html.Td(_attainment_text(attainment.get(replica, {}))),
                ],
                className="replica-row flagged" if replica in kinds else "replica-row",
                **data_attrs(replica=replica, flagged="true" if replica in kinds else "false"),
            )
        )
    return html.Table([html.Thead(head), html.Tbody(rows)], className="replicas")


def _gauge(g: Any) -> float | None:
    return None if g is None else g.avg


def _q(quantiles: Mapping[str, Mapping[str, Any]], signal: str) -> str:
    q = quantiles.get(signal, {}).get("p99")
    return "n/a" if q is None else fmt_value(q.value, "s", q.ge_top_bucket)


def _period(seconds: float) -> str:
    days = seconds / 86400.0
    return f"{days:g} d" if days >= 1 else f"{seconds / 3600.0:g} h"


def slo_panel(statuses: Sequence[SloStatus]) -> html.Div:
    """Each SLO of the fleet now: objectives, budget left, burn rates, latest attainment."""
    if not statuses:
        return html.Div(
            [html.H3("SLOs"), html.P("No SLO applies to this fleet.", className="muted")],
            className="slo-panel",
        )
    items = []
    for s in statuses:
        spec = s.spec
        bounds = spec.bounds()
        objectives = ", ".join(objective_label(k, v) for k, v in bounds.items())
        burns = " · ".join(
            f"{w} {fmt_value(s.burn.get(w))}×" for w in ("5m", "1h", "6h", "1d") if w in s.burn
        )
        latest = {k: t.ratio for k, t in sorted(s.latest.tallies.items())}
        items.append(
            html.Div(
                [
                    html.Div(
                        [
                            html.Strong(spec.name),
                            html.Span(
                                f" target {spec.target:.2%} over {_period(spec.period_s)}",
                                className="muted",
                            ),
                        ]
                    ),
                    html.Div(f"objectives: {objectives or 'errors only'}"),
                    html.Div(
                        ["error budget: ", html.Strong(budget_text(s.budget))],
                        className="budget",
                        title=budget_title(s.budget),
                        **data_attrs(slo=spec.name),
                    ),
                    html.Div(f"burn rate {burns}", className="burn"),
                    html.Div(f"last {s.latest_s:g} s: {_attainment_text(latest)}"),
                ],
                className="slo-item",
            )
        )
    return html.Div([html.H3("SLOs"), *items], className="slo-panel")
