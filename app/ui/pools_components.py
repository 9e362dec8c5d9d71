"""Pure builders of the fleet page's P/D part: the pools side by side, the transfer panel.

A disaggregated prefill/decode fleet (``app.fleet.pools``) is shown as its pools in one
row — each with its class (in words and colour), load, latency and top hints — then the
client's TTFT (measured by a probe, or estimated: said so, with its parts and the
mismatch with each instance's own TTFT), the KV transfer between the pools, and the pool
imbalance with the ratio to move to. Every value goes into Dash components as text.
"""

from __future__ import annotations

from typing import Any

from dash import html

from app.diagnose.records import fmt_value
from app.read.records import ClientTtft, FleetView, PDView, Pool, TransferFacts
from app.ui.components import badge, data_attrs, evidence_table, hints_list

__all__ = ["client_block", "pool_card", "pools_panel", "transfer_panel"]

ROLE_TITLE = {"prefill": "Prefill pool", "decode": "Decode pool", "both": "Both phases"}


def _row(label: str, value: str) -> html.Tr:
    return html.Tr([html.Th(label, scope="row"), html.Td(value)])


def pool_card(pool: Pool) -> html.Div:
    """One pool: its class, replicas, load and latency, and its top hints."""
    d = pool.diagnosis
    w = pool.fleet.window
    ttft = w.quantiles.get("ttft", {}).get("p99")
    itl = w.quantiles.get("itl", {}).get("p99")
    kv = w.gauges.get("kv_usage")
    running = w.gauges.get("running")
    waiting = w.gauges.get("waiting")
    mean = w.means.get("ttft") if w.observations.get("ttft", 0.0) > 0 else None
    rows = [
        _row("replicas", ", ".join(pool.replicas) or "none with data"),
        _row(
            "load",
            f"{fmt_value(pool.load, 'ratio')} ({pool.load_basis})",
        ),
        _row("TTFT mean / p99", f"{fmt_value(mean, 's')} / {_q(ttft)}"),
        _row("ITL p99", _q(itl)),
        _row(
            "running / waiting (avg)",
            f"{fmt_value(None if running is None else running.avg)} / "
            f"{fmt_value(None if waiting is None else waiting.avg)}",
        ),
        _row("KV usage (avg)", fmt_value(None if kv is None else kv.avg, "ratio")),
    ]
    return html.Div(
        [
            html.H4(ROLE_TITLE.get(pool.role, pool.role)),
            html.Div(badge(str(d.cls), None if d.sub_cause is None else str(d.sub_cause))),
            html.P(d.summary, className="pool-summary"),
            html.Table(html.Tbody(rows), className="kv-table"),
            hints_list(d.hints[:3]),
        ],
        className="pool-card",
        **data_attrs(role=pool.role, cls=str(d.cls)),
    )


def _q(q: Any) -> str:
    if q is None or q.value is None:
        return "n/a"
    return fmt_value(q.value, "s", q.ge_top_bucket)


def client_block(c: ClientTtft) -> html.Div:
    """The client's TTFT: measured (probe) or an estimate said as such, and the mismatch."""
    parts: list[Any] = [html.H4("What a client waits for its first token")]
    if c.measured:
        parts.append(
            html.P(
                f"Measured by {', '.join(c.probes)}: mean {fmt_value(c.probe_mean, 's')}, "
                f"p99 {fmt_value(c.probe_p99, 's')}. From the pools' own metrics: "
                f"≈ {fmt_value(c.mean, 's')}.",
                className="client-measured",
            )
        )
    else:
        parts.append(
            html.P(
                [
                    html.Strong("Estimate"),
                    f" (no probe of this model): ≈ {fmt_value(c.mean, 's')} = prefill pool "
                    f"TTFT {fmt_value(c.prefill_mean, 's')} + KV transfer "
                    f"{fmt_value(c.transfer_mean, 's')} + decode first step "
                    f"{fmt_value(c.first_step_mean, 's')}; at most ≈ "
                    f"{fmt_value(c.upper, 's')} at p99 (the p99s added).",
                ],
                className="client-estimate",
            )
        )
    if c.mismatch:
        parts.append(html.P(f"Mismatch: {c.mismatch}.", className="client-mismatch"))
    if c.notes:
        parts.append(html.Ul([html.Li(n) for n in c.notes], className="muted"))
    return html.Div(
        parts,
        className="client-ttft",
        **data_attrs(measured="yes" if c.measured else "no"),
    )


def transfer_panel(view: PDView) -> html.Div:
    """The KV transfer between the pools: time, speed, size, failures, expiries, stages."""
    parts: list[Any] = [html.H4("KV transfer")]
    facts = [(role, p.transfer) for role, p in view.pools.items() if p.transfer is not None]
    if not facts:
        parts.append(html.P("No KV-connector metrics on the pools' pages.", className="muted"))
        return html.Div(parts, className="transfer-panel")
    rows: list[html.Tr] = []
    for role, t in facts:
        rows.extend(_transfer_rows(role, t))
    parts.append(html.Table(html.Tbody(rows), className="kv-table"))
    return html.Div(parts, className="transfer-panel")


def _transfer_rows(role: str, t: TransferFacts) -> list[html.Tr]:
    out = []
    if t.transfers > 0:
        speed = "n/a" if t.bytes_per_s is None else f"{t.bytes_per_s / 1e6:,.0f} MB/s"
        size = "n/a" if t.bytes_mean is None else f"{t.bytes_mean / 1e6:,.1f} MB"
        out += [
            _row(f"{role}: transfers", f"{t.transfers:.0f} ({size} each, {speed})"),
            _row(
                f"{role}: transfer time mean / p99",
                f"{fmt_value(t.xfer_mean, 's')} / {fmt_value(t.xfer_p99, 's', t.xfer_p99_ge)}",
            ),
            _row(f"{role}: descriptors per transfer", fmt_value(t.descriptors_mean)),
        ]
    if t.failures is not None and (t.transfers > 0 or t.failures > 0):
        out.append(
            _row(
                f"{role}: failed transfers",
                f"{t.failures:.0f} ({fmt_value(t.failure_share, 'ratio')})",
            )
        )
    if t.expired:
        out.append(_row(f"{role}: KV expired before read", f"{t.expired:.0f}"))
    if t.consumer:
        out.append(
            _row(
                f"{role}: waiting for KV (to start / in progress / landed)",
                f"{fmt_value(t.fetch_waiting_to_start)} / {fmt_value(t.fetch_in_progress)} / "
                f"{fmt_value(t.fetch_completed_waiting)}",
            )
        )
    if t.share is not None:
        share = fmt_value(t.share, "ratio")
        out.append(_row(f"{role}: transfer's share of the wait for a first token", share))
    return out


def pools_panel(view: FleetView) -> html.Div:
    """The P/D part of the fleet page (empty for a fleet whose replicas serve both phases)."""
    pd = view.pd
    if pd is None:
        return html.Div(className="pools-panel", **data_attrs(pd="no"))
    cards = [pool_card(p) for p in pd.pools.values()]
    parts: list[Any] = [
        html.H3("Prefill and decode pools"),
        html.Div(cards, className="pool-row"),
        client_block(pd.client),
        transfer_panel(pd),
    ]
    if pd.imbalance is not None:
        o = pd.imbalance.outlier
        parts.append(
            html.Div(
                [
                    html.H4(f"Pool imbalance: move toward {pd.imbalance.ratio}"),
                    html.P(o.summary),
                    evidence_table(o.evidence),
                    hints_list(o.hints),
                ],
                className="pool-imbalance",
                **data_attrs(ratio=pd.imbalance.ratio),
            )
        )
    roles = ", ".join(
        f"{t} {r} ({'label' if pd.role_sources.get(t) == 'label' else 'from its page'})"
        for t, r in sorted(pd.roles.items())
    )
    parts.append(html.P(f"Roles: {roles}.", className="muted"))
    parts += [html.P(n, className="muted") for n in pd.notes]
    return html.Div(parts, className="pools-panel", **data_attrs(pd="yes"))
