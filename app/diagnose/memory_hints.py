"""What to change when memory binds: the KV pool (its share of the GPU, fp8, the context
cap, the batch size), the bytes of the weights each decode step reads, and the
speculative drafter that shares that read among more tokens.

Builders of the hint catalog (``hints.CATALOG`` joins them); the numbers, and the
line of docs/concepts.md ("What to change") each traces to:

* ``max-num-seqs-up`` — "throughput grows nearly linearly with batch size until the KV
  pool runs out": the limit (running reached it) × ``kv_usage_high`` / KV usage max
  sequences fit, at most ``max_num_seqs_step`` × the limit.
* ``max-num-seqs-down`` — KV: "KV in use ∝ requests in flight × KV per request": running
  avg × ``kv_usage_high`` / KV usage avg fit; bandwidth: "each decode step reads all
  weights … re-reads all earlier K/V": step ≈ weight read + batch × KV read, so the batch
  whose ITL p50 × (today's p99/p50) meets the SLO is running × (SLO / tail − weight read)
  / (ITL p50 − weight read) (the weight read from the roofline, else 0: an upper bound).
* ``gpu-memory-utilization`` — "the KV pool is sized once at start-up
  (``--gpu-memory-utilization``)": pool = (u − w) × memory, w the share of memory that is
  not KV (weights, activations), so raising u to u′ adds num_gpu_blocks × (u′ − u) /
  (u − w) blocks of block_size tokens; w = weight bytes / memory when the GPU and model
  are known (activations make the true gain a little larger), else 0 (a lower bound).
  u′ is what today's demand needs — running + waiting × KV per running request (KV
  usage avg × pool / running avg), at ``kv_usage_high`` — in steps of 0.05, at least u +
  0.05, at most ``gpu_memory_utilization_max``.
* ``fp8-kv-cache`` — "bytes per token = 2 × layers × kv_heads × head_dim × bytes per
  element": 8 bit doubles the tokens of the same pool.
* ``quantize-weights`` / ``faster-memory`` — "single-stream decode tokens/s ≤ memory
  bandwidth / bytes of weights; quantising to 8 bit roughly doubles the ceiling".
"""

from __future__ import annotations

import math

from app.diagnose.facts import Facts
from app.diagnose.hintkit import (
    BANDWIDTH,
    KV,
    baseline_value,
    fmt_flag,
    fmt_n,
    fmt_pct,
    fmt_s,
    requests_wait,
)
from app.diagnose.hintspec import Context, Made
from app.diagnose.server import Setting


def _limit_words(setting: Setting) -> str:
    """How a hint names the limit a setting sets."""
    if setting.assumed:
        return f"vLLM's default limit ({setting.origin()}; configure it to be sure)"
    return "the configured limit" if setting.source == "configured" else "the server's limit"


def _context(f: Facts) -> tuple[float, float, float] | None:
    """(prompt + output, prompt, output) mean tokens of a request."""
    if f.prompt_len_mean is None:
        return None
    out = f.gen_len_mean or 0.0
    return f.prompt_len_mean + out, f.prompt_len_mean, out


def _long_context(x: Context) -> tuple[bool, str]:
    ctx = _context(x.facts)
    if ctx is None:
        return False, ""
    total, prompt, out = ctx
    text = f"mean context {fmt_n(total)} tokens (prompt {fmt_n(prompt)} + output {fmt_n(out)})"
    return total >= x.config.long_context_tokens, text


def _kv_full(x: Context) -> tuple[bool, str]:
    f = x.facts
    preempted = (f.preemptions or 0.0) > 0
    full = f.kv_max is not None and f.kv_max >= x.config.kv_usage_high
    parts = []
    if f.kv_max is not None:
        parts.append(f"KV usage max {fmt_pct(f.kv_max)}")
    if preempted:
        parts.append(f"{fmt_n(f.preemptions or 0.0)} preemptions")
    if requests_wait(x):
        parts.append(f"{fmt_n(f.waiting_avg or 0.0)} waiting on average")
    return preempted or full, ", ".join(parts)


# ``--quantization`` methods by the bits a weight takes (a name containing one of these).
_FOUR_BIT = ("awq", "gptq", "int4", "w4a", "bitsandbytes", "bnb", "nf4", "fp4", "gguf", "marlin")
_EIGHT_BIT = ("fp8", "int8", "w8a", "smoothquant", "fbgemm", "experts_int8")


def quantize(x: Context) -> Made | None:
    f, roof = x.facts, x.roof
    method = str(x.server.quantization.value or "").lower()
    action = "serve an 8-bit (FP8/INT8) or 4-bit (AWQ/GPTQ) checkpoint, e.g. --quantization fp8"
    already = ""
    if method and method not in ("none", "auto"):
        if any(k in method for k in _FOUR_BIT) or not any(k in method for k in _EIGHT_BIT):
            return None  # 4-bit already (or a method whose width is not known)
        action = "serve a 4-bit checkpoint (AWQ/GPTQ), e.g. --quantization awq_marlin"
        already = f" (weights now {method}, configured: 4 bit halves them again)"
    if x.situation == KV:
        full, text = _kv_full(x)
        if not full:
            return None
        if roof is not None:
            text += f"; half the weight bytes free ≈ {roof.weight_bytes / 2e9:.1f} GB for the pool"
        return Made(action, text + already)
    if roof is not None and roof.efficiency is not None:
        near = roof.efficiency >= x.config.near_ceiling_efficiency
        device = "" if roof.device == f"{roof.bandwidth_gbs:g} GB/s" else f"{roof.device}: "
        evidence = (
            f"decode runs at {fmt_pct(roof.efficiency)} of the {roof.ceiling_tok_s:.0f} tok/s "
            f"ceiling ({device}{roof.bandwidth_gbs:g} GB/s / "
            f"{roof.weight_bytes / 1e9:.1f} GB of weights); half the bytes: ≈ "
            f"{2 * roof.ceiling_tok_s:.0f} tok/s"
        )
        return Made(action, evidence + already, promoted=near)
    if f.itl_p50 is None:
        return None
    running = f"{fmt_n(f.running_avg)} running" if f.running_avg is not None else "every stream"
    return Made(
        action,
        f"every step is slow: ITL p50 {fmt_s(f.itl_p50)} with {running}; half the weight bytes "
        "halve the weight read of each step" + already,
    )


def fp8_kv(x: Context) -> Made | None:
    dtype = x.server.kv_cache_dtype
    if dtype.value is not None and "fp8" in str(dtype.value).lower():
        return None  # the cache is fp8 already
    long, context = _long_context(x)
    now = f" (now {dtype.said()})"
    if x.situation == KV:
        full, text = _kv_full(x)
        if not full:
            return None
        pool = x.server.pool_tokens
        if pool:
            text += f"; the pool holds {fmt_n(pool)} tokens in 16 bit, {fmt_n(2 * pool)} in fp8"
        if long:
            text += f"; {context}"
        return Made("--kv-cache-dtype fp8" + now, text, promoted=long)
    if not long:
        return None  # a short context is a small read per step: little to halve
    return Made("--kv-cache-dtype fp8" + now, f"{context}: each step reads it per sequence")


def gpu_memory(x: Context) -> Made | None:
    f, cfg, srv = x.facts, x.config, x.server
    full, text = _kv_full(x)
    if not full:
        return None
    util = srv.gpu_memory_utilization
    if util.value is None:
        return None
    u = float(util.value)
    cap = cfg.gpu_memory_utilization_max
    if u >= cap - 1e-9:
        return None  # the pool already has all the memory a hint would give it
    weights = _weights_share(x, u)
    w = weights or 0.0
    pool = srv.pool_tokens
    wanted = demand = None
    if pool and f.running_avg and f.kv_avg:
        per_seq = f.kv_avg * pool / f.running_avg
        demand = (f.running_avg + (f.waiting_avg or 0.0)) * per_seq / cfg.kv_usage_high
        wanted = u + (demand / pool - 1.0) * (u - w)
        text += (
            f"; {fmt_n(f.running_avg)} running hold ≈ {fmt_n(per_seq)} tokens of KV each (KV usage "
            f"avg {fmt_pct(f.kv_avg)} of {fmt_n(pool)}), so {fmt_n(f.running_avg)} running + "
            f"{fmt_n(f.waiting_avg or 0.0)} waiting want ≈ {fmt_n(demand)} tokens at "
            f"{fmt_pct(cfg.kv_usage_high)}"
        )
    new = max(u + 0.05, wanted or 0.0)
    new = min(cap, math.ceil(round(new * 20, 6)) / 20)
    if new <= u + 1e-9:
        return None
    blocks = srv.num_gpu_blocks.value if srv.num_gpu_blocks.source == "page" else None
    size = srv.block_size.value
    share = f"({u:g} − {w:.2f}), {w:.2f} the weights' share" if weights is not None else f"{u:g}"
    setting: tuple[str, float] | None = None
    if blocks and size:
        extra = blocks * (new - u) / (u - w)
        setting = ("num_gpu_blocks", int(blocks + extra))
        text += (
            f"; +{fmt_n(extra)} blocks = +{fmt_n(extra * size)} tokens of KV (num_gpu_blocks "
            f"{fmt_n(blocks)} × ({new:.2f} − {u:g}) / {share}"
        )
        text += (
            "; activations also come out of the share: at least this)"
            if weights is not None
            else ": at least this; configure the GPU and model for the weights' share)"
        )
    else:
        grow = (new - u) / (u - w)
        text += f"; the pool grows by at least {fmt_pct(grow)} (({new:.2f} − {u:g}) / {share})"
    if wanted is not None and wanted > cap and pool and demand:
        text += (
            f"; today's demand is {demand / pool:.1f}× the pool: more than memory alone gives "
            "(fewer sequences or more replicas too)"
        )
    return Made(
        f"--gpu-memory-utilization {new:.2f} (now {util.said()}), if nothing else shares the GPU",
        text,
        setting=setting,
    )


def _weights_share(x: Context, u: float) -> float | None:
    """The share of GPU memory the weights take (None: not known, or above ``u``)."""
    srv = x.server
    if x.roof is None or not srv.memory_gb:
        return None
    tp = float(srv.tensor_parallel_size.value or 1)
    weights = x.roof.weight_bytes / (tp * srv.memory_gb * 1e9)
    return None if weights >= u else weights  # above u: the figures disagree


def memory_gain(x: Context) -> float:
    """The most one memory lever multiplies the KV pool by: fp8 doubles it (unless it is
    fp8 already), ``--gpu-memory-utilization`` at ``gpu_memory_utilization_max`` grows
    it by (max − u) / (u − w) (w the weights' share, 0 when not known: its upper bound);
    1 when neither applies."""
    dtype = x.server.kv_cache_dtype.value
    gain = 1.0 if dtype is not None and "fp8" in str(dtype).lower() else 2.0
    util = x.server.gpu_memory_utilization.value
    if util is not None:
        u = float(util)
        cap = x.config.gpu_memory_utilization_max
        if u < cap:
            w = _weights_share(x, u) or 0.0
            gain = max(gain, 1.0 + (cap - u) / (u - w))
    return gain


def outgrows_memory(x: Context) -> bool:
    """Arrivals outrun completions by more than any one memory lever grows the pool
    (:func:`memory_gain`): were the completions to grow with the pool, the queue would
    still grow — capacity, not memory, is the most effective fix."""
    a, c = x.facts.derived.arrival_rate, x.facts.derived.completion_rate
    return a is not None and c is not None and c > 0 and a / c > memory_gain(x)


def max_model_len(x: Context) -> Made | None:
    f, cfg = x.facts, x.config
    if f.prompt_len_p99 is None or f.prompt_len_mean is None:
        return None
    p99 = f.prompt_len_p99 + (f.gen_len_p99 or 0.0)
    mean = f.prompt_len_mean + (f.gen_len_mean or 0.0)
    cap = math.ceil(p99 / 1024) * 1024
    current = x.server.max_model_len
    if current.value is not None and current.value <= cap * 1.25:
        return None  # the cap is about what is served already
    if x.situation == KV:
        full, text = _kv_full(x)
        if not full or p99 < 2 * mean:
            return None  # no long tail of requests holding outsized KV
    elif mean < cfg.long_context_tokens:
        return None
    else:
        text = ""
    now = current.said() if current.known else "the model's maximum unless configured"
    evidence = (
        f"contexts p99 ≈ {fmt_n(p99)} tokens (prompt p99 + output p99) against a mean of "
        f"{fmt_n(mean)}" + (f"; {text}" if text else "")
    )
    return Made(
        f"--max-model-len {fmt_flag(cap)} (now {now}), if longer requests need not be served",
        evidence,
    )


def seqs_down(x: Context) -> Made | None:
    f, cfg, roof = x.facts, x.config, x.roof
    limit = x.server.max_num_seqs
    if not f.running_avg or f.running_avg < 1:
        return None
    if x.situation == KV:
        full, text = _kv_full(x)
        if not full or not f.kv_avg:
            return None
        new = math.floor(f.running_avg * cfg.kv_usage_high / f.kv_avg)
        pool = x.server.pool_tokens
        if pool:
            text += f"; ≈ {fmt_n(f.kv_avg * pool / f.running_avg)} tokens of KV per running request"
        text += (
            f"; {fmt_n(f.running_avg)} running fill {fmt_pct(f.kv_avg)} of the pool on average, "
            f"so {new} fit at {fmt_pct(cfg.kv_usage_high)}"
        )
    elif x.situation == BANDWIDTH:
        if not f.itl_p50 or f.itl_p99 is None:
            return None
        tail = max(1.0, f.itl_p99 / f.itl_p50)
        goal = x.slo.itl_p99 / tail
        weight = 1.0 / roof.ceiling_tok_s if roof is not None else 0.0
        if goal <= weight or f.itl_p50 <= weight:
            return None  # the weight read alone is too slow: fewer sequences cannot help
        new = math.floor(f.running_avg * (goal - weight) / (f.itl_p50 - weight))
        text = (
            f"ITL p50 {fmt_s(f.itl_p50)} with {fmt_n(f.running_avg)} running and p99 {tail:.1f}× "
            f"p50: a step ≈ weight read + batch × KV read, so ≈ {new} running keep ITL p99 "
            f"within {fmt_s(x.slo.itl_p99)}"
        )
        text += (
            f" (weight read {fmt_s(weight)} from the roofline)"
            if roof is not None
            else " (at most: the weight read is a floor; configure the GPU and model)"
        )
    else:
        return None
    if new < 1 or (f.running_max is not None and new >= f.running_max):
        return None  # today's peak already fits
    if limit.value is not None and new >= limit.value:
        return None
    return Made(f"--max-num-seqs {new} (now {limit.said()})", text, setting=("max_num_seqs", new))


def seqs_up(x: Context) -> Made | None:
    f, cfg = x.facts, x.config
    limit = x.server.max_num_seqs
    if limit.value is None or f.running_max is None or f.kv_max is None:
        return None
    top = float(limit.value)
    if f.running_max < top - 0.5:
        return None  # running never reached the limit: it is not what holds requests back
    if f.kv_max >= cfg.kv_headroom or not requests_wait(x):
        return None  # no room in the pool, or nothing waiting to admit
    fits = top * cfg.kv_usage_high / max(f.kv_max, 1e-3)
    new = int(min(top * cfg.max_num_seqs_step, fits))
    new = new // 8 * 8 if new >= 16 else new
    if new <= top:
        return None
    sat = "sat at" if f.running_avg is not None and f.running_avg >= 0.95 * top else "reached"
    evidence = (
        f"running {sat} {fmt_n(top)}, {_limit_words(limit)} "
        f"(avg {fmt_n(f.running_avg or 0.0)}), while {fmt_n(f.waiting_avg or 0.0)} waited and KV "
        f"usage peaked at {fmt_pct(f.kv_max)}: the pool holds ≈ {fmt_n(fits)} sequences of "
        f"today's length at {fmt_pct(cfg.kv_usage_high)}"
    )
    return Made(
        f"--max-num-seqs {new} (now {limit.said()})", evidence, setting=("max_num_seqs", new)
    )


def shorter_context(x: Context) -> Made | None:
    long, text = _long_context(x)
    before = baseline_value(x, "output_tokens_mean")
    out = x.facts.gen_len_mean
    grew = before is not None and out is not None and out >= before * x.config.baseline_noise_ratio
    if not (long or grew):
        return None
    text += ": every step re-reads it for every running sequence"
    if grew and before is not None and out is not None:
        running = x.facts.running_avg
        text += (
            f"; answers grew {fmt_n(before)} → {fmt_n(out)} tokens: requests stay in the batch "
            f"×{out / before:.2g} as long (Little's law)"
            + (f", {fmt_n(running)} running" if running is not None else "")
        )
    action = "summarise or truncate long chat histories; lower max_tokens where possible"
    if out:
        action += f" (answers average {fmt_n(out)} tokens)"
    return Made(action, text, grew)


def faster_memory(x: Context) -> Made | None:
    roof = x.roof
    if roof is None or roof.measured_tok_s is None or roof.efficiency is None:
        return None  # no GPU and model configured: no ceiling to compare with
    near = roof.efficiency >= x.config.near_ceiling_efficiency
    if x.situation == BANDWIDTH and not near:
        return None  # far below the ceiling: the serving stack, not the memory, is slow
    return Made(
        f"a GPU with more memory bandwidth than {roof.bandwidth_gbs:g} GB/s (not more FLOPs) "
        "raises the ceiling",
        f"decode {roof.measured_tok_s:.1f} tok/s per stream = {fmt_pct(roof.efficiency)} of the "
        f"{roof.ceiling_tok_s:.0f} tok/s ceiling ({roof.device})",
        promoted=near,
    )


def spec_drafter(x: Context) -> Made | None:
    d = x.facts.derived
    accepted = d.spec_decode_accepted_per_draft
    if accepted is None:
        return None
    drafts = x.facts.spec_draft_tokens
    before = baseline_value(x, "spec_decode_accepted_per_draft")
    evidence = f"{accepted:.2f} draft tokens accepted per draft"
    if d.spec_decode_acceptance is not None:
        evidence += f" ({fmt_pct(d.spec_decode_acceptance)} of those drafted)"
    if before is not None:
        evidence += (
            f", {before:.2f} in the healthy baseline: tokens per verify step "
            f"{1 + before:.2f} → {1 + accepted:.2f}"
        )
    action = (
        "match the drafter (EAGLE head or draft model) to today's traffic, lower "
        "num_speculative_tokens in --speculative-config, or serve without speculation"
    )
    if d.spec_decode_acceptance and d.spec_decode_acceptance > 0 and accepted > 0 and drafts:
        k = accepted / d.spec_decode_acceptance  # draft tokens per draft
        new = max(1, min(math.floor(k) - 1, round(accepted) + 1))
        if k >= 2 and new < k:
            action = (
                f"num_speculative_tokens {new} (now ≈ {k:.0f} drafted per step) in "
                "--speculative-config, a drafter matched to today's traffic, or no "
                "speculation"
            )
            evidence += (
                ": drafts past the first are mostly rejected"
                if new == 1
                else f": drafts past the first {new} are mostly rejected"
            )
    return Made(action, evidence, promoted=True)
