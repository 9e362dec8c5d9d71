"""One rule per class. Each returns whether its class holds and every comparison it made.

The latency rules are SLO-relative and partition an over-SLO TTFT between three causes,
so a slow first token always has a name (physics.md, "TTFT ≈ queue wait + prefill"):

* queue-dominated (queue time ≥ half of TTFT) with the KV pool full → ``kv_pressure``;
* queue-dominated with room in the pool → ``queue_bound`` (admission limit: capacity);
* otherwise → ``prefill_bound`` (prefill compute itself is slow).

``kv_pressure`` also holds without an SLO breach when requests are evicted (any
preemption: vLLM preempts only when a block cannot be had) or blocked (usage ≥ 0.90 with
a queue): "waiting rising while KV usage stays near 1 is the exact signature of KV
pressure" (physics.md, "The KV cache"). ``decode_bound`` is per-token latency p99 over
the ITL SLO, with its sub-cause: a tail of slow steps while prefill chunks run
(``prefill_interference``), every step slow (``bandwidth_bound``), or speculative
decoding that stopped multiplying the tokens per step (``spec_decode_regression``).

``stalled`` comes before them all: requests in the engine and, for the whole window, no
first token, no token, no finished request, no prompt token and — where the page counts
them — no engine step. Every engine step emits a token for each decoding sequence and is
observed once in ``vllm:iteration_tokens_total`` (physics.md, "Two programs on one GPU",
"Fitting a server's step time"), so requests that sit in the batch through a window with
no step are not a load problem: the engine core does not step. The gauges are then
frozen at the last step's values (vLLM sets them from the engine's outputs), so the load
rules' readings of them are not findings.

**Sub-causes** name why a class holds; the ones that are about *what changed* compare
the window with its stream's healthy baseline (``baseline``, a ``Derived`` record, when
the caller has one) and otherwise decide on what the window itself shows:

* prefill — the prefill work per request is the uncached prompt, prompt × (1 − hit
  rate) (physics.md: prefill cost grows with the prompt; a cached prefix is prefilled
  once). Against a baseline, whichever factor grew more names it: the miss fraction
  (``prefix_cache_miss``) or the prompt length (``long_prompts``). Without one, a miss
  can be told from a prompt nothing could cache only when caching is off
  (``prefix_cache_miss``); otherwise ``long_prompts``: the computed prompt is longer
  than this server prefills within the SLO.
* queue — requests wait when arrivals outrun completions. Waiting that is mostly
  *deferred* (vLLM 0.20+ ``waiting_by_reason``) is not short of capacity: ``deferred``.
  Against a baseline, the rise of arrivals against the fall of completions not explained
  by longer requests (longer answers or uncached prompts): the larger names
  ``arrival_surge`` or ``capacity_loss``. Without one, lost capacity cannot be shown
  (nothing in one window says how fast the server used to be): ``arrival_surge`` — the
  arrivals are at or above what the server completes (the evidence gives both rates).
* decode — with speculative decoding on, one output event carries 1 + accepted draft
  tokens, so ITL measures gaps between events: decode speed is judged on TPOT (or ITL /
  (1 + accepted per draft) where the page has no TPOT), and a healthy speculating server
  is not decode-bound. ``spec_decode_regression`` when restoring the baseline's
  acceptance would bring the per-token p99 within the SLO, or, without a baseline, when
  fewer than ``spec_accepted_per_draft_low`` draft tokens are accepted per draft (the
  drafter mostly misses); otherwise interference or bandwidth, as without speculation.
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
from app.diagnose.transfer import judge_transfer
from app.model import Derived, HistogramDelta

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
    SLOs, the TTFT and decode judgements several rules share (made once, by
    :func:`inputs`), and the stream's healthy baseline when the caller has one."""

    facts: Facts
    config: DiagnosisConfig
    slo: Slo
    breach: Breach
    queued: bool | None
    queue_ev: tuple[Evidence, ...]
    decode: Breach
    baseline: Derived | None = None


def inputs(f: Facts, cfg: DiagnosisConfig, slo: Slo, baseline: Derived | None = None) -> Inputs:
    """The rules' inputs for one window judged against ``slo`` (and ``baseline``)."""
    queued, queue_ev = queue_dominated(f, cfg)
    return Inputs(
        f, cfg, slo, ttft_breach(f, slo), queued, queue_ev, decode_breach(f, slo), baseline
    )


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
    # Requests blocked for KV blocks wait for capacity; deferred ones (a KV transfer, a
    # LoRA budget) would wait whatever the pool held (vLLM 0.20+ splits the two).
    capacity = f.derived.waiting_capacity_avg
    waiting_signal = "waiting_avg" if capacity is None else "waiting_capacity_avg"
    blocked = f.waiting_avg if capacity is None else capacity
    waiting = _cmp(blocked, ">=", cfg.waiting_min)
    queued_breach = bool(breach.holds and queued and not _deferred(f, cfg)[0])
    holds = _any((preempted, _all((full, _any((waiting, queued_breach))))))
    ev = (
        _ev(r, "preemptions", f.preemptions, ">", 0.0, preempted, note="increase in window"),
        _ev(r, "kv_usage_max", f.kv_max, ">=", cfg.kv_usage_high, full, "ratio"),
        _ev(r, waiting_signal, blocked, ">=", cfg.waiting_min, waiting),
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


def stalled(x: Inputs) -> RuleResult:
    """Requests in the engine and no progress of any kind for the whole window.

    Progress is anything an engine step produces: a first token, a token gap, a
    generated or prompt token, a finished request, and — where the page counts them —
    an engine step (``vllm:iteration_tokens_total`` is observed once per step). Counters
    present and unchanged are evidence; a counter the page does not carry is left out
    (neither for nor against). The running, waiting and KV gauges must not have moved
    either: vLLM sets them from the engine's outputs, so a gauge that moved proves the
    core emitted some (a step still in flight, not a hang). Scrapes that failed cannot
    prove a stall: data quality decides first (``classify``). One step longer than the
    window (a huge prefill chunk on a CPU) reads the same as a hang; a longer window
    tells them apart.
    """
    f = x.facts
    r = C.STALLED
    present = _max_known(f.running_max, f.waiting_max)
    requests = None if present is None else present > 0
    ev = [
        _ev(
            r,
            "requests_in_engine",
            present,
            ">",
            0.0,
            requests,
            note="running or waiting, the largest sample (frozen at the last step's values)",
        )
    ]
    progress: list[tuple[str, float | None, str]] = [
        ("first_tokens", f.ttft_n, "TTFT observations"),
        ("token_gaps", f.itl_n, "ITL observations"),
        ("generation_tokens", f.generation_tokens, "increase"),
        ("prompt_tokens", f.prompt_tokens, "increase"),
        ("finished_requests", f.finished, "increase, every finish reason"),
    ]
    if f.steps_counted:
        progress.append(("engine_steps", f.step_n, "vllm:iteration_tokens_total count"))
    for name, value, note in progress:
        if value is not None:
            ev.append(_ev(r, name, value, "=", 0.0, value == 0, note=note))
    frozen = f.gauges_frozen
    ev.append(
        _ev(
            r,
            "gauges_frozen",
            None if frozen is None else float(frozen),
            "=",
            None if frozen is None else 1.0,
            frozen,
            note="running, waiting and KV usage: every sample the same (1 = yes)",
        )
    )
    moved = [e.holds for e in ev[1:]]
    holds = _all((requests, *moved))
    ev.append(
        _ev(
            r,
            "seconds_without_progress",
            f.covered,
            "",
            None,
            None,
            "s",
            ge=True,
            note="the whole window: when progress stopped is before it",
        )
    )
    what = "no engine step, " if f.steps_counted else ""
    summary = (
        f"Stalled: {fmt_value(present)} request(s) in the engine and {what}no token and no "
        f"finished request for the whole {f.covered:.0f} s window: the engine core is not "
        "stepping (a hang, not load)"
    )
    return RuleResult(r, holds, tuple(ev), summary, 1.0)


def _max_known(*values: float | None) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _deferred(f: Facts, cfg: DiagnosisConfig) -> tuple[bool | None, Evidence | None]:
    """Whether the waiting requests are mostly deferred, not short of capacity (None:
    the page does not split waiting by reason, vLLM before 0.20)."""
    deferred = f.derived.waiting_deferred_avg
    if deferred is None or not f.waiting_avg:
        return None, None
    share = min(1.0, deferred / f.waiting_avg)
    holds = share >= cfg.deferred_share_min
    ev = _ev(
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


def _log_ratio(now: float | None, before: float | None) -> float | None:
    """ln(now / before); None when either is unknown or not positive."""
    if now is None or before is None or now <= 0 or before <= 0:
        return None
    return math.log(now / before)


def _miss_ratio(now: float | None, before: float | None) -> float | None:
    """ln of the miss fraction's ratio, (1 − hit now) / (1 − hit before)."""
    if now is None or before is None:
        return None
    return math.log(max(_MIN_MISS, 1.0 - now) / max(_MIN_MISS, 1.0 - before))


# The miss fraction never reaches 0: a full hit still prefills the prompt's last token.
_MIN_MISS = 1e-3


def _vs(r: C, signal: str, now: float | None, before: float | None, unit: str = "") -> Evidence:
    """A reading of the window beside the baseline (no comparison of its own)."""
    if before is None:
        return _ev(r, signal, now, "", None, None, unit, note="no baseline value")
    ratio = "" if now is None or not before else f" (×{now / before:.2g})"
    return _ev(
        r,
        signal,
        now,
        "",
        None,
        None,
        unit,
        note=f"baseline {fmt_value(before, unit)}{ratio}",
    )


def _queue_sub_cause(x: Inputs) -> tuple[SubCause, list[Evidence]]:
    """Deferred waiting, else what outran what: arrivals or lost completions."""
    f, cfg, base = x.facts, x.config, x.baseline
    r = C.QUEUE_BOUND
    deferred, deferred_ev = _deferred(f, cfg)
    ev = [] if deferred_ev is None else [deferred_ev]
    if deferred:
        return SubCause.DEFERRED, ev
    now = f.derived
    if base is None:
        arrivals, completions = now.arrival_rate, now.completion_rate
        above = None if arrivals is None or completions is None else arrivals >= completions
        ev.append(
            _ev(
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
    rise = _log_ratio(now.arrival_rate, base.arrival_rate)
    drop = _log_ratio(base.completion_rate, now.completion_rate)
    # Fewer completions because each request is more work is not lost capacity.
    work = max(0.0, _log_ratio(now.output_tokens_mean, base.output_tokens_mean) or 0.0)
    work += max(
        0.0, _log_ratio(now.uncached_prompt_tokens_mean, base.uncached_prompt_tokens_mean) or 0.0
    )
    lost = None if drop is None else drop - work
    noise = math.log(cfg.baseline_noise_ratio)
    capacity = lost is not None and lost >= noise and lost > max(0.0, rise or 0.0)
    ev += [
        _vs(r, "arrival_rate", now.arrival_rate, base.arrival_rate, "/s"),
        _vs(r, "completion_rate", now.completion_rate, base.completion_rate, "/s"),
        _ev(
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


def queue_bound(x: Inputs) -> RuleResult:
    """TTFT over SLO, mostly spent waiting for admission, with room in the KV pool (or
    waiting that is deferred, whatever the pool holds)."""
    f, cfg, slo, breach = x.facts, x.config, x.slo, x.breach
    queued, queue_ev = x.queued, x.queue_ev
    r = C.QUEUE_BOUND
    room = _cmp(f.kv_max, "<", cfg.kv_usage_high)
    sub, sub_ev = _queue_sub_cause(x)
    deferred = sub is SubCause.DEFERRED
    ev = (
        _retag(breach.evidence, r),
        *queue_ev,
        _ev(r, "kv_usage_max", f.kv_max, "<", cfg.kv_usage_high, room, "ratio"),
        *sub_ev,
    )
    holds = _all((breach.holds, queued, True if deferred else room))
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
        f"Requests queue for admission: TTFT p99 {_ttft(f)} > {fmt_value(slo.ttft_p99, 's')}"
        f"{share} (waiting avg {fmt_value(f.waiting_avg)}); {why}"
    )
    decisive = 1.0 if f.queue_share is None else min(1.0, abs(f.queue_share - 0.5) * 2)
    margin = _ttft_margin(f, slo, breach) * (0.75 + 0.25 * decisive)
    return RuleResult(r, holds, ev, summary, margin, f.ttft_n or math.inf, sub)


def _prefill_sub_cause(x: Inputs) -> tuple[SubCause, list[Evidence]]:
    """The prefill work per request is prompt × (1 − hit rate): which factor names it."""
    f, cfg, base = x.facts, x.config, x.baseline
    r = C.PREFILL_BOUND
    now = f.derived
    ev: list[Evidence] = []
    if f.prefix_caching_off:
        ev.append(
            _ev(
                r,
                "prefix_caching",
                None,
                "",
                None,
                True,
                note="off: no prefix-cache lookups while prompts were prefilled",
            )
        )
        return SubCause.PREFIX_CACHE_MISS, ev
    if base is not None:
        length = _log_ratio(now.prompt_tokens_mean, base.prompt_tokens_mean)
        miss = _miss_ratio(now.prefix_cache_hit_rate, base.prefix_cache_hit_rate)
        ev += [
            _vs(r, "prompt_tokens_mean", now.prompt_tokens_mean, base.prompt_tokens_mean, "tokens"),
            _vs(
                r,
                "prefix_cache_hit_rate",
                now.prefix_cache_hit_rate,
                base.prefix_cache_hit_rate,
                "ratio",
            ),
        ]
        noise = math.log(cfg.baseline_noise_ratio)
        if miss is not None and miss >= noise and miss > (length or 0.0):
            ev.append(
                _ev(
                    r,
                    "miss_fraction_growth",
                    math.exp(miss),
                    ">",
                    math.exp(max(length or 0.0, noise)),
                    True,
                    note="(1 − hit rate) against the baseline, over the prompt's growth",
                )
            )
            return SubCause.PREFIX_CACHE_MISS, ev
        if length is not None and length >= noise:
            return SubCause.LONG_PROMPTS, ev
    hit = f.prefix_hit_ratio
    ev.append(
        _ev(
            r,
            "prefix_hit_ratio",
            hit,
            "<",
            None if hit is None else cfg.prefix_hit_low,
            None if hit is None else hit < cfg.prefix_hit_low,
            "ratio",
            note="no baseline to tell a miss from a prompt nothing could cache"
            if base is None
            else "neither factor moved against the baseline",
        )
    )
    return SubCause.LONG_PROMPTS, ev


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
    uncached = f.derived.uncached_prompt_tokens_mean
    if uncached is not None:
        ev += (
            _ev(
                r,
                "uncached_prompt_tokens_mean",
                uncached,
                "",
                None,
                None,
                "tokens",
                note="prompt tokens computed per request, not served by the prefix cache",
            ),
        )
    sub, sub_ev = _prefill_sub_cause(x)
    ev += tuple(sub_ev)
    holds = _all((breach.holds, small_queue))
    prompt = "" if f.prompt_len_mean is None else f"; mean prompt {f.prompt_len_mean:.0f} tokens"
    why = (
        "the prefix cache misses what it served before"
        if sub is SubCause.PREFIX_CACHE_MISS and x.baseline is not None
        else "prefix caching is off"
        if sub is SubCause.PREFIX_CACHE_MISS
        else "the computed prompt is long for this server"
    )
    summary = (
        f"Prefill-bound: TTFT p99 {_ttft(f)} > {fmt_value(slo.ttft_p99, 's')} with little "
        f"queueing{prompt}: {why}"
    )
    decisive = 1.0 if f.queue_share is None else min(1.0, abs(f.queue_share - 0.5) * 2)
    margin = _ttft_margin(f, slo, breach) * (0.75 + 0.25 * decisive)
    return RuleResult(r, holds, ev, summary, margin, f.ttft_n or math.inf, sub)


def speculating(f: Facts) -> bool:
    """Speculative decoding drafted tokens in the window."""
    return f.spec_draft_tokens is not None and f.spec_draft_tokens > 0


def decode_breach(f: Facts, slo: Slo) -> Breach:
    """Per-token latency p99 against the ITL SLO.

    Without speculative decoding: ITL. With it, one output event carries 1 + accepted
    draft tokens and ITL is the gap between events, not tokens: TPOT (per request) where
    the page has it, else ITL / (1 + accepted per draft) — the histogram's bounds scaled
    alike, and never proven (the tokens per event vary around that mean).
    """
    r = str(C.DECODE_BOUND)
    accepted = f.derived.spec_decode_accepted_per_draft
    note = "speculative decoding: ITL is the gap between output events of 1 + accepted tokens"
    if speculating(f) and f.tpot_n > 0:
        b = judge(r, "tpot_p99", f.tpot_p99, f.tpot_p99_ge, f.tpot_hist, slo.itl_p99)
        return _noted(b, f"{note}; judged on TPOT")
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
        _ev(C.DECODE_BOUND, "itl_p99", None, ">", slo.itl_p99, False, "s", note="no token gaps"),
    )


def _with_note(e: Evidence, note: str) -> Evidence:
    both = f"{note}; {e.note}" if e.note else note
    return Evidence(e.rule, e.signal, e.value, e.op, e.threshold, e.holds, e.unit, e.ge, both)


def _noted(b: Breach, note: str) -> Breach:
    return Breach(b.holds, b.proven, _with_note(b.evidence, note))


def decode_bound(x: Inputs) -> RuleResult:
    """Per-token latency p99 over the ITL SLO; the sub-cause from speculative decoding's
    acceptance, the shape of ITL and the size of steps."""
    f, cfg, slo, breach = x.facts, x.config, x.slo, x.decode
    r = C.DECODE_BOUND
    ev = [breach.evidence]
    sub, sub_ev = _spec_sub_cause(x)
    if sub is None:
        sub, sub_ev2 = _decode_sub_cause(f, cfg)
        sub_ev += sub_ev2
    ev.extend(sub_ev)
    value = breach.evidence.value
    shown = fmt_value(value, "s", breach.evidence.ge)
    if sub is SubCause.SPEC_DECODE_REGRESSION:
        accepted = f.derived.spec_decode_accepted_per_draft
        summary = (
            f"Decode-bound (speculative decoding): per-token p99 {shown} > "
            f"{fmt_value(slo.itl_p99, 's')} with {fmt_value(accepted)} accepted draft tokens "
            "per step: speculation no longer multiplies the tokens each step yields"
        )
    elif sub is SubCause.PREFILL_INTERFERENCE:
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
    margin = breach_margin((value or 0.0) / slo.itl_p99) * (1.0 if breach.proven else 0.7)
    n = f.tpot_n if breach.evidence.signal == "tpot_p99" else f.itl_n
    return RuleResult(r, breach.holds, tuple(ev), summary, margin, n, sub)


def _spec_sub_cause(x: Inputs) -> tuple[SubCause | None, list[Evidence]]:
    """``spec_decode_regression`` or None (not speculating, or acceptance is not it)."""
    f, cfg, base = x.facts, x.config, x.baseline
    accepted = f.derived.spec_decode_accepted_per_draft
    if not speculating(f) or accepted is None:
        return None, []
    r = C.DECODE_BOUND
    before = None if base is None else base.spec_decode_accepted_per_draft
    value = x.decode.evidence.value
    if before is not None and value is not None:
        # The per-token latency had each step yielded as many tokens as in the baseline.
        restored = value * (1.0 + accepted) / (1.0 + before)
        holds = before > accepted and restored <= x.slo.itl_p99
        ev = [
            _vs(r, "spec_decode_accepted_per_draft", accepted, before),
            _ev(
                r,
                "per_token_p99_at_baseline_acceptance",
                restored,
                "<=",
                x.slo.itl_p99,
                holds,
                "s",
                note="p99 × (1 + accepted now) / (1 + accepted before)",
            ),
        ]
    else:
        holds = accepted < cfg.spec_accepted_per_draft_low
        ev = [
            _ev(
                r,
                "spec_decode_accepted_per_draft",
                accepted,
                "<",
                cfg.spec_accepted_per_draft_low,
                holds,
                note="accepted draft tokens per draft (mean acceptance length − 1)",
            )
        ]
    return (SubCause.SPEC_DECODE_REGRESSION if holds else None), ev


def frontend_bound(x: Inputs) -> RuleResult:
    """A client waits for its first token well beyond what the server reports.

    Only a probe's window carries it (``app.windows.probefacts``: the client gap, per request or
    estimated from the server's p50); every other window has nothing to compare and the
    rule does not hold there. TTFT ≈ queue + prefill on the server (physics.md) — plus,
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
        _ev(r, "client_gap", gap, ">", cfg.frontend_gap_min, big, "s", note=how),
        _ev(
            r,
            "client_gap_share",
            share,
            ">",
            cfg.frontend_gap_share,
            most,
            "ratio",
            note="of the client's TTFT",
        ),
        _ev(r, "probe_ttft_mean", p.client_ttft, "", None, None, "s", note="what a client waits"),
        _ev(r, "server_ttft", server, "", None, None, "s", note="what the server reports"),
        _ev(r, "probe_connect_mean", p.connect_mean, "", None, None, "s", note="TCP (+TLS)"),
        _ev(r, "probe_ttfb_mean", p.ttfb_mean, "", None, None, "s", note="request → headers"),
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


def transfer_bound(x: Inputs) -> RuleResult:
    """The KV transfer of disaggregated prefill/decode expires, fails, or is the larger
    part of a late first token (``transfer.judge_transfer``, whose docstring has the
    physics); never holds on a page without a KV connector."""
    f = x.facts
    v = judge_transfer(f.transfer, x.breach, x.config, x.slo, _ttft(f))
    return RuleResult(C.TRANSFER_BOUND, v.holds, v.evidence, v.summary, v.margin, v.n, v.sub_cause)


# The rule of every problem class (``classes.PROBLEM_CLASSES``); ``classify`` runs them all
# and takes the first that holds, in precedence order.
PROBLEM_RULES: Mapping[DiagnosisClass, Callable[[Inputs], RuleResult]] = {
    C.STALLED: stalled,
    C.TRANSFER_BOUND: transfer_bound,
    C.KV_PRESSURE: kv_pressure,
    C.QUEUE_BOUND: queue_bound,
    C.PREFILL_BOUND: prefill_bound,
    C.DECODE_BOUND: decode_bound,
    C.FRONTEND_BOUND: frontend_bound,
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
