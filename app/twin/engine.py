"""The twin run through the simulator's engine: vLLM's scheduling, the fitted step time.

The engine (``app.sim.engine.Replica``: continuous batching, the token budget and chunked
prefill, KV blocks, prefix caching, preemption and recompute) is driven by the twin's
workload — its arrival timeline (scaled), one request class with the fitted lengths, a
shared prefix for the prefix-cache hits — and steps priced by the fitted
:class:`~app.twin.steptime.StepModel` instead of the simulator's roofline. TTFT and ITL
are observed into histograms with the *measured page's* bucket bounds, so the twin's
p50/p99 carry the same bucket interpolation as the numbers they are compared with
(Prometheus' ``histogram_quantile``).

A run starts with a warm-up at the first tile's rate (the recorded span did not start
empty), then its observations are cleared and the span is replayed.
"""

from __future__ import annotations

import itertools
import math
import random
from bisect import bisect_right
from dataclasses import dataclass, field

from app.model import Quantile
from app.pacing import pace
from app.sim.config import EngineConfig, SimConfig, Slo
from app.sim.device import get_device
from app.sim.engine import Replica
from app.sim.metrics import Hist
from app.sim.model import Physics, PhysicsParams, get_model
from app.sim.scenario import Phase, Scenario
from app.sim.workload import LengthDist, RequestClass, Workload
from app.twin.fit import Engine, Twin
from app.twin.frontend import ttft_quantiles
from app.twin.lengths import LengthFit
from app.twin.steptime import StepModel
from app.windows.quantile import histogram_quantiles

SAMPLE_S = 5.0
WARMUP_S = 60.0


@dataclass(frozen=True, slots=True)
class Knobs:
    """What a run changes from the fitted twin (1 / None: as fitted)."""

    rate_scale: float = 1.0
    prompt_scale: float = 1.0
    output_scale: float = 1.0
    prefix_cache_hit_rate: float | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    num_gpu_blocks: int | None = None
    step_scale: float = 1.0


@dataclass(frozen=True, slots=True)
class Outcome:
    """One run's figures, as the service would compute them over the span."""

    ttft_p50: Quantile
    ttft_p99: Quantile
    itl_p50: Quantile
    itl_p99: Quantile
    itl_mean: float | None
    waiting_avg: float
    kv_usage_max: float
    preemptions_per_s: float
    finished: int
    # From the arrival to the first scheduling (vLLM's page starts the queue later, at
    # its engine core's QUEUED event; ``step_wait_mean`` is the difference).
    queue_time_mean: float | None = None
    prefill_time_mean: float | None = None
    # The engine's TTFTs (queue + prefill) before the front end's delay is added, and the
    # seed that drew the delays: the front end's spread is fitted on them.
    engine_ttfts: tuple[float, ...] = field(default=(), repr=False, compare=False)
    seed: int = 0
    # The finished requests' mean wait for the step in flight when they arrived: in the
    # engine's TTFT here, while vLLM books it in neither queue nor prefill (its engine core
    # reads a new request between two steps), so on a page it is in the API server's share.
    step_wait_mean: float | None = None
    # The steps the run took against those the span showed (``Twin.seen``): the largest
    # step's new tokens and sequences, and the share of the step time spent in steps
    # beyond the span's (app.twin.extrapolate).
    extent: Extent | None = field(default=None, compare=False)


class _Samples(Hist):
    """A histogram that keeps its observations (the engine's TTFTs)."""

    __slots__ = ("values",)

    def __init__(self, bounds: tuple[float, ...]) -> None:
        super().__init__(bounds)
        self.values: list[float] = []

    def observe(self, value: float) -> None:
        super().observe(value)
        self.values.append(value)


@dataclass(frozen=True, slots=True)
class _TimelineWorkload(Workload):
    """A workload whose rate follows the twin's arrival timeline."""

    starts: tuple[float, ...] = ()
    values: tuple[float, ...] = ()
    offset: float = 0.0

    def rate_segment(self, t: float) -> tuple[float, float]:
        local = t - self.offset
        if local < 0:
            return self.values[0] * self.rate_multiplier, self.offset
        i = 0
        lo, hi = 0, len(self.starts)
        while lo < hi:  # the last tile starting at or before ``local``
            mid = (lo + hi) // 2
            if self.starts[mid] <= local:
                i = mid
                lo = mid + 1
            else:
                hi = mid
        edge = self.starts[i + 1] + self.offset if i + 1 < len(self.starts) else math.inf
        return self.values[i] * self.rate_multiplier, edge


@dataclass(frozen=True, slots=True)
class _TwinConfig(SimConfig):
    step: StepModel = StepModel(0.01, 0.0, 0.0, 0.0)

    def build_physics(self) -> Physics:
        return self.step  # type: ignore[return-value]  # the engine only steps with it


class _AtSpeed:
    """The fitted step time at the span's speed of the moment (``Twin.speed``,
    :mod:`app.twin.speed`): a step is priced at the replica's clock when it starts; the
    warm-up runs at the first window's speed."""

    __slots__ = ("factors", "overhead_s", "replica", "starts", "step", "_lo", "_hi", "_k")

    def __init__(
        self, step: StepModel, speed: tuple[tuple[float, float], ...], replica: Replica
    ) -> None:
        self.step = step
        self.overhead_s = step.overhead_s
        self.starts = [t + WARMUP_S for t, _ in speed]
        self.factors = [k for _, k in speed]
        self.replica = replica
        # The factor in force over [_lo, _hi) of the clock (looked up again outside it).
        self._lo, self._hi, self._k = math.inf, -math.inf, 1.0

    def step_time(
        self, new_tokens: int, attn_pairs: float, context_tokens: int, num_seqs: int
    ) -> float:
        now = self.replica.now
        if not self._lo <= now < self._hi:
            starts = self.starts
            i = max(bisect_right(starts, now) - 1, 0)
            self._lo = starts[i] if i > 0 else -math.inf
            self._hi = starts[i + 1] if i + 1 < len(starts) else math.inf
            self._k = self.factors[i]
        return self._k * self.step.step_time(new_tokens, attn_pairs, context_tokens, num_seqs)

    def draft_time(self, tokens: int, cost: float) -> float:
        return 0.0


@dataclass(frozen=True, slots=True)
class Extent:
    """The steps a run took: its largest step's new tokens and sequences, and the share
    of its step time in steps larger than the span showed (by ``GROW`` or more)."""

    tokens: int
    seqs: int
    beyond_tokens: float
    beyond_seqs: float


# A step counts as beyond the span's when it is this much larger than the largest seen.
GROW = 1.25


class _Tracked:
    """The physics of a run, keeping its :class:`Extent` against the span's steps."""

    __slots__ = ("inner", "overhead_s", "seen_tokens", "seen_seqs", "total", "tokens", "seqs",
                 "over_tokens", "over_seqs")  # fmt: skip

    def __init__(self, inner: object, seen_tokens: float, seen_seqs: float) -> None:
        self.inner = inner
        self.overhead_s = getattr(inner, "overhead_s", 0.0)
        self.seen_tokens = seen_tokens * GROW
        self.seen_seqs = seen_seqs * GROW
        self.total = self.over_tokens = self.over_seqs = 0.0
        self.tokens = self.seqs = 0

    def step_time(
        self, new_tokens: int, attn_pairs: float, context_tokens: int, num_seqs: int
    ) -> float:
        dt: float = self.inner.step_time(  # type: ignore[attr-defined]
            new_tokens, attn_pairs, context_tokens, num_seqs
        )
        self.total += dt
        if new_tokens > self.tokens:
            self.tokens = new_tokens
        if num_seqs > self.seqs:
            self.seqs = num_seqs
        if new_tokens > self.seen_tokens:
            self.over_tokens += dt
        if num_seqs > self.seen_seqs:
            self.over_seqs += dt
        return dt

    def draft_time(self, tokens: int, cost: float) -> float:
        return 0.0

    def extent(self) -> Extent:
        t = self.total if self.total > 0 else 1.0
        return Extent(self.tokens, self.seqs, self.over_tokens / t, self.over_seqs / t)


@dataclass(frozen=True, slots=True)
class _Pieces(LengthDist):
    """Token counts drawn from a histogram's buckets (:mod:`app.twin.lengths`): a bucket
    by its share, then a length uniform inside its bounds."""

    cum: tuple[float, ...] = ()
    bounds: tuple[tuple[float, float], ...] = ()

    def sample(self, rng: random.Random) -> int:
        i = min(bisect_right(self.cum, rng.random()), len(self.bounds) - 1)
        lo, hi = self.bounds[i]
        return max(1, round(lo + (hi - lo) * rng.random()))


def _lengths(fit: LengthFit, scale: float) -> LengthDist:
    if fit.pieces:
        pieces = fit.scaled(scale).pieces
        cum = tuple(itertools.accumulate(w for w, _, _ in pieces))
        return _Pieces(max(1.0, fit.mean * scale), 0.0, cum, tuple((a, b) for _, a, b in pieces))
    return LengthDist(max(1.0, fit.median * scale), fit.sigma)


def config(twin: Twin, knobs: Knobs) -> tuple[_TwinConfig, Engine]:
    """The simulator's config of a twin with ``knobs`` applied."""
    e = twin.engine
    engine = Engine(
        knobs.max_num_seqs or e.max_num_seqs,
        knobs.max_num_batched_tokens or e.max_num_batched_tokens,
        e.max_model_len,
        knobs.num_gpu_blocks or e.num_gpu_blocks,
        e.block_size,
        e.enable_prefix_caching,
        e.max_num_queued_reqs,
    )
    hit = (
        twin.prefix_hit_rate if knobs.prefix_cache_hit_rate is None else knobs.prefix_cache_hit_rate
    )
    prompt_mean = twin.prompt.mean * knobs.prompt_scale
    shared = int(round(hit * prompt_mean)) if engine.enable_prefix_caching else 0
    prompt = _lengths(twin.prompt, knobs.prompt_scale * max(1.0 - (shared / prompt_mean), 0.01))
    klass = RequestClass(
        "fitted", 1.0, prompt, _lengths(twin.output, knobs.output_scale), engine.max_model_len
    )
    starts = tuple(t for t, _ in twin.rates) or (0.0,)
    values = tuple(r for _, r in twin.rates) or (0.0,)
    workload = _TimelineWorkload(
        rate=1.0,
        classes=(klass,),
        rate_multiplier=knobs.rate_scale,
        shared_prefix_tokens=shared,
        prefix_share=1.0 if shared else 0.0,
        starts=starts,
        values=values,
        offset=WARMUP_S,
    )
    sim_engine = EngineConfig(
        max_num_seqs=engine.max_num_seqs,
        max_num_batched_tokens=engine.max_num_batched_tokens,
        block_size=engine.block_size,
        max_model_len=engine.max_model_len,
        enable_prefix_caching=engine.enable_prefix_caching,
        num_gpu_blocks_override=engine.num_gpu_blocks,
        max_num_queued_reqs=engine.max_num_queued_reqs,
    )
    cfg = _TwinConfig(
        device=get_device("l40s"),  # unused: the fitted step model prices every step
        model=get_model("llama-3.1-8b"),
        physics=PhysicsParams(),
        engine=sim_engine,
        workload=workload,
        slo=Slo(),
        num_gpu_blocks=engine.num_gpu_blocks,
        step=twin.step.scaled(knobs.step_scale),
    )
    return cfg, engine


def run(
    twin: Twin,
    knobs: Knobs,
    *,
    seed: int,
    ttft_bounds: tuple[float, ...],
    itl_bounds: tuple[float, ...],
) -> Outcome:
    """Replay the twin's span once with ``knobs`` (module docstring)."""
    cfg, _ = config(twin, knobs)
    scenario = Scenario(
        "twin", "", None, WARMUP_S + twin.duration, None, (Phase(0.0, "twin", cfg, None),)
    )
    replica = Replica(scenario, seed=seed)
    if twin.speed:
        replica.physics = _AtSpeed(cfg.step, twin.speed, replica)  # type: ignore[assignment]
    replica.advance_to(WARMUP_S)
    tracked = None
    if twin.seen is not None:
        tracked = _Tracked(replica.physics, twin.seen.tokens, twin.seen.running)
        replica.physics = tracked  # type: ignore[assignment]
    m = replica.metrics
    ttfts = _Samples(ttft_bounds)
    m.ttft = ttfts
    m.itl = Hist(itl_bounds)
    m.queue = Hist(m.queue.bounds)
    m.prefill = Hist(m.prefill.bounds)
    pre0 = m.preemptions
    done0 = sum(m.success.values())
    wait0, waits0 = replica.step_wait_s, replica.step_waits
    waiting: list[float] = []
    kv_max = 0.0
    t = WARMUP_S
    end = WARMUP_S + twin.duration
    while t < end:
        t = min(t + SAMPLE_S, end)
        replica.advance_to(t)
        waiting.append(float(replica.num_waiting))
        kv_max = max(kv_max, replica.kv_usage)
        pace()  # a background job's share of the interpreter (app.pacing)
    t50, t99, _ = ttft_quantiles(ttfts.values, twin.frontend, seed, ttft_bounds)
    waits = replica.step_waits - waits0
    step_wait = (replica.step_wait_s - wait0) / waits if waits > 0 else None
    iq = histogram_quantiles((0.5, 0.99), m.itl.bounds, m.itl.cumulative())
    return Outcome(
        t50,
        t99,
        iq[0],
        iq[1],
        m.itl.sum / m.itl.count if m.itl.count else None,
        sum(waiting) / len(waiting) if waiting else 0.0,
        kv_max,
        (m.preemptions - pre0) / twin.duration,
        int(sum(m.success.values()) - done0),
        # From the arrival: the wait for the step in flight is the engine's to the twin.
        m.queue.sum / m.queue.count + (step_wait or 0.0) if m.queue.count else None,
        m.prefill.sum / m.prefill.count if m.prefill.count else None,
        tuple(ttfts.values),
        seed,
        step_wait,
        None if tracked is None else tracked.extent(),
    )
