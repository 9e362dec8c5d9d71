"""What to change when prompts are slow to prefill, or prefill chunks stall decode: prefix
caching, the prompt, and the step's token budget (``--max-num-batched-tokens``).

Builders of the hint catalog (``hints.CATALOG`` joins them); the numbers, and the
line of docs/concepts.md ("What to change") each traces to:

* ``batched-tokens-down`` — "lower (≈2048) → better ITL": ``itl_friendly_batched_tokens``
  when the steps (p99) are larger; a budget in force at or below it (configured, on the
  page, or vLLM's default) is halved instead, down to ``batched_tokens_min`` — a step's
  time grows with its tokens, so half the chunk is about half the stall it adds — and
  never is the value in force proposed.
* ``batched-tokens-up`` — "higher → better TTFT": a prompt of P uncached tokens takes
  ⌈P / budget⌉ steps; the next power of two ≥ P, at least twice the budget, at most
  ``batched_tokens_max``.
* ``shorter-prompt`` — "prefill cost grows with prompt length: linear plus quadratic":
  at most prompt × SLO / TTFT p99 tokens bring TTFT p99 within the SLO.
"""

from __future__ import annotations

import math

from app.diagnose.facts import Facts
from app.diagnose.hintkit import PREFILL, baseline_value, fmt_flag, fmt_n, fmt_pct, fmt_s
from app.diagnose.hintspec import Context, Made


def _pow2_ceil(x: float) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1.0, x))))


def _uncached_prompt(f: Facts) -> float | None:
    """Prompt tokens computed per request (not served by the prefix cache)."""
    if f.derived.uncached_prompt_tokens_mean is not None:
        return f.derived.uncached_prompt_tokens_mean
    if f.prompt_len_mean is None:
        return None
    return f.prompt_len_mean * (1.0 - (f.prefix_hit_ratio or 0.0))


def _caching_off(x: Context) -> tuple[bool, str]:
    """Prefix caching is off: the page or the configuration says so, or prompts were
    prefilled without a single cache lookup."""
    setting = x.server.enable_prefix_caching
    said = setting.source in ("page", "configured") and setting.value is False
    parts = []
    if said:
        where = "cache_config_info" if setting.source == "page" else "configured"
        parts.append(f"enable_prefix_caching False ({where})")
    if x.facts.prefix_caching_off:
        tokens = x.facts.prompt_tokens or 0.0
        parts.append(f"{fmt_n(tokens)} prompt tokens prefilled and no prefix-cache lookup")
    return bool(said or x.facts.prefix_caching_off), "; ".join(parts)


def prefix_caching(x: Context) -> Made | None:
    off, text = _caching_off(x)
    if not off:
        return None  # on (or not known to be off): enabling it changes nothing
    return Made(
        "vllm serve --enable-prefix-caching (the default changed between releases: check "
        "`vllm serve --help`)",
        text,
        promoted=True,
    )


def stable_prefix(x: Context) -> Made | None:
    if _caching_off(x)[0]:
        return None  # nothing cached to restore: enabling caching comes first
    hit, before = x.facts.prefix_hit_ratio, baseline_value(x, "prefix_cache_hit_rate")
    if hit is None:
        return None
    action = (
        "find what now differs at the start of each prompt (a template change that puts a "
        "date, user or request id before the shared part) and move the shared content "
        "first, byte-identical across requests"
    )
    miss_now, miss_before = max(1e-3, 1 - hit), max(1e-3, 1 - (before or 0.0))
    if before is not None and miss_now >= miss_before * x.config.baseline_noise_ratio:
        # The change's own figure when it is ranked (uncached tokens as measured).
        change = next((c for c in x.changes if c.signal == "prefix_cache_hit_rate"), None)
        ratio = miss_now / miss_before
        if change is not None and change.effect_ratio is not None:
            ratio = change.effect_ratio
        return Made(
            action,
            f"prefix-cache hit rate fell {before:.2f} → {hit:.2f}: uncached prompt tokens "
            f"×{ratio:.2g}",
            promoted=True,
        )
    if hit < x.config.prefix_hit_low:
        return Made(
            action,
            f"prefix-cache hit rate {fmt_pct(hit)} < {fmt_pct(x.config.prefix_hit_low)}: most "
            "prompt tokens are prefilled again",
            promoted=True,
        )
    return None


def shorter_prompt(x: Context) -> Made | None:
    f, cfg = x.facts, x.config
    prompt = f.prompt_len_mean
    if prompt is None:
        return None
    before = baseline_value(x, "prompt_tokens_mean")
    grew = before is not None and before > 0 and prompt >= before * cfg.baseline_noise_ratio
    long = prompt >= cfg.long_prompt_tokens
    if not (grew or long):
        return None
    evidence = f"mean prompt {fmt_n(prompt)} tokens"
    if grew and before is not None:
        evidence += f" (was {fmt_n(before)}: ×{prompt / before:.2g})"
    action = (
        "trim the system prompt; put the shared part first and keep it identical across "
        "requests so the prefix cache can reuse it"
    )
    uncached = _uncached_prompt(f)
    prefill = x.situation in PREFILL
    if prefill and uncached and f.ttft_p99 and f.ttft_p99 > x.slo.ttft_p99:
        goal = uncached * x.slo.ttft_p99 / f.ttft_p99
        action = f"bring the computed prompt toward ≤ {fmt_n(goal)} tokens: " + action
        evidence += (
            f", {fmt_n(uncached)} of them computed: prefill grows at least linearly with the "
            f"prompt, so ≤ {fmt_n(goal)} (× SLO {fmt_s(x.slo.ttft_p99)} / TTFT p99 "
            f"{fmt_s(f.ttft_p99)}) brings TTFT p99 within its SLO"
        )
    return Made(action, evidence, promoted=True)


def batched_up(x: Context) -> Made | None:
    f, cfg = x.facts, x.config
    budget = x.server.max_num_batched_tokens
    uncached = _uncached_prompt(f)
    if uncached is None or budget.value is None:
        return None
    b = float(budget.value)
    if uncached <= b or b >= cfg.batched_tokens_max:
        return None  # a prompt fits one step already, or the budget is as large as advised
    new = min(cfg.batched_tokens_max, max(2 * b, _pow2_ceil(uncached)))
    evidence = (
        f"the mean computed prompt ({fmt_n(uncached)} tokens) takes {math.ceil(uncached / b)} "
        f"steps at {fmt_n(b)} tokens a step, {math.ceil(uncached / new)} at {fmt_n(new)}"
    )
    if budget.assumed and f.step_p99 is not None and f.step_p99 > b * 1.05:
        evidence += (
            f" (steps of {fmt_n(f.step_p99)} tokens, p99, were seen: configure "
            "max_num_batched_tokens to confirm the budget)"
        )
    return Made(
        f"--max-num-batched-tokens {fmt_flag(new)} (now {budget.said()})",
        evidence,
        True,
        ("max_num_batched_tokens", new),
    )


def batched_down(x: Context) -> Made | None:
    f, cfg = x.facts, x.config
    budget = x.server.max_num_batched_tokens
    target = cfg.itl_friendly_batched_tokens
    now = budget.value
    if now is not None and now <= target:
        # At or below the ITL-friendly budget already: half the chunk, never the same.
        target = float(_pow2_ceil(now / 2)) if now / 2 >= cfg.batched_tokens_min else 0.0
        if target <= 0 or target >= now:
            return None  # as small as advised: disaggregation is next
    if f.step_p99 is None or f.step_p99 <= target:
        return None  # the steps are no larger than the budget advised
    evidence = f"steps of {fmt_n(f.step_p99)} tokens (p99"
    evidence += f"; p50 {fmt_n(f.step_p50)})" if f.step_p50 is not None else ")"
    if f.itl_p50 and f.itl_p99 is not None:
        evidence += f" and ITL p99 {fmt_s(f.itl_p99)} = {f.itl_p99 / f.itl_p50:.1f}× p50"
    evidence += ": prefill chunks ride in the decode steps"
    if now is not None and now <= cfg.itl_friendly_batched_tokens:
        evidence += (
            f"; a step's time grows with its tokens, so chunks of {fmt_flag(target)} add "
            f"about half the stall of {fmt_flag(now)}"
        )
    return Made(
        f"--max-num-batched-tokens {fmt_flag(target)} (now {budget.said()})",
        evidence,
        True,
        ("max_num_batched_tokens", target),
    )


def disaggregate(x: Context) -> Made | None:
    f, cfg = x.facts, x.config
    budget = x.server.max_num_batched_tokens
    if budget.assumed or budget.value is None or budget.value > cfg.itl_friendly_batched_tokens:
        return None  # a smaller step budget comes first
    if not f.itl_p50 or f.itl_p99 is None:
        return None
    return Made(
        "separate prefill and decode worker pools (vLLM disaggregated prefill, llm-d, "
        "Dynamo) — only with many GPUs and steady traffic for both",
        f"ITL p99 {fmt_s(f.itl_p99)} = {f.itl_p99 / f.itl_p50:.1f}× p50 with the step budget "
        f"already {budget.said()}",
    )
