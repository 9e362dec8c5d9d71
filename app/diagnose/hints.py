"""What to change: the hint catalog as data, each hint built from the evidence.

Each entry names the vLLM flag or action, a one-line why (docs/concepts.md, "What to change"),
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
surge is about arrivals; KV pressure about KV usage — unless arrivals outrun completions
by more than any one memory lever grows the pool, when no memory setting ends the queue
and the arrivals lead: more replicas first). Then the promoted ones, then by base rank.
``conflicts`` drops a hint that would worsen a co-occurring class (a bigger step budget
while prefill chunks already stall decode).

The builders live with their family: ``prefill_hints`` (prefix caching, the prompt, the
step's token budget), ``memory_hints`` (the KV pool, the weights, the batch size,
speculative decoding), ``queue_hints`` (capacity, deferred admission, stalls),
``frontend_hints`` (the way between client and engine, the probe, the /metrics page) and
``transfer_hints`` (the KV transfer of disaggregated serving), each with the numbers its
hints compute and the docs/concepts.md line each traces to; what they share (the situations,
formatting, readings) is ``hintkit``.
"""

from __future__ import annotations

from app.diagnose.config import DiagnosisConfig, Slo
from app.diagnose.engine_flags import for_engine
from app.diagnose.facts import Facts
from app.diagnose.frontend_hints import (
    check_metrics,
    check_probe,
    frontend_api_server,
    frontend_connection,
    frontend_path,
)
from app.diagnose.hintkit import (
    BANDWIDTH,
    CACHE_MISS,
    CAPACITY_LOSS,
    DEFERRED,
    FRONTEND,
    INTERFERENCE,
    KV,
    LONG_PROMPTS,
    NO_DATA,
    PREFILL,
    SPEC,
    STALLED,
    SURGE,
)

# The catalog's records, re-exported: builders and callers import them from either module.
from app.diagnose.hintspec import Builder as Builder
from app.diagnose.hintspec import Context as Context
from app.diagnose.hintspec import HintSpec as HintSpec
from app.diagnose.hintspec import Made as Made
from app.diagnose.memory_hints import (
    faster_memory,
    fp8_kv,
    gpu_memory,
    max_model_len,
    outgrows_memory,
    quantize,
    seqs_down,
    seqs_up,
    shorter_context,
    spec_drafter,
)
from app.diagnose.prefill_hints import (
    batched_down,
    batched_up,
    disaggregate,
    prefix_caching,
    shorter_prompt,
    stable_prefix,
)
from app.diagnose.queue_hints import (
    check_slowdown,
    deferred_admission,
    engine_health,
    for_stall_or_deferred,
    hang_collective,
    more_replicas,
    rate_limit,
)
from app.diagnose.records import Change, Hint, Roofline
from app.diagnose.server import ServerSettings, ServerView, resolve
from app.diagnose.transfer_hints import TRANSFER_HINTS
from app.model import Derived

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
# The leads a KV-pressure window's memory levers answer; where arrivals outrun
# completions by more than any one of them grows the pool (``memory_hints.outgrows_memory``)
# the arrivals lead instead: the capacity hint first.
KV_LEADS = ("kv_usage_avg+", "preemptions_rate+")


CATALOG: tuple[HintSpec, ...] = (
    HintSpec(
        id="prefix-caching",
        title="Enable prefix caching",
        why="a prefix shared by many requests (system prompt, chat history) is prefilled "
        "once and then read from the cache",
        applies={CACHE_MISS: 1, LONG_PROMPTS: 3, INTERFERENCE: 4, SURGE: 5, KV: 7},
        build=prefix_caching,
        addresses=("prefix_cache_hit_rate-",),
    ),
    HintSpec(
        id="shorter-prompt",
        title="Shorten the prompt, or keep a stable cached system prompt",
        why="the system prompt is prefilled on every request, and prefill cost grows at "
        "least linearly with prompt length",
        applies={LONG_PROMPTS: 1, CACHE_MISS: 3, INTERFERENCE: 3, SURGE: 6},
        build=shorter_prompt,
        addresses=("prompt_tokens_mean+",),
    ),
    HintSpec(
        id="batched-tokens-up",
        title="Raise --max-num-batched-tokens",
        why="a larger per-step token budget prefills more of each prompt per step, so the "
        "first token comes sooner (streams already running pause a little longer)",
        applies={LONG_PROMPTS: 2, CACHE_MISS: 4, SURGE: 8},
        build=batched_up,
        addresses=("prompt_tokens_mean+", "step_tokens_p99-"),
        conflicts=(INTERFERENCE,),
    ),
    HintSpec(
        id="batched-tokens-down",
        title="Lower --max-num-batched-tokens",
        why="smaller prefill chunks stall the running streams for less time per step: a "
        "shorter ITL tail for slightly later first tokens",
        applies={INTERFERENCE: 2},
        build=batched_down,
        addresses=("step_tokens_p99+",),
        conflicts=PREFILL,
    ),
    HintSpec(
        id="quantize-weights",
        title="Quantise the weights",
        why="decode reads every weight each step: half the bytes roughly doubles the "
        "per-stream ceiling and frees memory for the KV cache",
        applies={BANDWIDTH: 1, KV: 5, SPEC: 4},
        build=quantize,
    ),
    HintSpec(
        id="fp8-kv-cache",
        title="Store the KV cache in fp8",
        why="half the bytes per cached token: twice the tokens fit in the pool, and each "
        "decode step reads half as much KV",
        applies={KV: 1, BANDWIDTH: 4},
        build=fp8_kv,
        addresses=("kv_usage_avg+", "preemptions_rate+"),
    ),
    HintSpec(
        id="gpu-memory-utilization",
        title="Give the KV pool more memory",
        why="the KV pool is sized once at start-up from this share of GPU memory; a bigger "
        "pool holds more tokens before requests wait or get preempted",
        applies={KV: 2},
        build=gpu_memory,
        addresses=("kv_usage_avg+", "preemptions_rate+"),
    ),
    HintSpec(
        id="max-model-len",
        title="Cap the context length",
        why="bounds the KV one request can hold, and the KV each decode step has to read",
        applies={KV: 3, BANDWIDTH: 6},
        build=max_model_len,
    ),
    HintSpec(
        id="max-num-seqs-down",
        title="Lower --max-num-seqs",
        why="fewer sequences in flight hold less KV (no preempt-and-recompute churn) and "
        "make each step lighter, at the cost of total throughput",
        applies={KV: 4, BANDWIDTH: 3},
        build=seqs_down,
        addresses=("running_avg+",),
    ),
    HintSpec(
        id="max-num-seqs-up",
        title="Raise --max-num-seqs",
        why="the KV pool has room: one weight read serves the whole batch, so admitting "
        "more sequences per step raises throughput almost for free",
        applies={SURGE: 3},
        build=seqs_up,
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
        build=more_replicas,
        addresses=("arrival_rate+",),
    ),
    HintSpec(
        id="rate-limit",
        title="Rate-limit the surge",
        why="requests that cannot be served soon only wait in the queue and push every "
        "later TTFT up; shedding the excess keeps the admitted ones within their SLO",
        applies={SURGE: 2},
        build=rate_limit,
        addresses=("arrival_rate+",),
    ),
    HintSpec(
        id="shorter-context",
        title="Trim the context",
        why="every decode step re-reads all earlier K/V of every sequence in the batch: long "
        "histories, and long answers that also keep more requests in the batch, make each "
        "step's read bigger",
        applies={BANDWIDTH: 5},
        build=shorter_context,
        addresses=("output_tokens_mean+", "prompt_tokens_mean+"),
    ),
    HintSpec(
        id="faster-memory",
        title="Compare with the decode ceiling; move to faster memory",
        why="single-stream decode cannot beat bandwidth / weight bytes, whatever the flags",
        applies={BANDWIDTH: 8, CAPACITY_LOSS: 2},
        build=faster_memory,
    ),
    HintSpec(
        id="disaggregated-prefill",
        title="Disaggregate prefill at scale",
        why="prefill stops competing with decode for the same steps; on one GPU chunked "
        "prefill already gives most of that isolation",
        applies={INTERFERENCE: 7},
        build=disaggregate,
    ),
    HintSpec(
        id="stable-prefix",
        title="Restore the shared prefix the cache served",
        why="a repeated prefix is prefilled once and then read from the cache; one "
        "differing token early in the prompt makes every later token a miss",
        applies={CACHE_MISS: 2},
        build=stable_prefix,
        addresses=("prefix_cache_hit_rate-",),
    ),
    HintSpec(
        id="check-slowdown",
        title="Find what slowed the server",
        why="the same traffic is served slower: a lost part of the server's capacity, "
        "not more demand — more replicas only hide it",
        applies={CAPACITY_LOSS: 1},
        build=check_slowdown,
        addresses=("completion_rate-", "steps_per_s-"),
    ),
    HintSpec(
        id="deferred-admission",
        title="Find what defers admission",
        why="deferred requests wait for a transient constraint, not for capacity: more "
        "replicas or slots would not admit them sooner",
        applies={DEFERRED: 1},
        build=deferred_admission,
        addresses=("waiting_deferred_avg+",),
    ),
    HintSpec(
        id="spec-decode-drafter",
        title="Fix or drop the speculative drafter",
        why="each verify step reads the weights once for 1 + k tokens per sequence; with "
        "few drafts accepted it yields barely more than one token, and the drafter's passes "
        "and the extra verify tokens are paid for nothing",
        applies={SPEC: 1},
        build=spec_drafter,
        addresses=("spec_decode_acceptance-",),
    ),
    HintSpec(
        id="engine-health",
        title="Check the engine: health endpoint, logs, restart",
        why="requests sit in the batch but no step, token or finished request came for the "
        "whole window: every step emits a token per decoding sequence, so no load or "
        "tuning knob explains it",
        applies={STALLED: 1},
        build=engine_health,
        addresses=("steps_per_s-", "completion_rate-"),
    ),
    HintSpec(
        id="hang-collective",
        title="Look for a stuck collective (NCCL) across GPUs",
        why="a step waits for every rank: one dead or hung worker blocks the all-reduce, "
        "and with it the whole engine",
        applies={STALLED: 2},
        build=hang_collective,
        addresses=("steps_per_s-", "completion_rate-"),
    ),
    HintSpec(
        id="hang-structured-output",
        title="Check structured-output requests (grammar compilation)",
        why="a request's grammar is compiled before it is scheduled; a pathological one "
        "can hold it, and the scheduler behind it, for a long time",
        applies={STALLED: 3, DEFERRED: 2},
        build=for_stall_or_deferred(
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
        build=for_stall_or_deferred(
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
        build=check_metrics,
    ),
    HintSpec(
        id="check-probe",
        title="Check the probe's request",
        why="a probe that fails says nothing of the server's speed until it answers again",
        applies={NO_DATA: 2},
        build=check_probe,
    ),
    HintSpec(
        id="frontend-connection",
        title="Cut the connection time",
        why="every new connection pays TCP (and TLS) round trips before the request is even "
        "sent; no engine flag shortens a round trip",
        applies={FRONTEND: 1},
        build=frontend_connection,
    ),
    HintSpec(
        id="frontend-path",
        title="Find the hop that adds the time",
        why="the engine reports its first token sooner than clients receive it: the time is "
        "spent on the way — network, load balancer, proxy or gateway",
        applies={FRONTEND: 2},
        build=frontend_path,
    ),
    HintSpec(
        id="frontend-api-server",
        title="Relieve the API server",
        why="the API process tokenises, templates and streams for every request on one "
        "event loop before and after the engine's work; when it is busy, requests wait "
        "in front of an idle engine",
        applies={FRONTEND: 3},
        build=frontend_api_server,
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
    if situation == KV and lead in (None, *KV_LEADS) and outgrows_memory(ctx):
        lead = "arrival_rate+"  # capacity, not memory: more replicas first
    scored: list[tuple[int, int, int, int, Hint]] = []
    for order, spec in enumerate(CATALOG):
        base = spec.applies.get(situation)
        if base is None or any(s in spec.conflicts for s in also):
            continue
        made = spec.build(ctx)
        if made is None or not made.evidence:
            continue
        hint = for_engine(
            Hint(
                spec.id,
                spec.title,
                made.action,
                f"{made.evidence} — {spec.why}",
                made.evidence,
                made.setting,
            ),
            ctx.server.engine,
        )
        if hint is None:
            continue  # the engine lacks the lever (app.diagnose.engine_flags)
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
