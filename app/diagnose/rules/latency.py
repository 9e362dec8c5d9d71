"""The judgements several rules share: TTFT against its SLO (or, with no first token,
the oldest waiting age), whether queueing is the larger part of it, and the per-token
latency against the ITL SLO (TPOT under speculative decoding)."""

from __future__ import annotations

from app.diagnose.classes import DiagnosisClass
from app.diagnose.config import DiagnosisConfig, Slo
from app.diagnose.facts import Facts
from app.diagnose.records import Evidence
from app.diagnose.rules.compare import all_of, compare, evidence
from app.diagnose.slo import Breach, judge
from app.model import HistogramDelta

__all__ = ["decode_breach", "queue_dominated", "speculating", "ttft_breach", "waiting_age"]

C = DiagnosisClass


def ttft_breach(f: Facts, slo: Slo) -> Breach:
    """TTFT p99 over SLO; with no first token in the window, the oldest waiting age.

    A request seen waiting at a scrape and never given a first token has a TTFT at
    least as long as the span of scrapes that saw requests waiting — at least
    (sum / max − 1) scrape intervals, from the gauge's average and maximum. A queue that
    serves nobody (a stuck scheduler while /health stays 200) is then not "healthy".
    Requests still in prefill are not counted here: their TTFT enters the histogram
    when their first token comes, once, like every other request's.
    """
    if f.ttft_n > 0:
        rule = str(C.PREFILL_BOUND)
        return judge(rule, "ttft_p99", f.ttft_p99, f.ttft_p99_ge, f.ttft_hist, slo.ttft_p99)
    age = waiting_age(f)
    stalled = age is not None and age > slo.ttft_p99
    note = "no first token in the window; value: the oldest waiting request's age"
    ev = evidence(C.PREFILL_BOUND, "ttft_p99", age, ">", slo.ttft_p99, stalled, "s", True, note)
    return Breach(stalled, True, ev)


def waiting_age(f: Facts) -> float | None:
    """Lower bound of how long a waiting request has gone without a first token."""
    if f.samples <= 0 or not f.waiting_avg or not f.waiting_max:
        return None
    seen = f.waiting_avg * f.samples / f.waiting_max  # scrapes that saw a waiting request
    return max(0.0, seen - 1.0) * f.covered / f.samples


def queue_dominated(f: Facts, cfg: DiagnosisConfig) -> tuple[bool | None, tuple[Evidence, ...]]:
    """Requests wait (avg ≥ 1) and waiting is the larger part of TTFT.

    With no first token to split, waiting alone decides.
    """
    r = C.QUEUE_BOUND
    waiting = evidence(
        r,
        "waiting_avg",
        f.waiting_avg,
        ">=",
        cfg.waiting_min,
        compare(f.waiting_avg, ">=", cfg.waiting_min),
    )
    if f.queue_share is None:
        return waiting.holds, (waiting,)
    note = {
        "request_seconds": "waiting avg / (waiting avg + first tokens/s × prefill time mean)",
        "little": "Little's law: (waiting avg / first tokens/s) / TTFT mean (no prefill_time)",
        "queue_time": "queue_time mean / TTFT mean (finished requests; no waiting gauge)",
    }.get(f.queue_share_source or "", "")
    if f.queue_share_source != "queue_time" and f.queue_time_share is not None:
        note += f"; queue_time histogram (finished requests) says {f.queue_time_share:.0%}"
    share = evidence(
        r,
        "queue_share",
        f.queue_share,
        ">=",
        cfg.queue_share_min,
        f.queue_share >= cfg.queue_share_min,
        "ratio",
        note=note,
    )
    return all_of((share.holds, waiting.holds)), (share, waiting)


def speculating(f: Facts) -> bool:
    """Speculative decoding drafted tokens in the window (vLLM's counters), or the page
    gives an accept length (SGLang's gauge, which counts no drafts)."""
    if f.spec_draft_tokens is not None:
        return f.spec_draft_tokens > 0
    return f.derived.spec_decode_accepted_per_draft is not None


def decode_breach(f: Facts, slo: Slo) -> Breach:
    """Per-token latency p99 against the ITL SLO.

    Without speculative decoding: ITL. With it, one output event carries 1 + accepted
    draft tokens and ITL is the gap between events, not tokens: TPOT (per request) where
    the page has it, else ITL / (1 + accepted per draft) — the histogram's bounds scaled
    alike, and never proven (the tokens per event vary around that mean).

    SGLang's ITL is already per token (an event's interval divided among its tokens), so
    a step that accepts no draft puts its whole interval on one token: its p99 is the
    step time, no request's time per output token. SGLang has no TPOT histogram, so a
    speculating SGLang stream is judged on the window's mean time per output token (the
    ITL histogram's sum / count: each request's TPOT is the mean of its tokens' gaps),
    never proven — the p99 over requests is not on the page.
    """
    r = str(C.DECODE_BOUND)
    accepted = f.derived.spec_decode_accepted_per_draft
    note = "speculative decoding: ITL is the gap between output events of 1 + accepted tokens"
    if speculating(f) and f.tpot_n > 0:
        b = judge(r, "tpot_p99", f.tpot_p99, f.tpot_p99_ge, f.tpot_hist, slo.itl_p99)
        return _noted(b, f"{note}; judged on TPOT")
    if speculating(f) and f.itl_per_token and f.itl_n > 0 and f.itl_mean is not None:
        per_token = f"{note}; SGLang's ITL is per token, its p99 a step: judged on the mean"
        ev = evidence(
            C.DECODE_BOUND,
            "itl_mean_per_token",
            f.itl_mean,
            ">",
            slo.itl_p99,
            f.itl_mean > slo.itl_p99,
            "s",
            note=per_token,
        )
        return Breach(ev.holds is True, False, ev)
    if speculating(f) and f.itl_n > 0 and accepted is not None and f.itl_p99 is not None:
        k = 1.0 + accepted
        hist = None
        if f.itl_hist is not None:
            h = f.itl_hist
            hist = HistogramDelta(tuple(b / k for b in h.bounds), h.buckets, h.sum / k, h.count)
        b = judge(r, "itl_p99_per_token", f.itl_p99 / k, f.itl_p99_ge, hist, slo.itl_p99)
        return Breach(b.holds, False, _with_note(b.evidence, f"{note}; ITL p99 / {k:.2f}"))
    if f.itl_n > 0:
        return judge(r, "itl_p99", f.itl_p99, f.itl_p99_ge, f.itl_hist, slo.itl_p99)
    return Breach(
        False,
        True,
        evidence(
            C.DECODE_BOUND, "itl_p99", None, ">", slo.itl_p99, False, "s", note="no token gaps"
        ),
    )


def _with_note(e: Evidence, note: str) -> Evidence:
    both = f"{note}; {e.note}" if e.note else note
    return Evidence(e.rule, e.signal, e.value, e.op, e.threshold, e.holds, e.unit, e.ge, both)


def _noted(b: Breach, note: str) -> Breach:
    return Breach(b.holds, b.proven, _with_note(b.evidence, note))
