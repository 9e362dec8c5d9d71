"""One rule per class. Each returns whether its class holds and every comparison it made.

The latency rules are SLO-relative and partition an over-SLO TTFT between three causes,
so a slow first token always has a name (physics.md, "TTFT ≈ queue wait + prefill"):

* queue-dominated (queue time ≥ half of TTFT) with the KV pool full → ``kv_pressure``;
* queue-dominated with room in the pool → ``queue_bound`` (admission limit: capacity);
* otherwise → ``prefill_bound`` (prefill compute itself is slow).

``kv_pressure`` also holds without an SLO breach when requests are evicted (any
preemption: vLLM preempts only when a block cannot be had) or blocked (usage ≥ 0.90 with
a queue): "waiting rising while KV usage stays near 1 is the exact signature of KV
pressure" (physics.md, "The KV cache"). ``decode_bound`` is ITL p99 over SLO, with its
sub-cause: a tail of slow steps while prefill chunks run (``prefill_interference``), or
every step slow (``bandwidth_bound``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from app.diagnose.classes import DiagnosisClass, SubCause
from app.diagnose.config import DiagnosisConfig, Slo
from app.diagnose.facts import Facts
from app.diagnose.records import Evidence, fmt_value
from app.diagnose.slo import Breach, judge

C = DiagnosisClass


@dataclass(frozen=True, slots=True)
class RuleResult:
    """A rule's verdict: ``holds`` (None = cannot tell), its evidence and its strength.

    ``margin`` (0–1) says how clearly the deciding values passed their thresholds;
    ``n`` is the number of observations behind them (for the confidence).
    """

    cls: DiagnosisClass
    holds: bool | None
    evidence: tuple[Evidence, ...]
    summary: str = ""
    margin: float = 0.5
    n: float = math.inf
    sub_cause: SubCause | None = None


@dataclass(frozen=True, slots=True)
class Inputs:
    """What a problem rule looks at: the window's facts, the thresholds, the stream's
    SLOs, and the TTFT judgements several rules share (made once, by :func:`inputs`)."""

    facts: Facts
    config: DiagnosisConfig
    slo: Slo
    breach: Breach
    queued: bool | None
    queue_ev: tuple[Evidence, ...]


def inputs(f: Facts, cfg: DiagnosisConfig, slo: Slo) -> Inputs:
    """The rules' inputs for one window judged against ``slo``."""
    queued, queue_ev = queue_dominated(f, cfg)
    return Inputs(f, cfg, slo, ttft_breach(f, slo), queued, queue_ev)


def breach_margin(ratio: float) -> float:
    """0.5 at the threshold, 1.0 at twice the threshold (log scale)."""
    return 0.5 + 0.5 * min(1.0, max(0.0, math.log2(ratio))) if ratio > 0 else 0.5


def _ev(
    rule: C,
    signal: str,
    value: float | None,
    op: str,
    threshold: float | None,
    holds: bool | None,
    unit: str = "",
    ge: bool = False,
    note: str = "",
) -> Evidence:
    return Evidence(str(rule), signal, value, op, threshold, holds, unit, ge, note)


def _cmp(value: float | None, op: str, threshold: float) -> bool | None:
    if value is None:
        return None
    return {">": value > threshold, ">=": value >= threshold, "<": value < threshold}[op]


def idle(f: Facts, cfg: DiagnosisConfig) -> RuleResult:
    """No request running, waiting, or producing a token anywhere in the window."""
    r = C.IDLE
    activity = f.ttft_n + f.itl_n + (f.finished or 0.0) + (f.generation_tokens or 0.0)
    checks = (
        _ev(r, "running_max", f.running_max, "=", 0.0, _eq0(f.running_max)),
        _ev(r, "waiting_max", f.waiting_max, "=", 0.0, _eq0(f.waiting_max)),
        _ev(
            r,
            "requests_and_tokens",
            activity,
            "=",
            0.0,
            activity == 0,
            note="first tokens + token gaps + finished requests + generated tokens",
        ),
    )
    holds = _all(e.holds for e in checks)
    return RuleResult(r, holds, checks, "Idle: no requests running, waiting or finished", 1.0)


def _any(values: Iterable[bool | None]) -> bool | None:
    """Three-valued OR: True wins, then unknown, else False."""
    vs = list(values)
    if any(v is True for v in vs):
        return True
    return None if any(v is None for v in vs) else False


def _eq0(x: float | None) -> bool | None:
    return None if x is None else x == 0


def _all(values: Iterable[bool | None]) -> bool | None:
    """Three-valued AND: False wins, then unknown, else True."""
    vs = list(values)
    if any(v is False for v in vs):
        return False
    return None if any(v is None for v in vs) else True


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
    ev = _ev(C.PREFILL_BOUND, "ttft_p99", age, ">", slo.ttft_p99, stalled, "s", True, note)
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
    waiting = _ev(
        r,
        "waiting_avg",
        f.waiting_avg,
        ">=",
        cfg.waiting_min,
        _cmp(f.waiting_avg, ">=", cfg.waiting_min),
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
    share = _ev(
        r,
        "queue_share",
        f.queue_share,
        ">=",
        cfg.queue_share_min,
        f.queue_share >= cfg.queue_share_min,
        "ratio",
        note=note,
    )
    return _all((share.holds, waiting.holds)), (share, waiting)


def kv_pressure(x: Inputs) -> RuleResult:
    """Preemptions, or a pool ≥ 0.90 full while requests wait (or TTFT is queue-bound).

    vLLM preempts a running request only when it cannot get a KV block, so a preemption
    proves the pool ran out even if no scrape caught the usage at its peak.
    """
    f, cfg, breach, queued = x.facts, x.config, x.breach, x.queued
    r = C.KV_PRESSURE
    full = _cmp(f.kv_max, ">=", cfg.kv_usage_high)
    preempted = None if f.preemptions is None else f.preemptions > 0
    waiting = _cmp(f.waiting_avg, ">=", cfg.waiting_min)
    queued_breach = bool(breach.holds and queued)
    holds = _any((preempted, _all((full, _any((waiting, queued_breach))))))
    ev = (
        _ev(r, "preemptions", f.preemptions, ">", 0.0, preempted, note="increase in window"),
        _ev(r, "kv_usage_max", f.kv_max, ">=", cfg.kv_usage_high, full, "ratio"),
        _ev(r, "waiting_avg", f.waiting_avg, ">=", cfg.waiting_min, waiting),
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


def queue_bound(x: Inputs) -> RuleResult:
    """TTFT over SLO, mostly spent waiting for admission, with room in the KV pool."""
    f, cfg, slo, breach = x.facts, x.config, x.slo, x.breach
    queued, queue_ev = x.queued, x.queue_ev
    r = C.QUEUE_BOUND
    room = _cmp(f.kv_max, "<", cfg.kv_usage_high)
    ev = (
        _retag(breach.evidence, r),
        *queue_ev,
        _ev(r, "kv_usage_max", f.kv_max, "<", cfg.kv_usage_high, room, "ratio"),
    )
    holds = _all((breach.holds, queued, room))
    share = "" if f.queue_share is None else f", {f.queue_share:.0%} of it queueing"
    summary = (
        f"Requests queue for admission: TTFT p99 {_ttft(f)} > {fmt_value(slo.ttft_p99, 's')}"
        f"{share} (waiting avg {fmt_value(f.waiting_avg)}); the server is at its capacity"
    )
    decisive = 1.0 if f.queue_share is None else min(1.0, abs(f.queue_share - 0.5) * 2)
    margin = _ttft_margin(f, slo, breach) * (0.75 + 0.25 * decisive)
    return RuleResult(r, holds, ev, summary, margin, f.ttft_n or math.inf)


def prefill_bound(x: Inputs) -> RuleResult:
    """TTFT over SLO while queueing is the smaller part: prefill compute is slow."""
    f, slo, breach, queued, queue_ev = x.facts, x.slo, x.breach, x.queued, x.queue_ev
    r = C.PREFILL_BOUND
    small_queue = None if queued is None else not queued
    ev = (breach.evidence, *(_retag(e, r, invert=True) for e in queue_ev))
    if f.prefill_mean is not None:
        ev += (_ev(r, "prefill_time_mean", f.prefill_mean, "", None, None, "s"),)
    if f.prompt_len_mean is not None:
        ev += (_ev(r, "prompt_len_mean", f.prompt_len_mean, "", None, None, "tokens"),)
    holds = _all((breach.holds, small_queue))
    prompt = "" if f.prompt_len_mean is None else f"; mean prompt {f.prompt_len_mean:.0f} tokens"
    summary = (
        f"Prefill-bound: TTFT p99 {_ttft(f)} > {fmt_value(slo.ttft_p99, 's')} with little "
        f"queueing{prompt}"
    )
    decisive = 1.0 if f.queue_share is None else min(1.0, abs(f.queue_share - 0.5) * 2)
    margin = _ttft_margin(f, slo, breach) * (0.75 + 0.25 * decisive)
    return RuleResult(r, holds, ev, summary, margin, f.ttft_n or math.inf)


def decode_bound(x: Inputs) -> RuleResult:
    """ITL p99 over SLO; the sub-cause from the shape of ITL and the size of steps."""
    f, cfg, slo = x.facts, x.config, x.slo
    r = C.DECODE_BOUND
    if f.itl_n > 0:
        breach = judge(str(r), "itl_p99", f.itl_p99, f.itl_p99_ge, f.itl_hist, slo.itl_p99)
    else:
        ev0 = _ev(r, "itl_p99", None, ">", slo.itl_p99, False, "s", note="no token gaps")
        breach = Breach(False, True, ev0)
    ev = [breach.evidence]
    sub, sub_ev = _decode_sub_cause(f, cfg)
    ev.extend(sub_ev)
    if sub is SubCause.PREFILL_INTERFERENCE:
        summary = (
            f"Decode-bound (prefill interference): ITL p99 {_itl(f)} > "
            f"{fmt_value(slo.itl_p99, 's')} while p50 is {fmt_value(f.itl_p50, 's')}: "
            "prefill chunks stall the running streams"
        )
    else:
        summary = (
            f"Decode-bound (memory bandwidth): ITL p50 {fmt_value(f.itl_p50, 's')}, p99 "
            f"{_itl(f)} > {fmt_value(slo.itl_p99, 's')}: every decode step is slow"
        )
    margin = breach_margin((f.itl_p99 or 0.0) / slo.itl_p99) * (1.0 if breach.proven else 0.7)
    return RuleResult(r, breach.holds, tuple(ev), summary, margin, f.itl_n, sub)


# The rule of every problem class (``classes.PROBLEM_CLASSES``); ``classify`` runs them all
# and takes the first that holds, in precedence order.
PROBLEM_RULES: Mapping[DiagnosisClass, Callable[[Inputs], RuleResult]] = {
    C.KV_PRESSURE: kv_pressure,
    C.QUEUE_BOUND: queue_bound,
    C.PREFILL_BOUND: prefill_bound,
    C.DECODE_BOUND: decode_bound,
}


def _decode_sub_cause(f: Facts, cfg: DiagnosisConfig) -> tuple[SubCause, list[Evidence]]:
    """Interference when prefill ran in the window and either the ITL tail is far above
    the median or the typical step already carries a chunk; otherwise bandwidth."""
    r = C.DECODE_BOUND
    ev: list[Evidence] = []
    tail = None
    if f.itl_p50 and f.itl_p99 is not None:
        tail_ratio = f.itl_p99 / f.itl_p50
        tail = tail_ratio >= cfg.itl_tail_ratio
        ev.append(
            _ev(
                r,
                "itl_p99/p50",
                tail_ratio,
                ">=",
                cfg.itl_tail_ratio,
                tail,
                note="a tail of slow steps, not every step",
            )
        )
    prefill = None if f.computed_prompt_tokens is None else f.computed_prompt_tokens > 0
    ev.append(
        _ev(
            r,
            "computed_prompt_tokens",
            f.computed_prompt_tokens,
            ">",
            0.0,
            prefill,
            "tokens",
            note="prefill ran while streams decoded",
        )
    )
    batch = max(f.running_avg or 0.0, 1.0)
    chunk_floor = cfg.step_chunk_ratio * batch
    big_steps = heavy_median = None
    if f.step_p99 is not None:
        big_steps = f.step_p99 >= chunk_floor
        heavy_median = f.step_p50 is not None and f.step_p50 >= chunk_floor
        ev.append(
            _ev(
                r,
                "step_tokens_p99",
                f.step_p99,
                ">=",
                chunk_floor,
                big_steps,
                "tokens",
                note=f"{cfg.step_chunk_ratio:g} × running: steps carry prefill chunks",
            )
        )
        ev.append(
            _ev(
                r,
                "step_tokens_p50",
                f.step_p50,
                ">=",
                chunk_floor,
                heavy_median,
                "tokens",
                note="the typical step carries a chunk",
            )
        )
    chunks = bool(prefill) and big_steps is not False
    interference = chunks and bool(tail or heavy_median)
    return (SubCause.PREFILL_INTERFERENCE if interference else SubCause.BANDWIDTH_BOUND), ev


def _retag(e: Evidence, rule: C, invert: bool = False) -> Evidence:
    """The same comparison seen from another rule (inverted: "is the queue small?")."""
    if not invert:
        return Evidence(
            str(rule), e.signal, e.value, e.op, e.threshold, e.holds, e.unit, e.ge, e.note
        )
    op = {">=": "<", "<": ">=", ">": "<=", "<=": ">"}.get(e.op, e.op)
    holds = None if e.holds is None else not e.holds
    return Evidence(str(rule), e.signal, e.value, op, e.threshold, holds, e.unit, e.ge, e.note)


def _ttft(f: Facts) -> str:
    return fmt_value(f.ttft_p99, "s", f.ttft_p99_ge) if f.ttft_n else "n/a (no first token)"


def _itl(f: Facts) -> str:
    return fmt_value(f.itl_p99, "s", f.itl_p99_ge)


def _ttft_margin(f: Facts, slo: Slo, breach: Breach) -> float:
    """How clearly TTFT passed its SLO; an unproven (interpolated) breach counts less."""
    margin = breach_margin((f.ttft_p99 or 0.0) / slo.ttft_p99) if f.ttft_n else 0.75
    return margin if breach.proven else 0.7 * margin
