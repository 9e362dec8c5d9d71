"""``prefill_bound``: TTFT over its SLO while queueing is the smaller part — prefill
compute itself is slow.

Sub-causes: the prefill work per request is the uncached prompt, prompt × (1 − hit
rate) (docs/concepts.md: prefill cost grows with the prompt; a cached prefix is prefilled
once). Against a baseline, whichever factor grew more names it: the miss fraction
(``prefix_cache_miss``) or the prompt length (``long_prompts``). Without one, a miss
can be told from a prompt nothing could cache only when caching is off
(``prefix_cache_miss``); otherwise ``long_prompts``: the computed prompt is longer than
this server prefills within the SLO.
"""

from __future__ import annotations

import math

from app.diagnose.classes import DiagnosisClass, SubCause
from app.diagnose.records import Evidence, fmt_value
from app.diagnose.rules.compare import (
    all_of,
    beside_baseline,
    evidence,
    log_ratio,
    retag,
    ttft_text,
)
from app.diagnose.rules.inputs import Inputs
from app.diagnose.rules.result import RuleResult, ttft_margin

__all__ = ["prefill_bound"]

C = DiagnosisClass


def prefill_bound(x: Inputs) -> RuleResult:
    """TTFT over SLO while queueing is the smaller part: prefill compute is slow."""
    f, slo, breach, queued, queue_ev = x.facts, x.slo, x.breach, x.queued, x.queue_ev
    r = C.PREFILL_BOUND
    small_queue = None if queued is None else not queued
    ev = (breach.evidence, *(retag(e, r, invert=True) for e in queue_ev))
    if f.prefill_mean is not None:
        ev += (evidence(r, "prefill_time_mean", f.prefill_mean, "", None, None, "s"),)
    if f.prompt_len_mean is not None:
        ev += (evidence(r, "prompt_len_mean", f.prompt_len_mean, "", None, None, "tokens"),)
    uncached = f.derived.uncached_prompt_tokens_mean
    if uncached is not None:
        ev += (
            evidence(
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
    holds = all_of((breach.holds, small_queue))
    prompt = "" if f.prompt_len_mean is None else f"; mean prompt {f.prompt_len_mean:.0f} tokens"
    why = (
        "the prefix cache misses what it served before"
        if sub is SubCause.PREFIX_CACHE_MISS and x.baseline is not None
        else "prefix caching is off"
        if sub is SubCause.PREFIX_CACHE_MISS
        else "the computed prompt is long for this server"
    )
    summary = (
        f"Prefill-bound: TTFT p99 {ttft_text(f)} > {fmt_value(slo.ttft_p99, 's')} with little "
        f"queueing{prompt}: {why}"
    )
    decisive = 1.0 if f.queue_share is None else min(1.0, abs(f.queue_share - 0.5) * 2)
    margin = ttft_margin(f, slo, breach) * (0.75 + 0.25 * decisive)
    return RuleResult(r, holds, ev, summary, margin, f.ttft_n or math.inf, sub)


def _prefill_sub_cause(x: Inputs) -> tuple[SubCause, list[Evidence]]:
    """The prefill work per request is prompt × (1 − hit rate): which factor names it."""
    f, cfg, base = x.facts, x.config, x.baseline
    r = C.PREFILL_BOUND
    now = f.derived
    ev: list[Evidence] = []
    if f.prefix_caching_off:
        ev.append(
            evidence(
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
        length = log_ratio(now.prompt_tokens_mean, base.prompt_tokens_mean)
        miss = _miss_ratio(now.prefix_cache_hit_rate, base.prefix_cache_hit_rate)
        ev += [
            beside_baseline(
                r, "prompt_tokens_mean", now.prompt_tokens_mean, base.prompt_tokens_mean, "tokens"
            ),
            beside_baseline(
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
                evidence(
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
        evidence(
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


def _miss_ratio(now: float | None, before: float | None) -> float | None:
    """ln of the miss fraction's ratio, (1 − hit now) / (1 − hit before)."""
    if now is None or before is None:
        return None
    return math.log(max(_MIN_MISS, 1.0 - now) / max(_MIN_MISS, 1.0 - before))


_MIN_MISS = 1e-3
