"""What to change when the time is spent outside the engine, or the window could not be
judged: the way between client and engine (connection, proxy, API server), the probe's
own request, the /metrics page.

Builders of the hint catalog (``hints.CATALOG`` joins them).
"""

from __future__ import annotations

from app.diagnose.hintkit import fmt_pct, fmt_s
from app.diagnose.hintspec import Context, Made


def _gap(x: Context) -> str | None:
    """``client gap 480 ms of 520 ms (92 %), per request``: the frontend's evidence."""
    p = x.facts.probe
    if p is None or p.client_gap is None or p.client_gap_share is None:
        return None
    how = "estimated from the server's p50" if p.client_gap_estimated else "per request"
    ttft = "" if p.client_ttft is None else f" of {fmt_s(p.client_ttft)}"
    return f"client gap {fmt_s(p.client_gap)}{ttft} ({fmt_pct(p.client_gap_share)}), {how}"


def frontend_connection(x: Context) -> Made | None:
    p, gap = x.facts.probe, _gap(x)
    if p is None or gap is None or p.connect_mean is None or p.client_gap is None:
        return None
    if p.connect_mean < 0.5 * p.client_gap:
        return None  # the connection is not where the time goes
    return Made(
        "keep connections alive in the clients (a pool, HTTP keep-alive), terminate TLS "
        "closer to them, or serve from a region nearer the users",
        f"{gap}; the TCP/TLS connection alone takes {fmt_s(p.connect_mean)}",
        promoted=True,
    )


def frontend_path(x: Context) -> Made | None:
    p, gap = x.facts.probe, _gap(x)
    if p is None or gap is None:
        return None
    ttfb = "" if p.ttfb_mean is None else f"; headers after {fmt_s(p.ttfb_mean)}"
    return Made(
        "probe from the server's own host too (or curl -N -w '%{time_starttransfer}' there) "
        "and compare; in the proxy or gateway between, look for buffered streaming "
        "(nginx: proxy_buffering off for text/event-stream), its own queue, and TLS",
        gap + ttfb,
    )


def frontend_api_server(x: Context) -> Made | None:
    p, gap = x.facts.probe, _gap(x)
    if p is None or gap is None or p.client_gap is None:
        return None
    if p.connect_mean is not None and p.connect_mean >= 0.5 * p.client_gap:
        return None  # the connection explains it
    return Made(
        "give the API server more CPU: vLLM's --api-server-count (several frontend "
        "processes), a fast tokenizer, no heavy chat template; a long prompt's tokenising "
        "delays every request behind it",
        f"{gap}, after the connection ({fmt_s(p.connect_mean or 0.0)}): spent between the "
        "server's front door and its engine",
    )


def check_probe(x: Context) -> Made | None:
    p = x.facts.probe
    if p is None:
        return None
    failed = f"{p.failures:.0f} of {p.attempts:.0f} probes failed" if p.attempts else ""
    return Made(
        "send the probe's request by hand (curl -N the endpoint with its model and headers) "
        "and read the answer: the model's name, the token, the server's log",
        failed or "no probe answered in the window",
    )


def check_metrics(x: Context) -> Made | None:
    f = x.facts
    if f.probe is not None:
        return None  # a probe's window has no page of its own (``check-probe``)
    parts = []
    if f.missing:
        parts.append(f"not on the page: {', '.join(f.missing)}")
    if f.coverage < x.config.min_coverage:
        parts.append(f"{fmt_pct(f.coverage)} of the window covered by scrapes")
    return Made(
        "curl the /metrics URL: vLLM must run without --disable-log-stats, and the scrape "
        "must succeed every interval",
        "; ".join(parts) or "the window could not be judged",
    )
