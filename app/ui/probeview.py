"""A probe's panel on its target page: what a client saw in the latest window.

A probe's stream has no engines and no load gauges; in their place the page shows the
probe's readings (``app.read.points.probe_reading``): the client's TTFT beside the
server's own and the gap between them, connection and first byte, the token gaps, the
decode speed as received and as the server reported it, the server's prefill speed,
and — with the probe's device and model size — the decode roofline. Pure: a function
of the window and its diagnosis.
"""

from __future__ import annotations

from dash import html

from app.diagnose.records import Diagnosis, fmt_value
from app.model import Window
from app.read.points import probe_reading

__all__ = ["probe_panel"]


def _row(label: str, value: str, note: str = "") -> html.Tr:
    return html.Tr([html.Td(label), html.Td(value, className="num"), html.Td(note)])


def probe_panel(w: Window, d: Diagnosis | None) -> html.Div | None:
    """The panel of a probe's window; None for any other stream's."""
    p = probe_reading(w)
    if p is None:
        return None
    s, tps = "s", "tok/s"
    server = p.page_ttft_p50 if p.client_gap_estimated else p.server_ttft_mean
    rows = [
        _row("answers", f"{p.attempts - p.failures:.0f} of {p.attempts:.0f}",
             f"{p.timeouts:.0f} timed out" if p.timeouts else ""),
        _row("client TTFT", fmt_value(p.ttft_mean, s), f"p99 {fmt_value(p.ttft_p99, s)}"),
        _row("server TTFT", fmt_value(server, s),
             "its page's p50 (estimate)" if p.client_gap_estimated else "reported per request"),
        _row("client gap", fmt_value(p.client_gap, s),
             "" if p.client_gap_share is None else f"{p.client_gap_share:.0%} of the client's"),
        _row("connect", fmt_value(p.connect_mean, s), "TCP (+TLS), a new connection"),
        _row("first byte", fmt_value(p.ttfb_mean, s), "request sent → headers"),
        _row("token gaps", fmt_value(p.itl_p50, s), f"p99 {fmt_value(p.itl_p99, s)}"),
        _row("decode", fmt_value(p.decode_tps, tps), "as received"),
        _row("server decode", fmt_value(p.server_decode_tps, tps), "as reported"),
        _row("server prefill", fmt_value(p.server_prefill_tps, tps), "as reported"),
    ]  # fmt: skip
    roof = None if d is None else d.roofline
    if roof is not None:
        eff = "" if roof.efficiency is None else f"measured {roof.efficiency:.0%} of it"
        rows.append(_row("decode ceiling", fmt_value(roof.ceiling_tok_s, tps),
                         f"{roof.device}: bandwidth / weights; {eff}"))  # fmt: skip
    head = html.Tr([html.Th(h) for h in ("probe", "latest window", "")])
    return html.Div(
        [
            html.H4("Probe (as a client sees it)"),
            html.Table([html.Thead(head), html.Tbody(rows)], className="engines probe"),
        ]
    )
