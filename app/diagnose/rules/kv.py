"""``kv_pressure``: requests are evicted (any preemption: vLLM preempts only when a
block cannot be had) or blocked (usage ≥ 0.90 with a queue, or a queue-dominated TTFT
over its SLO with the pool full): "waiting rising while KV usage stays near 1 is the
exact signature of KV pressure" (docs/concepts.md, "The KV cache")."""

from __future__ import annotations

from app.diagnose.classes import DiagnosisClass
from app.diagnose.records import fmt_value
from app.diagnose.rules.compare import all_of, any_of, compare, evidence
from app.diagnose.rules.inputs import Inputs
from app.diagnose.rules.queue import deferred_waiting
from app.diagnose.rules.result import RuleResult

__all__ = ["kv_pressure"]

C = DiagnosisClass


def kv_pressure(x: Inputs) -> RuleResult:
    """Preemptions, or a pool ≥ 0.90 full while requests wait (or TTFT is queue-bound).

    vLLM preempts a running request only when it cannot get a KV block, so a preemption
    proves the pool ran out even if no scrape caught the usage at its peak.
    """
    f, cfg, breach, queued = x.facts, x.config, x.breach, x.queued
    r = C.KV_PRESSURE
    full = compare(f.kv_max, ">=", cfg.kv_usage_high)
    preempted = None if f.preemptions is None else f.preemptions > 0
    # Requests blocked for KV blocks wait for capacity; deferred ones (a KV transfer, a
    # LoRA budget) would wait whatever the pool held (vLLM 0.20+ splits the two).
    capacity = f.derived.waiting_capacity_avg
    waiting_signal = "waiting_avg" if capacity is None else "waiting_capacity_avg"
    blocked = f.waiting_avg if capacity is None else capacity
    waiting = compare(blocked, ">=", cfg.waiting_min)
    queued_breach = bool(breach.holds and queued and not deferred_waiting(f, cfg)[0])
    holds = any_of((preempted, all_of((full, any_of((waiting, queued_breach))))))
    ev = (
        evidence(r, "preemptions", f.preemptions, ">", 0.0, preempted, note="increase in window"),
        evidence(r, "kv_usage_max", f.kv_max, ">=", cfg.kv_usage_high, full, "ratio"),
        evidence(r, waiting_signal, blocked, ">=", cfg.waiting_min, waiting),
    )
    margin = 0.6 + 0.2 * bool(full) + 0.1 * bool(preempted and (waiting or queued_breach))
    margin += 0.1 * bool(f.kv_avg is not None and f.kv_avg >= cfg.kv_usage_high)
    usage = fmt_value(f.kv_max, "ratio")
    parts = [f"KV cache full (max {usage})" if full else f"KV cache ran out (sampled max {usage})"]
    if preempted:
        parts.append(f"{f.preemptions:.0f} preemptions")
    if waiting or queued_breach:
        parts.append(f"{fmt_value(f.waiting_avg)} waiting on average")
    summary = ", ".join(parts) + ": requests wait for cache blocks or are evicted and recomputed"
    return RuleResult(r, holds, ev, summary, margin)
