"""What to change: the hint catalog as data, and the ranking that the evidence drives.

Each entry names the vLLM flag or action, a one-line why (physics.md, "What to change"),
the situations it applies to with a base rank (lower first), and optionally

* ``requires`` — a condition that must not be false, else the hint is dropped (raising
  ``--max-num-seqs`` only helps while the KV pool has room);
* ``promote`` — a condition that, when true, moves the hint ahead of the unpromoted ones
  and says why (low prefix-cache hit ratio → prefix caching first);
* ``conflicts`` — situations that, when they also hold in the window, make the hint do
  harm (a bigger step budget while prefill chunks already stall decode).

Conditions are named predicates over the window's ``Facts`` (below); their thresholds
live in ``DiagnosisConfig``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from app.diagnose.classes import DiagnosisClass, SubCause, situation
from app.diagnose.config import DiagnosisConfig
from app.diagnose.facts import Facts
from app.diagnose.records import Hint, Roofline

# (holds?, the evidence in words). None: cannot tell (signal missing).
Verdict = tuple[bool | None, str]
Predicate = Callable[[Facts, DiagnosisConfig, Roofline | None], Verdict]


@dataclass(frozen=True, slots=True)
class HintSpec:
    """One catalog entry. ``applies`` maps a situation (class or class/sub-cause) to rank."""

    id: str
    title: str
    action: str
    why: str
    applies: Mapping[str, int]
    requires: str | None = None
    promote: str | None = None
    conflicts: tuple[str, ...] = ()


def _pct(x: float) -> str:
    return f"{x:.0%}"


def _caching_off(f: Facts, c: DiagnosisConfig, r: Roofline | None) -> Verdict:
    if f.prefix_caching_off is None:
        return None, ""
    return f.prefix_caching_off, "no prefix-cache lookups while prompts were prefilled"


def _caching_not_on_and_useful(f: Facts, c: DiagnosisConfig, r: Roofline | None) -> Verdict:
    # Drop "enable prefix caching" only when it is on already.
    return (None if f.prefix_caching_off is None else f.prefix_caching_off), ""


def _prefix_hit_low(f: Facts, c: DiagnosisConfig, r: Roofline | None) -> Verdict:
    if f.prefix_hit_ratio is None:
        return None, ""
    holds = f.prefix_hit_ratio < c.prefix_hit_low
    return holds, f"prefix-cache hit ratio {_pct(f.prefix_hit_ratio)} < {_pct(c.prefix_hit_low)}"


def _long_prompts(f: Facts, c: DiagnosisConfig, r: Roofline | None) -> Verdict:
    if f.prompt_len_mean is None:
        return None, ""
    holds = f.prompt_len_mean >= c.long_prompt_tokens
    return holds, f"mean prompt {f.prompt_len_mean:.0f} tokens ≥ {c.long_prompt_tokens:.0f}"


def _shorter_prompt_helps(f: Facts, c: DiagnosisConfig, r: Roofline | None) -> Verdict:
    long, why = _long_prompts(f, c, r)
    low, why_low = _prefix_hit_low(f, c, r)
    if long or low:
        return True, why if long else why_low
    return (None if long is None and low is None else False), ""


def _prompts_span_steps(f: Facts, c: DiagnosisConfig, r: Roofline | None) -> Verdict:
    if f.prompt_len_mean is None or f.step_p99 is None:
        return None, ""
    holds = f.prompt_len_mean > f.step_p99
    return holds, (
        f"mean prompt {f.prompt_len_mean:.0f} tokens > the largest steps "
        f"({f.step_p99:.0f} tokens, p99): each prompt needs several steps"
    )


def _big_steps(f: Facts, c: DiagnosisConfig, r: Roofline | None) -> Verdict:
    if f.step_p99 is None:
        return None, ""
    holds = f.step_p99 > c.itl_friendly_batched_tokens
    return holds, f"steps of {f.step_p99:.0f} tokens (p99) > {c.itl_friendly_batched_tokens:.0f}"


def _kv_headroom(f: Facts, c: DiagnosisConfig, r: Roofline | None) -> Verdict:
    if f.kv_max is None:
        return None, ""
    holds = f.kv_max < c.kv_headroom
    return holds, f"KV usage max {_pct(f.kv_max)} < {_pct(c.kv_headroom)}"


def _long_context(f: Facts, c: DiagnosisConfig, r: Roofline | None) -> Verdict:
    if f.prompt_len_mean is None:
        return None, ""
    context = f.prompt_len_mean + (f.gen_len_mean or 0.0)
    holds = context >= c.long_context_tokens
    return holds, f"mean context {context:.0f} tokens ≥ {c.long_context_tokens:.0f}"


def _near_ceiling(f: Facts, c: DiagnosisConfig, r: Roofline | None) -> Verdict:
    if r is None or r.efficiency is None:
        return None, ""
    holds = r.efficiency >= c.near_ceiling_efficiency
    return holds, f"decode runs at {_pct(r.efficiency)} of the {r.ceiling_tok_s:.0f} tok/s ceiling"


PREDICATES: dict[str, Predicate] = {
    "prefix_caching_off": _caching_off,
    "prefix_caching_not_on": _caching_not_on_and_useful,
    "prefix_hit_low": _prefix_hit_low,
    "long_prompts": _long_prompts,
    "shorter_prompt_helps": _shorter_prompt_helps,
    "prompts_span_steps": _prompts_span_steps,
    "big_steps": _big_steps,
    "kv_headroom": _kv_headroom,
    "long_context": _long_context,
    "near_ceiling": _near_ceiling,
}

# The situations the catalog is keyed by (``classes.situation``: class or class/sub-cause).
C = DiagnosisClass
KV = situation(C.KV_PRESSURE)
QUEUE = situation(C.QUEUE_BOUND)
PREFILL = situation(C.PREFILL_BOUND)
INTERFERENCE = situation(C.DECODE_BOUND, SubCause.PREFILL_INTERFERENCE)
BANDWIDTH = situation(C.DECODE_BOUND, SubCause.BANDWIDTH_BOUND)
NO_DATA = situation(C.INSUFFICIENT_DATA)

CATALOG: tuple[HintSpec, ...] = (
    HintSpec(
        id="prefix-caching",
        title="Enable prefix caching",
        action="vllm serve --enable-prefix-caching (the default changed between releases: "
        "check `vllm serve --help`)",
        why="a prefix shared by many requests (system prompt, chat history) is prefilled "
        "once and then read from the cache",
        applies={PREFILL: 3, INTERFERENCE: 4, QUEUE: 5, KV: 7},
        requires="prefix_caching_not_on",
        promote="prefix_caching_off",
    ),
    HintSpec(
        id="shorter-prompt",
        title="Shorten the prompt, or keep a stable cached system prompt",
        action="trim the system prompt; put the shared part first and keep it identical "
        "across requests so the prefix cache can reuse it",
        why="the system prompt is prefilled on every request, and prefill cost grows at "
        "least linearly with prompt length",
        applies={PREFILL: 2, INTERFERENCE: 3, QUEUE: 6},
        promote="shorter_prompt_helps",
    ),
    HintSpec(
        id="batched-tokens-up",
        title="Raise --max-num-batched-tokens",
        action="--max-num-batched-tokens 8192 (or more)",
        why="a larger per-step token budget prefills more of each prompt per step, so the "
        "first token comes sooner (streams already running pause a little longer)",
        applies={PREFILL: 4, QUEUE: 8},
        promote="prompts_span_steps",
        conflicts=(INTERFERENCE,),
    ),
    HintSpec(
        id="batched-tokens-down",
        title="Lower --max-num-batched-tokens",
        action="--max-num-batched-tokens 2048",
        why="smaller prefill chunks stall the running streams for less time per step: a "
        "shorter ITL tail for slightly later first tokens",
        applies={INTERFERENCE: 2},
        promote="big_steps",
        conflicts=(PREFILL,),
    ),
    HintSpec(
        id="quantize-weights",
        title="Quantise the weights",
        action="serve an 8-bit (FP8/INT8) or 4-bit (AWQ/GPTQ) checkpoint, e.g. --quantization fp8",
        why="decode reads every weight each step: half the bytes roughly doubles the "
        "per-stream ceiling and frees memory for the KV cache",
        applies={BANDWIDTH: 1, QUEUE: 4, KV: 5},
        promote="near_ceiling",
    ),
    HintSpec(
        id="fp8-kv-cache",
        title="Store the KV cache in fp8",
        action="--kv-cache-dtype fp8",
        why="half the bytes per cached token: twice the tokens fit in the pool, and each "
        "decode step reads half as much KV",
        applies={KV: 1, BANDWIDTH: 4},
        promote="long_context",
    ),
    HintSpec(
        id="gpu-memory-utilization",
        title="Give the KV pool more memory",
        action="--gpu-memory-utilization 0.95 (default 0.9), if nothing else shares the GPU",
        why="the KV pool is sized once at start-up from this share of GPU memory; a bigger "
        "pool holds more tokens before requests wait or get preempted",
        applies={KV: 2},
    ),
    HintSpec(
        id="max-model-len",
        title="Cap the context length",
        action="--max-model-len N (the longest context you really serve)",
        why="bounds the KV one request can hold, and the KV each decode step has to read",
        applies={KV: 3, BANDWIDTH: 6},
        promote="long_context",
    ),
    HintSpec(
        id="max-num-seqs-down",
        title="Lower --max-num-seqs",
        action="--max-num-seqs N below today's running peak",
        why="fewer sequences in flight hold less KV (no preempt-and-recompute churn) and "
        "make each step lighter, at the cost of total throughput",
        applies={KV: 4, BANDWIDTH: 3},
    ),
    HintSpec(
        id="max-num-seqs-up",
        title="Raise --max-num-seqs",
        action="--max-num-seqs N above today's running peak",
        why="the KV pool has room: one weight read serves the whole batch, so admitting "
        "more sequences per step raises throughput almost for free",
        applies={QUEUE: 2},
        requires="kv_headroom",
    ),
    HintSpec(
        id="more-replicas",
        title="Add replicas",
        action="run more vLLM replicas behind the load balancer (scale out on "
        "vllm:num_requests_waiting)",
        why="more requests arrive than one server completes; more servers is the capacity fix",
        applies={QUEUE: 1, KV: 6, PREFILL: 6, BANDWIDTH: 7, INTERFERENCE: 6},
    ),
    HintSpec(
        id="shorter-context",
        title="Trim the context",
        action="summarise or truncate long chat histories; lower max_tokens where possible",
        why="every decode step re-reads all earlier K/V: thousands of tokens of context are "
        "a big read per step",
        applies={BANDWIDTH: 5},
        promote="long_context",
    ),
    HintSpec(
        id="faster-memory",
        title="Compare with the decode ceiling; move to faster memory",
        action="configure the GPU and model to see bandwidth / weight bytes; a GPU with more "
        "memory bandwidth (not more FLOPs) raises the ceiling",
        why="single-stream decode cannot beat bandwidth / weight bytes, whatever the flags",
        applies={BANDWIDTH: 8},
        promote="near_ceiling",
    ),
    HintSpec(
        id="disaggregated-prefill",
        title="Disaggregate prefill at scale",
        action="separate prefill and decode worker pools (vLLM disaggregated prefill, llm-d, "
        "Dynamo) — only with many GPUs and steady traffic for both",
        why="prefill stops competing with decode for the same steps; on one GPU chunked "
        "prefill already gives most of that isolation",
        applies={INTERFERENCE: 7, PREFILL: 8},
    ),
    HintSpec(
        id="check-metrics",
        title="Check what the server exports",
        action="curl the /metrics URL: vLLM must run without --disable-log-stats, and the "
        "scrape must succeed every interval",
        why="a window without its signals cannot be judged; it is never reported healthy",
        applies={NO_DATA: 1},
    ),
)

_PROMOTED = -100


def rank_hints(
    situation: str,
    facts: Facts,
    config: DiagnosisConfig,
    roof: Roofline | None = None,
    also: tuple[str, ...] = (),
) -> tuple[Hint, ...]:
    """The hints for ``situation`` (e.g. ``decode_bound/bandwidth_bound``), best first.

    ``also`` are the situations of the secondary findings (for ``conflicts``).
    """
    scored: list[tuple[int, int, Hint]] = []
    for order, spec in enumerate(CATALOG):
        base = spec.applies.get(situation)
        if base is None or any(s in spec.conflicts for s in also):
            continue
        if spec.requires is not None and PREDICATES[spec.requires](facts, config, roof)[0] is False:
            continue
        because = ""
        if spec.promote is not None:
            holds, text = PREDICATES[spec.promote](facts, config, roof)
            if holds:
                base += _PROMOTED
                because = text
        why = f"{spec.why} ({because})" if because else spec.why
        scored.append((base, order, Hint(spec.id, spec.title, spec.action, why)))
    return tuple(h for _, _, h in sorted(scored, key=lambda s: (s[0], s[1])))
