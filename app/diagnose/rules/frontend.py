"""``frontend_bound``: a client waits for its first token well beyond what the server
reports (a probe's window only)."""

from __future__ import annotations

import math

from app.diagnose.classes import DiagnosisClass
from app.diagnose.records import fmt_value
from app.diagnose.rules.compare import evidence
from app.diagnose.rules.inputs import Inputs
from app.diagnose.rules.result import RuleResult, breach_margin

__all__ = ["frontend_bound"]

C = DiagnosisClass


def frontend_bound(x: Inputs) -> RuleResult:
    """A client waits for its first token well beyond what the server reports.

    Only a probe's window carries it (``app.windows.probefacts``: the client gap, per request or
    estimated from the server's p50); every other window has nothing to compare and the
    rule does not hold there. TTFT ≈ queue + prefill on the server (docs/concepts.md) — plus,
    for a client, the connection, the network, any proxy, and the API server's own work
    before the engine sees the request (tokenising, templating). When the gap is over
    ``frontend_gap_min`` and over ``frontend_gap_share`` of the client's TTFT, no engine
    flag is the lever: the path in front of the engine is.
    """
    p = x.facts.probe
    r = C.FRONTEND_BOUND
    if p is None or p.client_gap is None or p.client_gap_share is None:
        return RuleResult(r, False, ())
    cfg = x.config
    gap, share = p.client_gap, p.client_gap_share
    big = gap > cfg.frontend_gap_min
    most = share > cfg.frontend_gap_share
    how = (
        "estimate: the probe's TTFT mean − the server's TTFT p50 over the window (its page)"
        if p.client_gap_estimated
        else "per request: the probe's TTFT − the server's own TTFT for the same request"
    )
    server = p.page_ttft_p50 if p.client_gap_estimated else p.server_ttft_mean
    ev = (
        evidence(r, "client_gap", gap, ">", cfg.frontend_gap_min, big, "s", note=how),
        evidence(
            r,
            "client_gap_share",
            share,
            ">",
            cfg.frontend_gap_share,
            most,
            "ratio",
            note="of the client's TTFT",
        ),
        evidence(
            r, "probe_ttft_mean", p.client_ttft, "", None, None, "s", note="what a client waits"
        ),
        evidence(r, "server_ttft", server, "", None, None, "s", note="what the server reports"),
        evidence(r, "probe_connect_mean", p.connect_mean, "", None, None, "s", note="TCP (+TLS)"),
        evidence(r, "probe_ttfb_mean", p.ttfb_mean, "", None, None, "s", note="request → headers"),
    )
    summary = (
        f"Frontend-bound: a client waits {fmt_value(gap, 's')} more for its first token than "
        f"the server reports ({share:.0%} of the client's {fmt_value(p.client_ttft, 's')}"
        f"{', estimated' if p.client_gap_estimated else ''}): the network, a proxy or the API "
        "server's own work, not the engine"
    )
    margin = breach_margin(
        min(gap / max(cfg.frontend_gap_min, 1e-9), share / cfg.frontend_gap_share)
    )
    # Exact per request (no percentile to estimate); an estimate rests on the page's p50.
    n = (p.page_ttft_n or 0.0) if p.client_gap_estimated else math.inf
    return RuleResult(r, big and most, ev, summary, margin, n)
