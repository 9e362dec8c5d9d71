"""``diagnose_probe(window, config)``: a probe's window judged as a client sees the server.

A probe's stream (``app.windows.probefacts``) has no load gauges: it cannot tell queueing from
prefill, nor a full KV pool from a busy one. It can tell what only a client sees. Order
of decision:

1. **insufficient_data** — no probe answered in the window.
2. **stalled** — every probe in the window timed out without a complete answer while the
   probed server's own ``/metrics`` answered (``probe_page_up``), and its page shows no
   first token and no generated token meanwhile: the API server takes requests, the
   engine produces nothing (the scraped target's own stream says more). Without a
   scraped target, failing probes prove nothing about the engine.
3. **insufficient_data** — more than ``max_failed_scrape_share`` of the probes failed
   (their error kinds are in the notes: refused, timeout, http_status…).
4. The problem classes that hold, by precedence (``classes.VOCABULARY``):
   **prefill_bound** — the client's TTFT p99 is over the SLO, the frontend explains
   less than its share, and the server's own prefill (Ollama's prompt evaluation,
   vLLM's per-request prefill) is at least half of the client's TTFT; no sub-cause (a
   probe's prompt is the probe's, not the users'). **decode_bound** — the client's
   token gaps p99 over the ITL SLO; ``bandwidth_bound`` when the median gap is over it
   too (every step slow: docs/concepts.md's decode ceiling, beside the roofline when the
   probe's ``device`` and model size are given). **frontend_bound** — the client gap
   (``rules.frontend_bound``).
5. A TTFT over the SLO that none of them explains is **insufficient_data**: a probe
   alone cannot say whether the server queued or prefilled (its scraped target's
   streams can).
6. **healthy** — TTFT and token gaps within their SLOs, no frontend gap.

Confidence as ``classify``'s: margin × sqrt(observations / min_observations) × coverage;
an exact per-request comparison counts as fully observed.
"""

from __future__ import annotations

from app.diagnose import rules
from app.diagnose.assemble import Decision, assemble, confidence
from app.diagnose.classes import PROBLEM_CLASSES, DiagnosisClass, SubCause
from app.diagnose.config import DiagnosisConfig, Slo
from app.diagnose.facts import derive
from app.diagnose.records import Diagnosis, Evidence, Roofline, fmt_value
from app.diagnose.roofline import roofline
from app.diagnose.server import ServerSettings, resolve
from app.diagnose.slo import Breach, judge
from app.model import Window
from app.windows.probefacts import ProbeFacts, is_probe_window

__all__ = ["diagnose_probe", "is_probe_window"]

C = DiagnosisClass


def _ev(
    rule: DiagnosisClass,
    signal: str,
    value: float | None,
    op: str = "",
    threshold: float | None = None,
    holds: bool | None = None,
    unit: str = "",
    note: str = "",
) -> Evidence:
    return Evidence(str(rule), signal, value, op, threshold, holds, unit, False, note)


def _stalled(p: ProbeFacts) -> rules.RuleResult:
    r = C.STALLED
    every = p.attempts > 0 and p.timeouts == p.attempts
    page = p.page_up is not None
    up = page and p.page_up == p.attempts
    progress = (p.page_ttft_n or 0.0) + (p.page_generation_tokens or 0.0)
    still = page and p.page_generation_tokens is not None and progress == 0
    ev = (
        _ev(r, "probe_timeouts", p.timeouts, "=", p.attempts, every, note="every probe timed out"),
        _ev(
            r,
            "probe_page_up",
            p.page_up,
            "=",
            p.attempts,
            up if page else None,
            note="…while the server's /metrics answered",
        ),
        _ev(
            r,
            "page_progress",
            progress if page else None,
            "=",
            0.0,
            still if page else None,
            note="first tokens + generated tokens on the server's page meanwhile",
        ),
    )
    summary = (
        f"Stalled: every probe ({p.attempts:.0f}) timed out while the server's /metrics "
        "answered and showed no token: the API server takes requests, the engine produces "
        "nothing (a hang, not load)"
    )
    return rules.RuleResult(r, bool(every and up and still), ev, summary, 1.0)


def _ttft(p: ProbeFacts, slo: Slo) -> rules.RuleResult:
    r = C.PREFILL_BOUND
    b = judge(str(r), "probe_ttft_p99", p.ttft_p99, p.ttft_p99_ge, p.ttft_hist, slo.ttft_p99)
    share = None
    if p.server_prefill_mean is not None and p.ttft_mean:
        share = p.server_prefill_mean / p.ttft_mean
    mostly = None if share is None else share >= 0.5
    ev = (
        b.evidence,
        _ev(r, "server_prefill_share", share, ">=", 0.5, mostly, "ratio",
            note="the server's own prefill (prompt evaluation) / the client's TTFT mean"),
        _ev(r, "server_prefill_tokens_per_s", p.server_prefill_tps, unit="tok/s"),
    )  # fmt: skip
    summary = (
        f"Prefill-bound as a client sees it: probe TTFT p99 "
        f"{fmt_value(p.ttft_p99, 's', p.ttft_p99_ge)} > {fmt_value(slo.ttft_p99, 's')}, "
        f"{fmt_value(share, 'ratio')} of it the server's own prefill"
        f" ({fmt_value(p.server_prefill_tps, 'tok/s')})"
    )
    margin = rules.breach_margin((p.ttft_p99 or 0.0) / slo.ttft_p99) * (1.0 if b.proven else 0.7)
    return rules.RuleResult(r, bool(b.holds and mostly), ev, summary, margin, p.ttft_n)


def _decode(p: ProbeFacts, slo: Slo, roof: Roofline | None) -> tuple[rules.RuleResult, Breach]:
    r = C.DECODE_BOUND
    if p.itl_n <= 0:
        b = Breach(False, True, _ev(r, "probe_itl_p99", None, ">", slo.itl_p99, False, "s",
                                    note="no token gaps (one token per answer)"))  # fmt: skip
    else:
        b = judge(str(r), "probe_itl_p99", p.itl_p99, p.itl_p99_ge, p.itl_hist, slo.itl_p99)
    every = p.itl_p50 is not None and p.itl_p50 > slo.itl_p99
    ev: tuple[Evidence, ...] = (
        b.evidence,
        _ev(r, "probe_itl_p50", p.itl_p50, ">", slo.itl_p99, every, "s",
            note="every gap slow: the decode step itself"),
        _ev(r, "decode_tokens_per_s", p.measured_decode_tps, unit="tok/s",
            note="the server's own" if p.server_decode_tps else "as the client received them"),
    )  # fmt: skip
    if roof is not None:
        ev += (
            _ev(r, "decode_ceiling_tokens_per_s", roof.ceiling_tok_s, unit="tok/s",
                note=f"{roof.device}: bandwidth / weight bytes"),
        )  # fmt: skip
    summary = (
        f"Decode-bound as a client sees it: token gaps p99 "
        f"{fmt_value(p.itl_p99, 's', p.itl_p99_ge)} > {fmt_value(slo.itl_p99, 's')}, median "
        f"{fmt_value(p.itl_p50, 's')} ({fmt_value(p.measured_decode_tps, 'tok/s')})"
    )
    margin = rules.breach_margin((p.itl_p99 or 0.0) / slo.itl_p99) * (1.0 if b.proven else 0.7)
    sub = SubCause.BANDWIDTH_BOUND if every else None
    return rules.RuleResult(r, b.holds, ev, summary, margin, p.itl_n, sub), b


def diagnose_probe(
    window: Window,
    config: DiagnosisConfig,
    *,
    failed_scrapes: int = 0,
    attempted_scrapes: int | None = None,
) -> Diagnosis:
    """Classify one window of a probe's stream (module docstring). The failed and
    attempted counts are the caller's record of the probe's answers; the window's own
    counters say the same and are what is judged."""
    facts = derive(window)
    p = facts.probe
    if p is None:
        raise ValueError("not a probe's window (no probe_attempts)")
    slo = config.slo_for(window.target, window.model_name)
    hw = config.hardware_for(window.target)
    tps = p.measured_decode_tps
    roof = None if hw is None else roofline(hw, 1.0 / tps if tps else None)
    coverage = min(1.0, facts.coverage)
    judged = rules.inputs(facts, config, slo)
    decode, decode_breach = _decode(p, slo, roof)
    results = {
        C.STALLED: _stalled(p),
        C.PREFILL_BOUND: _ttft(p, slo),
        C.DECODE_BOUND: decode,
        C.FRONTEND_BOUND: rules.frontend_bound(judged),
    }
    ttft_breach = judge(
        str(C.PREFILL_BOUND), "probe_ttft_p99", p.ttft_p99, p.ttft_p99_ge, p.ttft_hist,
        slo.ttft_p99,
    )  # fmt: skip
    failed = p.failures / p.attempts if p.attempts else 0.0
    evidence: list[Evidence] = [
        _ev(C.INSUFFICIENT_DATA, "probe_attempts", p.attempts, ">", 0.0, p.attempts > 0),
        _ev(C.INSUFFICIENT_DATA, "probe_failed_share", failed, "<=",
            config.max_failed_scrape_share, failed <= config.max_failed_scrape_share, "ratio",
            note=f"{p.failures:.0f} of {p.attempts:.0f}"),
    ]  # fmt: skip
    for res in results.values():
        evidence.extend(res.evidence)
    decision = _decide(p, results, ttft_breach, failed, slo, config, coverage)
    return assemble(
        window,
        decision,
        facts=facts,
        config=config,
        slo=slo,
        roof=roof,
        evidence=tuple(evidence),
        notes=_notes(p, roof),
        latencies=p,
        ttft_slo=ttft_breach.verdict,
        itl_slo=decode_breach.verdict,
        hint_server=resolve(ServerSettings()),
    )


def _decide(
    p: ProbeFacts,
    results: dict[DiagnosisClass, rules.RuleResult],
    ttft_breach: Breach,
    failed: float,
    slo: Slo,
    config: DiagnosisConfig,
    coverage: float,
) -> Decision:
    """The class (module docstring's order of decision); the problem rules that hold
    are findings only beside a problem class."""
    firing = [results[c] for c in PROBLEM_CLASSES if c in results and results[c].holds]
    stalled = results[C.STALLED]
    if p.attempts <= 0:
        return Decision(C.INSUFFICIENT_DATA, "Insufficient data: no probe answered", 1.0)
    if stalled.holds:
        return Decision(stalled.cls, stalled.summary, round(coverage, 2), stalled, (stalled,))
    if failed > config.max_failed_scrape_share:
        summary = f"Insufficient data: {p.failures:.0f} of {p.attempts:.0f} probes failed"
        return Decision(C.INSUFFICIENT_DATA, summary, 1.0)
    if firing:
        primary = firing[0]
        sure = confidence(primary.margin, primary.n, config, coverage)
        return Decision(primary.cls, primary.summary, sure, primary, firing)
    if ttft_breach.holds:
        summary = (
            f"Insufficient data: probe TTFT p99 {fmt_value(p.ttft_p99, 's', p.ttft_p99_ge)} "
            f"> {fmt_value(slo.ttft_p99, 's')}, mostly the server's own time: a probe "
            "cannot tell queueing from prefill (see the server's scraped streams)"
        )
        return Decision(C.INSUFFICIENT_DATA, summary, 1.0)
    summary = (
        f"Within SLO as a client sees it: TTFT p99 {fmt_value(p.ttft_p99, 's')}, token "
        f"gaps p99 {fmt_value(p.itl_p99, 's')}"
        + (
            ""
            if p.client_gap is None
            else f", {fmt_value(p.client_gap, 's')} more than the server reports"
        )
    )
    return Decision(C.HEALTHY, summary, confidence(0.75, p.ttft_n, config, coverage))


def _notes(p: ProbeFacts, roof: Roofline | None) -> tuple[str, ...]:
    out = []
    if p.failures:
        timed = f", {p.timeouts:.0f} timed out" if p.timeouts else ""
        out.append(f"{p.failures:.0f} of {p.attempts:.0f} probes failed{timed}")
    if p.client_gap is not None and p.client_gap_estimated:
        out.append(
            "the server's TTFT is its page's p50 over the window (an estimate): run vLLM with "
            "--enable-per-request-metrics for the probe's own request"
        )
    if p.ttft_n and p.ttft_n < 20:
        out.append(f"{p.ttft_n:.0f} probe answers: their p99 is little more than the maximum")
    if roof is not None:
        out.append(roof.text())
    return tuple(out)
