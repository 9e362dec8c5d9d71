"""Windows of one stream → its twin: workload, step time and engine settings (pure).

The input is a :class:`Span`: the stream's windows tiling the span (``tiles``, 30 s
each by default) and one window over all of it (``whole``), with the page's
``cache_config_info`` and the configured server settings. Every fitted number says
where it came from (``Twin.sources``); what the data could not pin down is a warning
naming the prior that filled it.

Workload (``docs/whatif.md``):

* **arrivals**: the arrival rate of each tile (completions + rejections + the change of
  running and waiting, ``Derived.arrival_rate``) — a timeline the twin replays, so the
  burstiness seen at the tile's scale is kept; Poisson within a tile;
* **lengths**: prompt and output tokens from ``request_prompt_tokens`` and
  ``request_generation_tokens`` (:mod:`app.twin.lengths`);
* **prefix cache**: the hit rate (``prefix_cache_hits / queries``) becomes a shared
  prefix of that share of the mean prompt, which the engine's prefix cache serves.

Engine: ``max_num_seqs``, ``max_num_batched_tokens``, ``max_model_len``,
``num_gpu_blocks``, ``block_size``, prefix caching — the page's ``cache_config_info``
first, then the configured ``server:`` settings, then vLLM's defaults with a warning
(``app.diagnose.server.resolve``). ``max_num_seqs``, which the page does not state, is
the configured value, else the page's where its ``cache_config_info`` carries one, else
what the page shows (:func:`pinned_running`: the running gauge held at one integer while
requests wait and the KV pool has room), else vLLM's default with a warning. A KV pool
that nothing states is estimated from the KV usage and the sequences running, with a
warning.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.diagnose.server import ServerSettings, ServerView, resolve
from app.model import Window
from app.twin.frontend import NONE, FrontEnd, fit_mean
from app.twin.lengths import LengthFit, fit_lengths
from app.twin.speed import timeline
from app.twin.stepobs import Seen, alternatives, observations, priors, seen_steps
from app.twin.steptime import Observation, StepFit, StepModel, fit_step

DEFAULT_MAX_MODEL_LEN = 32768
# max_num_seqs from the page (:func:`pinned_running`): requests waiting on average in a
# window for its running count to be held by the cap; the KV usage under which the pool
# is not what holds it; how far a window's mean running count may sit from the cap (a
# sample taken as a sequence finished and before the next was admitted).
PINNED_WAITING = 1.0
PINNED_KV = 0.9
PINNED_SLACK = 0.5


@dataclass(frozen=True, slots=True)
class Span:
    """What the twin is fitted on: one stream's windows over ``(start, end]``."""

    tiles: Sequence[Window]
    whole: Window
    info: Mapping[str, str] = field(default_factory=dict)
    server: ServerSettings = field(default_factory=ServerSettings)


@dataclass(frozen=True, slots=True)
class Engine:
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    num_gpu_blocks: int
    block_size: int
    enable_prefix_caching: bool
    # The queue's cap (``--max-num-queued-reqs``, vLLM 0.33+): the most requests seen
    # waiting, when the page counted admission rejections; None: no cap seen.
    max_num_queued_reqs: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_num_queued_reqs": self.max_num_queued_reqs,
            "max_num_seqs": self.max_num_seqs,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "max_model_len": self.max_model_len,
            "num_gpu_blocks": self.num_gpu_blocks,
            "block_size": self.block_size,
            "enable_prefix_caching": self.enable_prefix_caching,
        }


@dataclass(frozen=True, slots=True)
class Twin:
    """A fitted server. ``rates``: (tile start, requests/s) from the span's start;
    ``duration``: the span's seconds; ``sources``: where each number came from."""

    start: float
    duration: float
    rates: tuple[tuple[float, float], ...]
    prompt: LengthFit
    output: LengthFit
    prefix_hit_rate: float
    engine: Engine
    step: StepModel
    step_residual: float
    sources: dict[str, str]
    warnings: tuple[str, ...]
    # The API server's share of each TTFT (app.twin.frontend).
    frontend: FrontEnd = NONE
    # (tile start, step-time factor) from the span's start: its speed (app.twin.speed).
    speed: tuple[tuple[float, float], ...] = ()
    seen: Seen | None = None
    # Step models as consistent with the windows, other priors where they are silent
    # (app.twin.stepobs.alternatives): what a prediction past ``seen`` may as well be.
    alternatives: tuple[tuple[str, str, StepModel], ...] = ()

    @property
    def rate_mean(self) -> float:
        if not self.rates:
            return 0.0
        edges = [t for t, _ in self.rates[1:]] + [self.duration]
        total = 0.0
        for (t, r), e in zip(self.rates, edges, strict=True):
            total += r * (e - t)
        return total / self.duration if self.duration > 0 else 0.0

    @property
    def burstiness(self) -> float:
        """The coefficient of variation of the tiles' arrival rates."""
        rs = [r for _, r in self.rates]
        if len(rs) < 2:
            return 0.0
        m = sum(rs) / len(rs)
        if m <= 0:
            return 0.0
        return math.sqrt(sum((r - m) ** 2 for r in rs) / len(rs)) / m

    def to_dict(self) -> dict[str, Any]:
        return {
            "span": {"start": self.start, "duration_s": self.duration},
            "workload": {
                "arrival_rate": round(self.rate_mean, 4),
                "burstiness": round(self.burstiness, 3),
                "rate_timeline": [[round(t, 1), round(r, 4)] for t, r in self.rates],
                "prompt_tokens": self.prompt.to_dict(),
                "output_tokens": self.output.to_dict(),
                "prefix_cache_hit_rate": round(self.prefix_hit_rate, 4),
            },
            "engine": self.engine.to_dict(),
            "frontend": self.frontend.to_dict(),
            "speed_timeline": [[round(t, 1), round(k, 4)] for t, k in self.speed],
            "step_time": {**self.step.to_dict(), "residual": round(self.step_residual, 4)},
            "steps_seen": None if self.seen is None else self.seen.to_dict(),
            "sources": dict(self.sources),
        }


class FitError(ValueError):
    """The span cannot give a twin (no finished request, no token gap): says why."""


def _hist(w: Window, signal: str) -> Any:
    return w.histograms.get(signal)


def _arrivals(tiles: Sequence[Window], start: float) -> tuple[tuple[float, float], ...]:
    """Each tile's arrival rate, shrunk toward the span's mean by the share of their
    spread that Poisson counting alone explains (empirical Bayes): a tile's count of a
    constant-rate stream scatters by √n, and the twin draws its arrivals by Poisson
    again, so the raw rates would count that scatter twice. What is left is the
    burstiness the server saw beyond Poisson."""
    raw: list[tuple[float, float, float]] = []
    last = None
    for t in tiles:
        r = t.derived.arrival_rate
        if r is None:
            r = t.derived.completion_rate
        if r is None:
            r = last if last is not None else 0.0
        last = r
        raw.append((t.start - start, max(0.0, r), max(t.end - t.start, 1e-9)))
    if len(raw) < 2:
        return tuple((t0, r) for t0, r, _ in raw)
    mean = sum(r for _, r, _ in raw) / len(raw)
    var = sum((r - mean) ** 2 for _, r, _ in raw) / (len(raw) - 1)
    poisson = sum(mean / d for _, _, d in raw) / len(raw)  # a rate's variance from counting
    keep = 0.0 if var <= 0 else max(0.0, 1.0 - poisson / var)
    return tuple((t0, max(0.0, mean + keep * (r - mean))) for t0, r, _ in raw)


def pinned_running(tiles: Sequence[Window]) -> int | None:
    """``max_num_seqs`` as the page shows it: the running gauge held at one integer in
    every window where requests waited for capacity throughout (on average, and at its
    first and last sample where the window has them) and the KV pool had room (KV usage
    under :data:`PINNED_KV` at its highest, no preemption) — its highest sample and its
    mean that integer (the mean within :data:`PINNED_SLACK`) — and never above it in any
    window of the span. None where no such window is seen, or where they disagree.

    A window in which the queue formed or drained ran below the cap for part of it: it
    says nothing either way and is left out. Where the KV pool is what holds the batch,
    the running count moves with the lengths and the pool is nearly full: those windows
    say nothing of the cap and are left out too.
    """
    peak: float | None = None
    held: list[tuple[float, float]] = []
    for t in tiles:
        run = t.gauges.get("running")
        if run is None or run.max is None:
            continue
        peak = run.max if peak is None else max(peak, run.max)
        d = t.derived
        name = "waiting_capacity" if d.waiting_capacity_avg is not None else "waiting"
        waiting = t.gauges.get(name)
        if waiting is None or waiting.avg is None or waiting.avg < PINNED_WAITING:
            continue
        if run.avg is None or any(
            edge is not None and edge < PINNED_WAITING for edge in (waiting.first, waiting.last)
        ):
            continue
        if (d.kv_usage_max is None or d.kv_usage_max >= PINNED_KV) or t.increases.get(
            "preemptions", 0.0
        ) > 0:
            continue
        held.append((run.avg, run.max))
    if not held or peak is None:
        return None
    cap = held[0][1]
    if cap < 1 or not float(cap).is_integer() or peak != cap:
        return None
    if any(top != cap or abs(avg - cap) > PINNED_SLACK for avg, top in held):
        return None
    return int(cap)


def _max_num_seqs(
    span: Span, view: ServerView, warnings: list[str], sources: dict[str, str]
) -> int:
    """``max_num_seqs``: configured, else the page's, else seen (:func:`pinned_running`),
    else vLLM's default with a warning."""
    s = view.max_num_seqs
    seen = pinned_running(span.tiles)
    if s.source == "configured":
        sources[s.name] = s.origin()
        if seen is not None and seen != s.value:
            warnings.append(
                f"max_num_seqs is configured as {s.shown()} but the running count sat at "
                f"{seen} with requests waiting; the configured value is used (is the "
                "configuration stale, or for another server?)"
            )
        return int(s.value)
    page = _page_int(span.info, "max_num_seqs")
    if page is not None:
        sources[s.name] = "cache_config_info"
        return page
    if seen is not None:
        sources[s.name] = f"inferred: running pinned at {seen} with requests waiting"
        return seen
    sources[s.name] = s.origin()
    if s.assumed:
        warnings.append(
            f"{s.name} not known: taken as {s.shown()} ({s.origin()}; give --server {s.name}=…)"
        )
    return int(s.value)


def _page_int(info: Mapping[str, str], key: str) -> int | None:
    try:
        value = float(info.get(key, ""))
    except ValueError:
        return None
    return int(value) if math.isfinite(value) and value >= 1 and value.is_integer() else None


def _engine(
    span: Span, prompt: LengthFit, output: LengthFit, warnings: list[str], sources: dict[str, str]
) -> Engine:
    view = resolve(span.server, span.info)
    values: dict[str, Any] = {"max_num_seqs": _max_num_seqs(span, view, warnings, sources)}
    for s in (
        view.max_num_batched_tokens,
        view.block_size,
        view.enable_prefix_caching,
    ):
        values[s.name] = s.value
        sources[s.name] = s.origin()
        if s.assumed:
            warnings.append(
                f"{s.name} not known: taken as {s.shown()} ({s.origin()}; give --server {s.name}=…)"
            )
    mml = view.max_model_len
    if mml.known:
        values["max_model_len"] = int(mml.value)
        sources["max_model_len"] = mml.origin()
    else:
        values["max_model_len"] = DEFAULT_MAX_MODEL_LEN
        sources["max_model_len"] = f"assumed {DEFAULT_MAX_MODEL_LEN:,} (lengths clipped to it)"
        warnings.append(
            f"max_model_len not known: taken as {DEFAULT_MAX_MODEL_LEN:,} (give --server "
            "max_model_len=…)"
        )
    blocks = view.num_gpu_blocks.value
    if view.num_gpu_blocks.known:
        sources["num_gpu_blocks"] = view.num_gpu_blocks.origin()
    else:
        blocks = _pool_estimate(span, prompt, output, int(values["block_size"]))
        sources["num_gpu_blocks"] = "estimated: running × mean context ÷ KV usage"
        warnings.append(
            f"num_gpu_blocks not on the page nor configured: estimated {blocks:,} from the KV "
            "usage and the sequences running (give --server num_gpu_blocks=…)"
        )
    cap = None
    if span.whole.increases.get("admission_rejections", 0.0) > 0:
        waiting = span.whole.gauges.get("waiting")
        if waiting is not None and waiting.max is not None:
            cap = int(round(waiting.max))
            sources["max_num_queued_reqs"] = "the most requests waiting while some were rejected"
    return Engine(
        int(values["max_num_seqs"]),
        int(values["max_num_batched_tokens"]),
        int(values["max_model_len"]),
        int(blocks),
        int(values["block_size"]),
        bool(values["enable_prefix_caching"]),
        cap,
    )


def _pool_estimate(span: Span, prompt: LengthFit, output: LengthFit, block: int) -> int:
    best = None
    for t in span.tiles:
        kv = t.derived.kv_usage_avg
        run = t.derived.running_avg
        if kv and run and kv > 0.05:
            tokens = run * (prompt.mean + output.mean / 2)
            est = tokens / kv
            best = est if best is None else max(best, est)
    if best is None:
        return 1_000_000 // block  # nothing to go on: a pool that never fills
    return max(1, math.ceil(best / block))


def fit(span: Span) -> Twin:
    """The twin of a span (module docstring); :class:`FitError` when it cannot be."""
    whole = span.whole
    warnings: list[str] = []
    sources: dict[str, str] = {}
    duration = whole.end - whole.start
    if duration <= 0 or not span.tiles:
        raise FitError("the span has no windows to fit on")
    prompt_h, output_h = _hist(whole, "prompt_len"), _hist(whole, "gen_len")
    prompt = fit_lengths(prompt_h) if prompt_h is not None else None
    output = fit_lengths(output_h) if output_h is not None else None
    if prompt is None or output is None:
        raise FitError(
            "no request finished in the span (request_prompt_tokens / "
            "request_generation_tokens have no observations): nothing to fit the lengths on"
        )
    sources["prompt_tokens"] = f"request_prompt_tokens ({prompt.n:,.0f} requests)"
    sources["output_tokens"] = f"request_generation_tokens ({output.n:,.0f} requests)"
    rates = _arrivals(span.tiles, whole.start)
    sources["arrival_rate"] = (
        f"completions + Δ(running + waiting), per {span.tiles[0].end - span.tiles[0].start:g} s"
    )
    hit = whole.derived.prefix_cache_hit_rate
    if hit is None:
        hit = 0.0
        sources["prefix_cache_hit_rate"] = "no prefix-cache counters: taken as 0"
        warnings.append("no prefix-cache counters on the page: the hit rate is taken as 0")
    else:
        sources["prefix_cache_hit_rate"] = "prefix_cache_hits / prefix_cache_queries"
    engine = _engine(span, prompt, output, warnings, sources)
    obs = observations(span.tiles, engine, prompt, output)
    if not any(o.kind == "decode" for o in obs):
        raise FitError(
            "no window of the span has inter-token gaps with sequences running: nothing to fit "
            "the step time on"
        )
    pool = float(engine.num_gpu_blocks * engine.block_size)
    prior = priors(obs, pool)
    fitted = fit_step(obs, prior)
    assert fitted is not None
    warnings.extend(_step_warnings(fitted, obs))
    for term, src in fitted.sources.items():
        sources[f"step.{term}"] = (
            "inter-token and prefill times against running, tokens per step and KV"
            if src == "data"
            else src
        )
    speed = timeline(obs, fitted.model, [t.start - whole.start for t in span.tiles])
    if speed:
        sources["speed"] = "each window's mean inter-token gap ÷ the step time's"
    seen = seen_steps(span.tiles, obs, engine)
    frontend, fe_warning = fit_mean(whole)
    if fe_warning:
        warnings.append(fe_warning)
    sources["frontend"] = frontend.source
    return Twin(
        whole.start,
        duration,
        rates,
        prompt,
        output,
        min(max(hit, 0.0), 0.99),
        engine,
        fitted.model,
        fitted.residual,
        sources,
        tuple(warnings),
        frontend,
        speed,
        seen,
        alternatives(obs, prior, fitted.model, seen),
    )


def _step_warnings(fitted: StepFit, obs: list[Observation]) -> list[str]:
    out = list(fitted.warnings)
    if fitted.sources["per_seq"] != "data":
        out.append(
            "one load level: the data give no batch-size slope; the step is taken as flat in "
            "the batch (decode is bandwidth-bound) — a change of max_num_seqs or traffic "
            "that moves the batch far is less certain"
        )
    if fitted.sources["per_token"] != "data":
        out.append(
            "no prefill time varies enough to price a prompt token: "
            + fitted.sources["per_token"].removeprefix("prior: ")
        )
    if len(obs) < 4:
        out.append(f"only {len(obs)} window(s) to fit the step time on")
    return out
