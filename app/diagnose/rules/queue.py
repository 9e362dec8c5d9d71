"""``queue_bound``: TTFT over its SLO, mostly spent waiting for admission, with room in
the KV pool — the admission limit: capacity.

Sub-causes: requests wait when arrivals outrun completions. Waiting that is mostly
*deferred* (vLLM 0.20+ ``waiting_by_reason``) is not short of capacity: ``deferred``.
Against a baseline, the rise of arrivals against the fall of completions not explained
by longer requests (longer answers or uncached prompts): the larger names
``arrival_surge`` or ``capacity_loss``. Without one, lost capacity cannot be shown
(nothing in one window says how fast the server used to be): ``arrival_surge`` — the
arrivals are at or above what the server completes (the evidence gives both rates).
"""

from __future__ import annotations

import math

from app.diagnose.classes import DiagnosisClass, SubCause
from app.diagnose.config import DiagnosisConfig
from app.diagnose.facts import Facts
from app.diagnose.records import Evidence, fmt_value
from app.diagnose.rules.compare import (
    all_of,
    beside_baseline,
    compare,
    evidence,
    log_ratio,
    retag,
    ttft_text,
)
from app.diagnose.rules.inputs import Inputs
from app.diagnose.rules.result import RuleResult, ttft_margin

__all__ = ["deferred_waiting", "queue_bound"]

C = DiagnosisClass


def queue_bound(x: Inputs) -> RuleResult:
    """TTFT over SLO, mostly spent waiting for admission, with room in the KV pool (or
    waiting that is deferred, whatever the pool holds)."""
    f, cfg, slo, breach = x.facts, x.config, x.slo, x.breach
    queued, queue_ev = x.queued, x.queue_ev
    r = C.QUEUE_BOUND
    room = compare(f.kv_max, "<", cfg.kv_usage_high)
    sub, sub_ev = _queue_sub_cause(x)
    deferred = sub is SubCause.DEFERRED
    ev = (
        retag(breach.evidence, r),
        *queue_ev,
        evidence(r, "kv_usage_max", f.kv_max, "<", cfg.kv_usage_high, room, "ratio"),
        *sub_ev,
    )
    holds = all_of((breach.holds, queued, True if deferred else room))
    share = "" if f.queue_share is None else f", {f.queue_share:.0%} of it queueing"
    why = {
        SubCause.DEFERRED: "admission is deferred (KV transfer, LoRA budget, blocked "
        "requests), not short of capacity",
        SubCause.CAPACITY_LOSS: "the server completes fewer requests than before at the "
        "same arrivals: it lost capacity",
        SubCause.ARRIVAL_SURGE: "more requests arrive than the server completes: it is at "
        "its capacity",
    }[sub]
    arrivals, completions = f.derived.arrival_rate, f.derived.completion_rate
    draining = arrivals is not None and completions is not None and arrivals < completions
    if sub is SubCause.ARRIVAL_SURGE and draining:
        why = "the queue drains (arrivals below completions now): a backlog left by arrivals "
        why += "above the server's capacity"
    summary = (
        f"Requests queue for admission: TTFT p99 {ttft_text(f)} > {fmt_value(slo.ttft_p99, 's')}"
        f"{share} (waiting avg {fmt_value(f.waiting_avg)}); {why}"
    )
    decisive = 1.0 if f.queue_share is None else min(1.0, abs(f.queue_share - 0.5) * 2)
    margin = ttft_margin(f, slo, breach) * (0.75 + 0.25 * decisive)
    return RuleResult(r, holds, ev, summary, margin, f.ttft_n or math.inf, sub)


def _queue_sub_cause(x: Inputs) -> tuple[SubCause, list[Evidence]]:
    """Deferred waiting, else what outran what: arrivals or lost completions."""
    f, cfg, base = x.facts, x.config, x.baseline
    r = C.QUEUE_BOUND
    deferred, deferred_ev = deferred_waiting(f, cfg)
    ev = [] if deferred_ev is None else [deferred_ev]
    if deferred:
        return SubCause.DEFERRED, ev
    now = f.derived
    if base is None:
        arrivals, completions = now.arrival_rate, now.completion_rate
        above = None if arrivals is None or completions is None else arrivals >= completions
        ev.append(
            evidence(
                r,
                "arrival_rate",
                arrivals,
                ">=",
                None if above is None else completions,
                above,
                "/s",
                note="estimated arrivals against completions/s (no baseline: lost capacity "
                "cannot be told from more demand)",
            )
        )
        return SubCause.ARRIVAL_SURGE, ev
    rise = log_ratio(now.arrival_rate, base.arrival_rate)
    drop = log_ratio(base.completion_rate, now.completion_rate)
    # Fewer completions because each request is more work is not lost capacity.
    work = max(0.0, log_ratio(now.output_tokens_mean, base.output_tokens_mean) or 0.0)
    work += max(
        0.0, log_ratio(now.uncached_prompt_tokens_mean, base.uncached_prompt_tokens_mean) or 0.0
    )
    lost = None if drop is None else drop - work
    noise = math.log(cfg.baseline_noise_ratio)
    capacity = lost is not None and lost >= noise and lost > max(0.0, rise or 0.0)
    ev += [
        beside_baseline(r, "arrival_rate", now.arrival_rate, base.arrival_rate, "/s"),
        beside_baseline(r, "completion_rate", now.completion_rate, base.completion_rate, "/s"),
        evidence(
            r,
            "completions_lost",
            None if lost is None else math.exp(lost),
            ">",
            None
            if lost is None
            else max(cfg.baseline_noise_ratio, math.exp(max(0.0, rise or 0.0))),
            capacity if lost is not None else None,
            note="baseline completions / now, over the longer work per request; against "
            "the rise of arrivals",
        ),
    ]
    return (SubCause.CAPACITY_LOSS if capacity else SubCause.ARRIVAL_SURGE), ev


def deferred_waiting(f: Facts, cfg: DiagnosisConfig) -> tuple[bool | None, Evidence | None]:
    """Whether the waiting requests are mostly deferred, not short of capacity (None:
    the page does not split waiting by reason, vLLM before 0.20)."""
    deferred = f.derived.waiting_deferred_avg
    if deferred is None or not f.waiting_avg:
        return None, None
    share = min(1.0, deferred / f.waiting_avg)
    holds = share >= cfg.deferred_share_min
    ev = evidence(
        C.QUEUE_BOUND,
        "waiting_deferred_share",
        share,
        ">=",
        cfg.deferred_share_min,
        holds,
        "ratio",
        note="deferred (KV transfer, LoRA budget, blocked) / all waiting: not capacity",
    )
    return holds, ev
