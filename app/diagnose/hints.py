"""What to change: the hint catalog as data, each hint built from the evidence.

Each entry names the vLLM flag or action, a one-line why (physics.md, "What to change"),
the situations it applies to with a base rank (lower first), the changes it addresses,
and a **builder**: a function of the window's readings (``Facts``), the thresholds, the
server's settings (``server.ServerView``: the page's ``cache_config_info``, the
configured ``server:`` block, else an assumed vLLM default, said as such), the roofline,
the stream's healthy baseline and what changed. The builder

* computes the **value to set** where one follows (``--max-num-seqs 256``,
  ``--gpu-memory-utilization 0.85``, ``--max-num-batched-tokens 2048``…) and the
  **evidence** with its numbers (``running sat at 128, the configured limit``); the
  hint's ``why`` starts with that evidence, then gives the physics;
* returns None — the hint is **not shown** — when the evidence contradicts its premise
  (no "add replicas" with nothing waiting, no ``--gpu-memory-utilization`` above what the
  server runs at already, no fp8 KV cache on a server that stores it in fp8) or when
  nothing in the window speaks for it (no generic advice);
* may **promote** it (the evidence makes it the lever: prefix caching off, prompts that
  span many steps) ahead of the unpromoted ones.

**Order**: the hints that address the headline change (``changes[0]``: a hit-rate
collapse → restore the prefix; a surge of arrivals → replicas and rate limiting) come
first; without a baseline, those that address the sub-cause's own signal (an arrival
surge is about arrivals). Then the promoted ones, then by base rank. ``conflicts`` drops
a hint that would worsen a co-occurring class (a bigger step budget while prefill chunks
already stall decode).

Numbers, and the physics.md line each traces to:

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
* ``batched-tokens-down`` — "lower (≈2048) → better ITL": ``itl_friendly_batched_tokens``
  when the steps (p99) are larger.
* ``batched-tokens-up`` — "higher → better TTFT": a prompt of P uncached tokens takes
  ⌈P / budget⌉ steps; the next power of two ≥ P, at least twice the budget, at most
  ``batched_tokens_max``.
* ``shorter-prompt`` — "prefill cost grows with prompt length: linear plus quadratic":
  at most prompt × SLO / TTFT p99 tokens bring TTFT p99 within the SLO.
* ``fp8-kv-cache`` — "bytes per token = 2 × layers × kv_heads × head_dim × bytes per
  element": 8 bit doubles the tokens of the same pool.
* ``quantize-weights`` / ``faster-memory`` — "single-stream decode tokens/s ≤ memory
  bandwidth / bytes of weights; quantising to 8 bit roughly doubles the ceiling".
* ``more-replicas`` / ``rate-limit`` — "num_requests_waiting > 0 means the request had
  not started — a capacity problem": arrivals / completions is how many times this
  replica's capacity the traffic needs.
"""

from __future__ import annotations

import math

from app.diagnose.classes import DiagnosisClass, SubCause, situation
from app.diagnose.config import DiagnosisConfig, Slo
from app.diagnose.facts import Facts

# The catalog's records, re-exported: builders and callers import them from either module.
from app.diagnose.hintspec import Builder as Builder
from app.diagnose.hintspec import Context as Context
from app.diagnose.hintspec import HintSpec as HintSpec
from app.diagnose.hintspec import Made as Made
from app.diagnose.records import Change, Hint, Roofline
from app.diagnose.server import ServerSettings, ServerView, Setting, resolve
from app.diagnose.transfer_hints import TRANSFER_HINTS
from app.model import Derived

# The situations the catalog is keyed by (``classes.situation``: class or class/sub-cause).
C = DiagnosisClass
S = SubCause
STALLED = situation(C.STALLED)
KV = situation(C.KV_PRESSURE)
SURGE = situation(C.QUEUE_BOUND, S.ARRIVAL_SURGE)
CAPACITY_LOSS = situation(C.QUEUE_BOUND, S.CAPACITY_LOSS)
DEFERRED = situation(C.QUEUE_BOUND, S.DEFERRED)
LONG_PROMPTS = situation(C.PREFILL_BOUND, S.LONG_PROMPTS)
CACHE_MISS = situation(C.PREFILL_BOUND, S.PREFIX_CACHE_MISS)
INTERFERENCE = situation(C.DECODE_BOUND, S.PREFILL_INTERFERENCE)
BANDWIDTH = situation(C.DECODE_BOUND, S.BANDWIDTH_BOUND)
SPEC = situation(C.DECODE_BOUND, S.SPEC_DECODE_REGRESSION)
NO_DATA = situation(C.INSUFFICIENT_DATA)
FRONTEND = situation(C.FRONTEND_BOUND)
PREFILL = (LONG_PROMPTS, CACHE_MISS)  # every prefill-bound situation (for ``conflicts``)

# Without a baseline, the signal a sub-cause is about leads the order (an arrival surge is
# about arrivals: replicas and rate limiting first).
SITUATION_FOCUS: dict[str, str] = {
    SURGE: "arrival_rate+",
    CAPACITY_LOSS: "completion_rate-",
    LONG_PROMPTS: "prompt_tokens_mean+",
    CACHE_MISS: "prefix_cache_hit_rate-",
    INTERFERENCE: "step_tokens_p99+",
    SPEC: "spec_decode_acceptance-",
    DEFERRED: "waiting_deferred_avg+",
    KV: "kv_usage_avg+",
    STALLED: "steps_per_s-",
}


# --- formatting ------------------------------------------------------------------------------


def _n(x: float) -> str:
    """``24,100`` / ``128`` / ``2.5`` / ``0.06``."""
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def _flag(x: float) -> str:
    """A flag's integer value as vLLM takes it: ``8192``."""
    return str(int(x))


def _pct(x: float) -> str:
    return f"{x:.0%}"


def _s(x: float) -> str:
    return f"{x * 1000:.0f} ms" if abs(x) < 1 else f"{x:.2f} s"


def _rate(x: float) -> str:
    return f"{x:.3g}/s"


def _pow2_ceil(x: float) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1.0, x))))


def _limit_words(setting: Setting) -> str:
    """How a hint names the limit a setting sets."""
    if setting.assumed:
        return f"vLLM's default limit ({setting.origin()}; configure it to be sure)"
    return "the configured limit" if setting.source == "configured" else "the server's limit"


# --- shared readings ---------------------------------------------------------------------------


def _waiting(x: Context) -> bool:
    f = x.facts
    return f.waiting_avg is not None and f.waiting_avg >= x.config.waiting_min


def _uncached_prompt(f: Facts) -> float | None:
    """Prompt tokens computed per request (not served by the prefix cache)."""
    if f.derived.uncached_prompt_tokens_mean is not None:
        return f.derived.uncached_prompt_tokens_mean
    if f.prompt_len_mean is None:
        return None
    return f.prompt_len_mean * (1.0 - (f.prefix_hit_ratio or 0.0))


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
    text = f"mean context {_n(total)} tokens (prompt {_n(prompt)} + output {_n(out)})"
    return total >= x.config.long_context_tokens, text


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
        parts.append(f"{_n(tokens)} prompt tokens prefilled and no prefix-cache lookup")
    return bool(said or x.facts.prefix_caching_off), "; ".join(parts)


def _kv_full(x: Context) -> tuple[bool, str]:
    f = x.facts
    preempted = (f.preemptions or 0.0) > 0
    full = f.kv_max is not None and f.kv_max >= x.config.kv_usage_high
    parts = []
    if f.kv_max is not None:
        parts.append(f"KV usage max {_pct(f.kv_max)}")
    if preempted:
        parts.append(f"{_n(f.preemptions or 0.0)} preemptions")
    if _waiting(x):
        parts.append(f"{_n(f.waiting_avg or 0.0)} waiting on average")
    return preempted or full, ", ".join(parts)


def _stall(x: Context) -> str:
    f = x.facts
    if f.probe is not None:  # a probe's window: what the client saw, and the page beside it
        return (
            f"every probe ({f.probe.attempts:.0f}) timed out while the server's /metrics "
            f"answered and showed no token for {f.covered:.0f} s"
        )
    present = max(f.running_max or 0.0, f.waiting_max or 0.0)
    return (
        f"{_n(present)} requests in the engine and no token, step or finished request for "
        f"{f.covered:.0f} s"
    )


def _deferred(x: Context) -> str | None:
    f = x.facts
    deferred, waiting = f.derived.waiting_deferred_avg, f.waiting_avg
    if deferred is None or not waiting:
        return None
    return f"{_n(deferred)} of {_n(waiting)} waiting requests deferred ({_pct(deferred / waiting)})"


def _before(x: Context, name: str) -> float | None:
    if x.baseline is None:
        return None
    v = getattr(x.baseline, name, None)
    return None if v is None or not math.isfinite(v) else float(v)


# --- builders --------------------------------------------------------------------------------


def _prefix_caching(x: Context) -> Made | None:
    off, text = _caching_off(x)
    if not off:
        return None  # on (or not known to be off): enabling it changes nothing
    return Made(
        "vllm serve --enable-prefix-caching (the default changed between releases: check "
        "`vllm serve --help`)",
        text,
        promoted=True,
    )


def _stable_prefix(x: Context) -> Made | None:
    if _caching_off(x)[0]:
        return None  # nothing cached to restore: enabling caching comes first
    hit, before = x.facts.prefix_hit_ratio, _before(x, "prefix_cache_hit_rate")
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
            f"prefix-cache hit rate {_pct(hit)} < {_pct(x.config.prefix_hit_low)}: most prompt "
            "tokens are prefilled again",
            promoted=True,
        )
    return None


def _shorter_prompt(x: Context) -> Made | None:
    f, cfg = x.facts, x.config
    prompt = f.prompt_len_mean
    if prompt is None:
        return None
    before = _before(x, "prompt_tokens_mean")
    grew = before is not None and before > 0 and prompt >= before * cfg.baseline_noise_ratio
    long = prompt >= cfg.long_prompt_tokens
    if not (grew or long):
        return None
    evidence = f"mean prompt {_n(prompt)} tokens"
    if grew and before is not None:
        evidence += f" (was {_n(before)}: ×{prompt / before:.2g})"
    action = (
        "trim the system prompt; put the shared part first and keep it identical across "
        "requests so the prefix cache can reuse it"
    )
    uncached = _uncached_prompt(f)
    prefill = x.situation in PREFILL
    if prefill and uncached and f.ttft_p99 and f.ttft_p99 > x.slo.ttft_p99:
        goal = uncached * x.slo.ttft_p99 / f.ttft_p99
        action = f"bring the computed prompt toward ≤ {_n(goal)} tokens: " + action
        evidence += (
            f", {_n(uncached)} of them computed: prefill grows at least linearly with the "
            f"prompt, so ≤ {_n(goal)} (× SLO {_s(x.slo.ttft_p99)} / TTFT p99 "
            f"{_s(f.ttft_p99)}) brings TTFT p99 within its SLO"
        )
    return Made(action, evidence, promoted=True)


def _batched_up(x: Context) -> Made | None:
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
        f"the mean computed prompt ({_n(uncached)} tokens) takes {math.ceil(uncached / b)} "
        f"steps at {_n(b)} tokens a step, {math.ceil(uncached / new)} at {_n(new)}"
    )
    if budget.assumed and f.step_p99 is not None and f.step_p99 > b * 1.05:
        evidence += (
            f" (steps of {_n(f.step_p99)} tokens, p99, were seen: configure "
            "max_num_batched_tokens to confirm the budget)"
        )
    return Made(
        f"--max-num-batched-tokens {_flag(new)} (now {budget.said()})",
        evidence,
        True,
        ("max_num_batched_tokens", new),
    )


def _batched_down(x: Context) -> Made | None:
    f, cfg = x.facts, x.config
    budget = x.server.max_num_batched_tokens
    target = cfg.itl_friendly_batched_tokens
    if f.step_p99 is None or f.step_p99 <= target:
        return None  # the steps are no larger than the budget advised
    known = not budget.assumed and budget.value is not None
    if known and budget.value <= target:
        return None  # the budget is already there
    # Not known and vLLM's default is the advised budget already: larger steps on the page
    # may be the budget, or vLLM counting a request's whole prompt in the step where its
    # prefill completes (physics.md: use the histogram's sum, not its buckets). Only steps
    # far above it say the budget is larger.
    assumed_low = not known and budget.value is not None and budget.value <= target
    if assumed_low and f.step_p99 < 2 * target:
        return None
    evidence = f"steps of {_n(f.step_p99)} tokens (p99"
    evidence += f"; p50 {_n(f.step_p50)})" if f.step_p50 is not None else ")"
    if f.itl_p50 and f.itl_p99 is not None:
        evidence += f" and ITL p99 {_s(f.itl_p99)} = {f.itl_p99 / f.itl_p50:.1f}× p50"
    evidence += ": prefill chunks ride in the decode steps"
    now = budget.said()
    if assumed_low:
        now = (
            f"not configured; vLLM's default would be {budget.shown()}, the steps say more — "
            "or count whole prompts where their prefill completes: configure "
            "max_num_batched_tokens"
        )
    return Made(
        f"--max-num-batched-tokens {_flag(target)} (now {now})",
        evidence,
        True,
        ("max_num_batched_tokens", target),
    )


# ``--quantization`` methods by the bits a weight takes (a name containing one of these).
_FOUR_BIT = ("awq", "gptq", "int4", "w4a", "bitsandbytes", "bnb", "nf4", "fp4", "gguf", "marlin")
_EIGHT_BIT = ("fp8", "int8", "w8a", "smoothquant", "fbgemm", "experts_int8")


def _quantize(x: Context) -> Made | None:
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
            f"decode runs at {_pct(roof.efficiency)} of the {roof.ceiling_tok_s:.0f} tok/s "
            f"ceiling ({device}{roof.bandwidth_gbs:g} GB/s / "
            f"{roof.weight_bytes / 1e9:.1f} GB of weights); half the bytes: ≈ "
            f"{2 * roof.ceiling_tok_s:.0f} tok/s"
        )
        return Made(action, evidence + already, promoted=near)
    if f.itl_p50 is None:
        return None
    running = f"{_n(f.running_avg)} running" if f.running_avg is not None else "every stream"
    return Made(
        action,
        f"every step is slow: ITL p50 {_s(f.itl_p50)} with {running}; half the weight bytes "
        "halve the weight read of each step" + already,
    )


def _fp8_kv(x: Context) -> Made | None:
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
            text += f"; the pool holds {_n(pool)} tokens in 16 bit, {_n(2 * pool)} in fp8"
        if long:
            text += f"; {context}"
        return Made("--kv-cache-dtype fp8" + now, text, promoted=long)
    if not long:
        return None  # a short context is a small read per step: little to halve
    return Made("--kv-cache-dtype fp8" + now, f"{context}: each step reads it per sequence")


def _gpu_memory(x: Context) -> Made | None:
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
    weights = None
    if x.roof is not None and srv.memory_gb:
        tp = float(srv.tensor_parallel_size.value or 1)
        weights = x.roof.weight_bytes / (tp * srv.memory_gb * 1e9)
        if weights >= u:
            weights = None  # the figures disagree (another model, or offloading)
    w = weights or 0.0
    pool = srv.pool_tokens
    wanted = demand = None
    if pool and f.running_avg and f.kv_avg:
        per_seq = f.kv_avg * pool / f.running_avg
        demand = (f.running_avg + (f.waiting_avg or 0.0)) * per_seq / cfg.kv_usage_high
        wanted = u + (demand / pool - 1.0) * (u - w)
        text += (
            f"; {_n(f.running_avg)} running hold ≈ {_n(per_seq)} tokens of KV each (KV usage "
            f"avg {_pct(f.kv_avg)} of {_n(pool)}), so {_n(f.running_avg)} running + "
            f"{_n(f.waiting_avg or 0.0)} waiting want ≈ {_n(demand)} tokens at "
            f"{_pct(cfg.kv_usage_high)}"
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
            f"; +{_n(extra)} blocks = +{_n(extra * size)} tokens of KV (num_gpu_blocks "
            f"{_n(blocks)} × ({new:.2f} − {u:g}) / {share}"
        )
        text += (
            "; activations also come out of the share: at least this)"
            if weights is not None
            else ": at least this; configure the GPU and model for the weights' share)"
        )
    else:
        grow = (new - u) / (u - w)
        text += f"; the pool grows by at least {_pct(grow)} (({new:.2f} − {u:g}) / {share})"
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


def _max_model_len(x: Context) -> Made | None:
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
        f"contexts p99 ≈ {_n(p99)} tokens (prompt p99 + output p99) against a mean of "
        f"{_n(mean)}" + (f"; {text}" if text else "")
    )
    return Made(
        f"--max-model-len {_flag(cap)} (now {now}), if longer requests need not be served",
        evidence,
    )


def _seqs_down(x: Context) -> Made | None:
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
            text += f"; ≈ {_n(f.kv_avg * pool / f.running_avg)} tokens of KV per running request"
        text += (
            f"; {_n(f.running_avg)} running fill {_pct(f.kv_avg)} of the pool on average, "
            f"so {new} fit at {_pct(cfg.kv_usage_high)}"
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
            f"ITL p50 {_s(f.itl_p50)} with {_n(f.running_avg)} running and p99 {tail:.1f}× "
            f"p50: a step ≈ weight read + batch × KV read, so ≈ {new} running keep ITL p99 "
            f"within {_s(x.slo.itl_p99)}"
        )
        text += (
            f" (weight read {_s(weight)} from the roofline)"
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


def _seqs_up(x: Context) -> Made | None:
    f, cfg = x.facts, x.config
    limit = x.server.max_num_seqs
    if limit.value is None or f.running_max is None or f.kv_max is None:
        return None
    top = float(limit.value)
    if f.running_max < top - 0.5:
        return None  # running never reached the limit: it is not what holds requests back
    if f.kv_max >= cfg.kv_headroom or not _waiting(x):
        return None  # no room in the pool, or nothing waiting to admit
    fits = top * cfg.kv_usage_high / max(f.kv_max, 1e-3)
    new = int(min(top * cfg.max_num_seqs_step, fits))
    new = new // 8 * 8 if new >= 16 else new
    if new <= top:
        return None
    sat = "sat at" if f.running_avg is not None and f.running_avg >= 0.95 * top else "reached"
    evidence = (
        f"running {sat} {_n(top)}, {_limit_words(limit)} "
        f"(avg {_n(f.running_avg or 0.0)}), while {_n(f.waiting_avg or 0.0)} waited and KV "
        f"usage peaked at {_pct(f.kv_max)}: the pool holds ≈ {_n(fits)} sequences of "
        f"today's length at {_pct(cfg.kv_usage_high)}"
    )
    return Made(
        f"--max-num-seqs {new} (now {limit.said()})", evidence, setting=("max_num_seqs", new)
    )


def _more_replicas(x: Context) -> Made | None:
    f = x.facts
    if not _waiting(x):
        return None  # nothing waits: more servers would not start anything sooner
    a, c = f.derived.arrival_rate, f.derived.completion_rate
    evidence = f"{_n(f.waiting_avg or 0.0)} requests waiting on average"
    replicas = 2
    action = (
        "run more vLLM replicas behind the load balancer (scale out on vllm:num_requests_waiting)"
    )
    if a is not None and c is not None and c > 0 and a > c:
        r = a / c
        replicas = max(2, math.ceil(r))
        action = (
            f"≈ {r:.1f}× the replicas serving this traffic now (one replica: "
            f"+{max(1, math.ceil(r) - 1)}), behind the load balancer; scale out on "
            "vllm:num_requests_waiting"
        )
        evidence += f"; arrivals {_rate(a)} against {_rate(c)} completed: ×{r:.1f} its capacity"
    elif a is not None and c is not None:
        evidence += f"; arrivals {_rate(a)} ≤ {_rate(c)} completed: more replicas drain it sooner"
    return Made(action, evidence, setting=("replicas", replicas))


def _rate_limit(x: Context) -> Made | None:
    f = x.facts
    a, c = f.derived.arrival_rate, f.derived.completion_rate
    if a is None or c is None or c <= 0 or a <= c:
        return None  # arrivals within what the server completes: nothing to shed
    evidence = f"arrivals {_rate(a)} > completions {_rate(c)}: the queue grows by {_rate(a - c)}"
    before = _before(x, "arrival_rate")
    if before:
        evidence += f"; arrivals were {_rate(before)} in the healthy baseline (×{a / before:.2g})"
    return Made(
        f"cap admissions at the gateway to ≈ {_rate(c)} per replica (what it completes now) "
        "and answer the excess with 429 until replicas are added",
        evidence,
    )


def _shorter_context(x: Context) -> Made | None:
    long, text = _long_context(x)
    before = _before(x, "output_tokens_mean")
    out = x.facts.gen_len_mean
    grew = before is not None and out is not None and out >= before * x.config.baseline_noise_ratio
    if not (long or grew):
        return None
    text += ": every step re-reads it for every running sequence"
    if grew and before is not None and out is not None:
        running = x.facts.running_avg
        text += (
            f"; answers grew {_n(before)} → {_n(out)} tokens: requests stay in the batch "
            f"×{out / before:.2g} as long (Little's law)"
            + (f", {_n(running)} running" if running is not None else "")
        )
    action = "summarise or truncate long chat histories; lower max_tokens where possible"
    if out:
        action += f" (answers average {_n(out)} tokens)"
    return Made(action, text, grew)


def _faster_memory(x: Context) -> Made | None:
    roof = x.roof
    if roof is None or roof.measured_tok_s is None or roof.efficiency is None:
        return None  # no GPU and model configured: no ceiling to compare with
    near = roof.efficiency >= x.config.near_ceiling_efficiency
    if x.situation == BANDWIDTH and not near:
        return None  # far below the ceiling: the serving stack, not the memory, is slow
    return Made(
        f"a GPU with more memory bandwidth than {roof.bandwidth_gbs:g} GB/s (not more FLOPs) "
        "raises the ceiling",
        f"decode {roof.measured_tok_s:.1f} tok/s per stream = {_pct(roof.efficiency)} of the "
        f"{roof.ceiling_tok_s:.0f} tok/s ceiling ({roof.device})",
        promoted=near,
    )


def _disaggregate(x: Context) -> Made | None:
    f, cfg = x.facts, x.config
    budget = x.server.max_num_batched_tokens
    if budget.assumed or budget.value is None or budget.value > cfg.itl_friendly_batched_tokens:
        return None  # a smaller step budget comes first
    if not f.itl_p50 or f.itl_p99 is None:
        return None
    return Made(
        "separate prefill and decode worker pools (vLLM disaggregated prefill, llm-d, "
        "Dynamo) — only with many GPUs and steady traffic for both",
        f"ITL p99 {_s(f.itl_p99)} = {f.itl_p99 / f.itl_p50:.1f}× p50 with the step budget "
        f"already {budget.said()}",
    )


def _check_slowdown(x: Context) -> Made | None:
    now = x.facts.derived
    parts = []
    for name, label in (("completion_rate", "completions"), ("arrival_rate", "arrivals")):
        a, b = getattr(now, name), _before(x, name)
        if a is not None and b is not None:
            parts.append(f"{label} {_rate(b)} → {_rate(a)}")
    steps, steps_before = now.steps_per_s, _before(x, "steps_per_s")
    if steps and steps_before:
        parts.append(
            f"engine steps {steps_before:.3g}/s → {steps:.3g}/s (×{steps_before / steps:.2g} "
            "the time a step)"
        )
    if not parts:
        return None
    return Made(
        "compare step time and decode speed with before (and with the bandwidth ceiling: "
        "configure the GPU and model); check GPU clocks, power and thermal throttling "
        "(nvidia-smi -q -d PERFORMANCE), a noisy neighbour on the host, a changed flag, "
        "driver or vLLM version",
        "; ".join(parts),
        promoted=True,
    )


def _deferred_admission(x: Context) -> Made | None:
    f = x.facts
    text = _deferred(x)
    if text is None:
        return None
    if f.running_avg is not None and f.kv_max is not None:
        limit = x.server.max_num_seqs
        text += (
            f"; {_n(f.running_avg)} running (max_num_seqs {limit.shown()}"
            f"{', assumed' if limit.assumed else ''}) with KV usage max "
            f"{_pct(f.kv_max)}: room to admit them"
        )
    return Made(
        "read vllm:num_requests_waiting_by_reason: with a KV connector, check the transfers "
        "from the prefill instances; with LoRA, the adapter budget (--max-loras); look for "
        "requests blocked on structured-output grammars",
        text,
    )


def _for_stall_or_deferred(action: str) -> Builder:
    def build(x: Context) -> Made | None:
        if x.situation == DEFERRED:
            text = _deferred(x)
            return None if text is None else Made(action, text)
        return Made(action, _stall(x))

    return build


def _engine_health(x: Context) -> Made | None:
    return Made(
        "curl the server's /health (a dead engine core answers an error; a hung one may "
        "still answer 200), read the engine logs for the last step and any timeout or "
        "traceback, restart the server if the core does not step; if /health is fine and "
        "the logs show steps, the /metrics page itself is stale (a cache or proxy in front)",
        _stall(x),
    )


def _hang_collective(x: Context) -> Made | None:
    tp = x.server.tensor_parallel_size
    if not tp.assumed and tp.value is not None and int(tp.value) <= 1:
        return None  # one GPU: no collective to hang
    text = _stall(x)
    if not tp.assumed:
        text += f"; tensor_parallel_size {tp.shown()} (configured)"
    return Made(
        "with tensor or pipeline parallelism, check every rank's process and GPU "
        "(nvidia-smi), run with NCCL_DEBUG=INFO, and look for a collective timeout in the "
        "logs of all ranks",
        text,
    )


def _spec_drafter(x: Context) -> Made | None:
    d = x.facts.derived
    accepted = d.spec_decode_accepted_per_draft
    if accepted is None:
        return None
    drafts = x.facts.spec_draft_tokens
    before = _before(x, "spec_decode_accepted_per_draft")
    evidence = f"{accepted:.2f} draft tokens accepted per draft"
    if d.spec_decode_acceptance is not None:
        evidence += f" ({_pct(d.spec_decode_acceptance)} of those drafted)"
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


def _gap(x: Context) -> str | None:
    """``client gap 480 ms of 520 ms (92 %), per request``: the frontend's evidence."""
    p = x.facts.probe
    if p is None or p.client_gap is None or p.client_gap_share is None:
        return None
    how = "estimated from the server's p50" if p.client_gap_estimated else "per request"
    ttft = "" if p.client_ttft is None else f" of {_s(p.client_ttft)}"
    return f"client gap {_s(p.client_gap)}{ttft} ({_pct(p.client_gap_share)}), {how}"


def _frontend_connection(x: Context) -> Made | None:
    p, gap = x.facts.probe, _gap(x)
    if p is None or gap is None or p.connect_mean is None or p.client_gap is None:
        return None
    if p.connect_mean < 0.5 * p.client_gap:
        return None  # the connection is not where the time goes
    return Made(
        "keep connections alive in the clients (a pool, HTTP keep-alive), terminate TLS "
        "closer to them, or serve from a region nearer the users",
        f"{gap}; the TCP/TLS connection alone takes {_s(p.connect_mean)}",
        promoted=True,
    )


def _frontend_path(x: Context) -> Made | None:
    p, gap = x.facts.probe, _gap(x)
    if p is None or gap is None:
        return None
    ttfb = "" if p.ttfb_mean is None else f"; headers after {_s(p.ttfb_mean)}"
    return Made(
        "probe from the server's own host too (or curl -N -w '%{time_starttransfer}' there) "
        "and compare; in the proxy or gateway between, look for buffered streaming "
        "(nginx: proxy_buffering off for text/event-stream), its own queue, and TLS",
        gap + ttfb,
    )


def _frontend_api_server(x: Context) -> Made | None:
    p, gap = x.facts.probe, _gap(x)
    if p is None or gap is None or p.client_gap is None:
        return None
    if p.connect_mean is not None and p.connect_mean >= 0.5 * p.client_gap:
        return None  # the connection explains it
    return Made(
        "give the API server more CPU: vLLM's --api-server-count (several frontend "
        "processes), a fast tokenizer, no heavy chat template; a long prompt's tokenising "
        "delays every request behind it",
        f"{gap}, after the connection ({_s(p.connect_mean or 0.0)}): spent between the "
        "server's front door and its engine",
    )


def _check_probe(x: Context) -> Made | None:
    p = x.facts.probe
    if p is None:
        return None
    failed = f"{p.failures:.0f} of {p.attempts:.0f} probes failed" if p.attempts else ""
    return Made(
        "send the probe's request by hand (curl -N the endpoint with its model and headers) "
        "and read the answer: the model's name, the token, the server's log",
        failed or "no probe answered in the window",
    )


def _check_metrics(x: Context) -> Made | None:
    f = x.facts
    if f.probe is not None:
        return None  # a probe's window has no page of its own (``check-probe``)
    parts = []
    if f.missing:
        parts.append(f"not on the page: {', '.join(f.missing)}")
    if f.coverage < x.config.min_coverage:
        parts.append(f"{_pct(f.coverage)} of the window covered by scrapes")
    return Made(
        "curl the /metrics URL: vLLM must run without --disable-log-stats, and the scrape "
        "must succeed every interval",
        "; ".join(parts) or "the window could not be judged",
    )


CATALOG: tuple[HintSpec, ...] = (
    HintSpec(
        id="prefix-caching",
        title="Enable prefix caching",
        why="a prefix shared by many requests (system prompt, chat history) is prefilled "
        "once and then read from the cache",
        applies={CACHE_MISS: 1, LONG_PROMPTS: 3, INTERFERENCE: 4, SURGE: 5, KV: 7},
        build=_prefix_caching,
        addresses=("prefix_cache_hit_rate-",),
    ),
    HintSpec(
        id="shorter-prompt",
        title="Shorten the prompt, or keep a stable cached system prompt",
        why="the system prompt is prefilled on every request, and prefill cost grows at "
        "least linearly with prompt length",
        applies={LONG_PROMPTS: 1, CACHE_MISS: 3, INTERFERENCE: 3, SURGE: 6},
        build=_shorter_prompt,
        addresses=("prompt_tokens_mean+",),
    ),
    HintSpec(
        id="batched-tokens-up",
        title="Raise --max-num-batched-tokens",
        why="a larger per-step token budget prefills more of each prompt per step, so the "
        "first token comes sooner (streams already running pause a little longer)",
        applies={LONG_PROMPTS: 2, CACHE_MISS: 4, SURGE: 8},
        build=_batched_up,
        addresses=("prompt_tokens_mean+", "step_tokens_p99-"),
        conflicts=(INTERFERENCE,),
    ),
    HintSpec(
        id="batched-tokens-down",
        title="Lower --max-num-batched-tokens",
        why="smaller prefill chunks stall the running streams for less time per step: a "
        "shorter ITL tail for slightly later first tokens",
        applies={INTERFERENCE: 2},
        build=_batched_down,
        addresses=("step_tokens_p99+",),
        conflicts=PREFILL,
    ),
    HintSpec(
        id="quantize-weights",
        title="Quantise the weights",
        why="decode reads every weight each step: half the bytes roughly doubles the "
        "per-stream ceiling and frees memory for the KV cache",
        applies={BANDWIDTH: 1, KV: 5, SPEC: 4},
        build=_quantize,
    ),
    HintSpec(
        id="fp8-kv-cache",
        title="Store the KV cache in fp8",
        why="half the bytes per cached token: twice the tokens fit in the pool, and each "
        "decode step reads half as much KV",
        applies={KV: 1, BANDWIDTH: 4},
        build=_fp8_kv,
        addresses=("kv_usage_avg+", "preemptions_rate+"),
    ),
    HintSpec(
        id="gpu-memory-utilization",
        title="Give the KV pool more memory",
        why="the KV pool is sized once at start-up from this share of GPU memory; a bigger "
        "pool holds more tokens before requests wait or get preempted",
        applies={KV: 2},
        build=_gpu_memory,
        addresses=("kv_usage_avg+", "preemptions_rate+"),
    ),
    HintSpec(
        id="max-model-len",
        title="Cap the context length",
        why="bounds the KV one request can hold, and the KV each decode step has to read",
        applies={KV: 3, BANDWIDTH: 6},
        build=_max_model_len,
    ),
    HintSpec(
        id="max-num-seqs-down",
        title="Lower --max-num-seqs",
        why="fewer sequences in flight hold less KV (no preempt-and-recompute churn) and "
        "make each step lighter, at the cost of total throughput",
        applies={KV: 4, BANDWIDTH: 3},
        build=_seqs_down,
        addresses=("running_avg+",),
    ),
    HintSpec(
        id="max-num-seqs-up",
        title="Raise --max-num-seqs",
        why="the KV pool has room: one weight read serves the whole batch, so admitting "
        "more sequences per step raises throughput almost for free",
        applies={SURGE: 3},
        build=_seqs_up,
        addresses=("arrival_rate+",),
    ),
    HintSpec(
        id="more-replicas",
        title="Add replicas",
        why="more requests arrive than one server completes; more servers is the capacity fix",
        applies={
            SURGE: 1,
            CAPACITY_LOSS: 3,
            KV: 6,
            LONG_PROMPTS: 6,
            CACHE_MISS: 6,
            BANDWIDTH: 7,
            INTERFERENCE: 6,
        },
        build=_more_replicas,
        addresses=("arrival_rate+",),
    ),
    HintSpec(
        id="rate-limit",
        title="Rate-limit the surge",
        why="requests that cannot be served soon only wait in the queue and push every "
        "later TTFT up; shedding the excess keeps the admitted ones within their SLO",
        applies={SURGE: 2},
        build=_rate_limit,
        addresses=("arrival_rate+",),
    ),
    HintSpec(
        id="shorter-context",
        title="Trim the context",
        why="every decode step re-reads all earlier K/V of every sequence in the batch: long "
        "histories, and long answers that also keep more requests in the batch, make each "
        "step's read bigger",
        applies={BANDWIDTH: 5},
        build=_shorter_context,
        addresses=("output_tokens_mean+", "prompt_tokens_mean+"),
    ),
    HintSpec(
        id="faster-memory",
        title="Compare with the decode ceiling; move to faster memory",
        why="single-stream decode cannot beat bandwidth / weight bytes, whatever the flags",
        applies={BANDWIDTH: 8, CAPACITY_LOSS: 2},
        build=_faster_memory,
    ),
    HintSpec(
        id="disaggregated-prefill",
        title="Disaggregate prefill at scale",
        why="prefill stops competing with decode for the same steps; on one GPU chunked "
        "prefill already gives most of that isolation",
        applies={INTERFERENCE: 7},
        build=_disaggregate,
    ),
    HintSpec(
        id="stable-prefix",
        title="Restore the shared prefix the cache served",
        why="a repeated prefix is prefilled once and then read from the cache; one "
        "differing token early in the prompt makes every later token a miss",
        applies={CACHE_MISS: 2},
        build=_stable_prefix,
        addresses=("prefix_cache_hit_rate-",),
    ),
    HintSpec(
        id="check-slowdown",
        title="Find what slowed the server",
        why="the same traffic is served slower: a lost part of the server's capacity, "
        "not more demand — more replicas only hide it",
        applies={CAPACITY_LOSS: 1},
        build=_check_slowdown,
        addresses=("completion_rate-", "steps_per_s-"),
    ),
    HintSpec(
        id="deferred-admission",
        title="Find what defers admission",
        why="deferred requests wait for a transient constraint, not for capacity: more "
        "replicas or slots would not admit them sooner",
        applies={DEFERRED: 1},
        build=_deferred_admission,
        addresses=("waiting_deferred_avg+",),
    ),
    HintSpec(
        id="spec-decode-drafter",
        title="Fix or drop the speculative drafter",
        why="each verify step reads the weights once for 1 + k tokens per sequence; with "
        "few drafts accepted it yields barely more than one token, and the drafter's passes "
        "and the extra verify tokens are paid for nothing",
        applies={SPEC: 1},
        build=_spec_drafter,
        addresses=("spec_decode_acceptance-",),
    ),
    HintSpec(
        id="engine-health",
        title="Check the engine: health endpoint, logs, restart",
        why="requests sit in the batch but no step, token or finished request came for the "
        "whole window: every step emits a token per decoding sequence, so no load or "
        "tuning knob explains it",
        applies={STALLED: 1},
        build=_engine_health,
        addresses=("steps_per_s-", "completion_rate-"),
    ),
    HintSpec(
        id="hang-collective",
        title="Look for a stuck collective (NCCL) across GPUs",
        why="a step waits for every rank: one dead or hung worker blocks the all-reduce, "
        "and with it the whole engine",
        applies={STALLED: 2},
        build=_hang_collective,
        addresses=("steps_per_s-", "completion_rate-"),
    ),
    HintSpec(
        id="hang-structured-output",
        title="Check structured-output requests (grammar compilation)",
        why="a request's grammar is compiled before it is scheduled; a pathological one "
        "can hold it, and the scheduler behind it, for a long time",
        applies={STALLED: 3, DEFERRED: 2},
        build=_for_stall_or_deferred(
            "look for requests with large JSON schemas or regexes (guided decoding) from when "
            "it began; cap schema size or change the structured-output backend"
        ),
        addresses=("steps_per_s-", "completion_rate-"),
    ),
    HintSpec(
        id="hang-kv-transfer",
        title="Check the remote KV transfer (disaggregated serving)",
        why="a request on the decode side waits for its KV cache from another instance; a "
        "transfer that never completes holds it in the engine",
        applies={STALLED: 4, DEFERRED: 3},
        build=_for_stall_or_deferred(
            "with a KV connector (NIXL, Mooncake, LMCache…), check the prefill instances and "
            "the connector's transfer metrics and logs"
        ),
        addresses=("steps_per_s-", "completion_rate-"),
    ),
    HintSpec(
        id="check-metrics",
        title="Check what the server exports",
        why="a window without its signals cannot be judged; it is never reported healthy",
        applies={NO_DATA: 1},
        build=_check_metrics,
    ),
    HintSpec(
        id="check-probe",
        title="Check the probe's request",
        why="a probe that fails says nothing of the server's speed until it answers again",
        applies={NO_DATA: 2},
        build=_check_probe,
    ),
    HintSpec(
        id="frontend-connection",
        title="Cut the connection time",
        why="every new connection pays TCP (and TLS) round trips before the request is even "
        "sent; no engine flag shortens a round trip",
        applies={FRONTEND: 1},
        build=_frontend_connection,
    ),
    HintSpec(
        id="frontend-path",
        title="Find the hop that adds the time",
        why="the engine reports its first token sooner than clients receive it: the time is "
        "spent on the way — network, load balancer, proxy or gateway",
        applies={FRONTEND: 2},
        build=_frontend_path,
    ),
    HintSpec(
        id="frontend-api-server",
        title="Relieve the API server",
        why="the API process tokenises, templates and streams for every request on one "
        "event loop before and after the engine's work; when it is busy, requests wait "
        "in front of an idle engine",
        applies={FRONTEND: 3},
        build=_frontend_api_server,
    ),
    # transfer_bound: the KV transfer of disaggregated prefill/decode (a module of its own).
    *TRANSFER_HINTS,
)


def focus(situation: str, changes: tuple[Change, ...] = ()) -> str | None:
    """What the order leads with: the headline change (``signal+`` rose, ``signal-``
    fell), else the signal the situation's sub-cause is about (None: neither)."""
    if changes and changes[0].share > 0:
        c = changes[0]
        return c.signal + ("+" if c.value > c.baseline else "-")
    return SITUATION_FOCUS.get(situation)


def _addresses(spec: HintSpec, lead: str | None) -> bool:
    """Whether the hint answers ``lead`` (an entry without a direction answers either)."""
    if lead is None:
        return False
    return any(a in (lead, lead[:-1]) for a in spec.addresses)


def rank_hints(
    situation: str,
    facts: Facts,
    config: DiagnosisConfig,
    roof: Roofline | None = None,
    also: tuple[str, ...] = (),
    *,
    server: ServerView | None = None,
    slo: Slo | None = None,
    baseline: Derived | None = None,
    changes: tuple[Change, ...] = (),
) -> tuple[Hint, ...]:
    """The hints for ``situation`` (e.g. ``decode_bound/bandwidth_bound``), best first:
    those addressing the headline change (or the sub-cause's signal), then the promoted,
    then by base rank (module docstring). ``also`` are the situations of the secondary
    findings (for ``conflicts``); ``server`` the server's settings (default: none known,
    vLLM's defaults assumed); ``baseline`` and ``changes`` what the window is compared
    with and what moved."""
    ctx = Context(
        situation=situation,
        facts=facts,
        config=config,
        server=server if server is not None else resolve(ServerSettings()),
        slo=slo if slo is not None else Slo(config.slo_ttft_p99, config.slo_itl_p99),
        roof=roof,
        baseline=baseline,
        changes=changes,
    )
    lead = focus(situation, changes)
    scored: list[tuple[int, int, int, int, Hint]] = []
    for order, spec in enumerate(CATALOG):
        base = spec.applies.get(situation)
        if base is None or any(s in spec.conflicts for s in also):
            continue
        made = spec.build(ctx)
        if made is None or not made.evidence:
            continue
        hint = Hint(
            spec.id,
            spec.title,
            made.action,
            f"{made.evidence} — {spec.why}",
            made.evidence,
            made.setting,
        )
        first = 0 if _addresses(spec, lead) else 1
        scored.append((first, 0 if made.promoted else 1, base, order, hint))
    return tuple(s[-1] for s in sorted(scored, key=lambda s: s[:4]))


def reorder(
    hints: tuple[Hint, ...], situation: str, changes: tuple[Change, ...]
) -> tuple[Hint, ...]:
    """``hints`` (ranked without the changes) with those addressing the headline change
    moved first, the rest in their order: for a caller without the configuration to
    build them again (``classify.with_changed_hints`` does, with the baseline's numbers)."""
    lead = focus(situation, changes)
    specs = {spec.id: spec for spec in CATALOG}
    keyed = [
        (0 if (spec := specs.get(h.id)) is not None and _addresses(spec, lead) else 1, i, h)
        for i, h in enumerate(hints)
    ]
    return tuple(h for *_, h in sorted(keyed, key=lambda k: (k[0], k[1])))
