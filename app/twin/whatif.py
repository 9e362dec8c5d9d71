"""What a change does: the twin replays the span it was fitted on, then the span again with
the change (pure; time and data passed in).

1. **baseline**: the measured figures of the span (its whole window: TTFT and ITL
   p50/p99 by ``histogram_quantile``, waiting average, KV usage maximum, preemptions/s);
2. **replay**: the twin with nothing changed, ``seeds`` times. Its step time is first
   calibrated once so the replay's mean inter-token gap matches the measured one (the
   fit is of window means; this removes what the line's shape leaves over), and
   ``replay_error`` is the median relative error of its TTFT and ITL p50/p99 against the
   baseline — how far to trust the twin on this server;
3. **predicted**: the twin with the change, ``seeds`` times, plus two runs with the step
   time moved by the fit's residual error (and, under KV pressure, two with the lengths
   moved by their mean's standard error: :func:`_lengths_runs`; past the span's steps,
   the alternative fits': ``app.twin.extrapolate``). The value is the median of the
   seeded runs;
   the interval spans every run, widened on each side by the replay's own relative error
   of that figure (at least ``MIN_ERROR``).

``CHANGES`` lists the keys of ``--set``; :func:`parse_change` reads one ``KEY=VALUE``.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from app.model import Quantile, Window
from app.twin.engine import Knobs, Outcome, run
from app.twin.extrapolate import widen
from app.twin.fit import Twin
from app.twin.frontend import FrontEnd, fit_sigma, less_step_wait, ttft_quantiles
from app.twin.tune import itl_scale, tune_compute

MIN_ERROR = 0.10
# A prediction whose replay misses the measured span by more than this is unreliable:
# said so beside it, greyed in the UI and left out of alert text.
UNRELIABLE = 0.25
MAX_CORRECTION = 1.5
# The figures a prediction multiplies by measured ÷ replayed (NVIDIA Dynamo's planner
# corrects its predictions so): the inter-token ones, whose bias is the server's step
# time and carries over to another setting. TTFT only when neither the span nor the
# prediction has a queue that shapes it (:func:`_queue_free`): then it is a prefill
# step's and the API server's on both sides; where a queue is on one side, the tail is
# the queue's, whose regime the change moves, and a correction fitted on one regime
# misleads in the other.
CORRECTED: tuple[str, ...] = ("itl_p50", "itl_p99")
QUEUE_FREE = 1.0
SEEDS = 5
FIGURES = ("ttft_p50", "ttft_p99", "itl_p50", "itl_p99")

# key → (type, what it means); the value checks live in parse_change.
CHANGES: dict[str, tuple[type, str]] = {
    "rate_scale": (float, "traffic × k (arrivals at k times the measured rate)"),
    "replicas": (int, "the load split evenly over N replicas like this one"),
    "max_num_seqs": (int, "--max-num-seqs"),
    "max_num_batched_tokens": (int, "--max-num-batched-tokens (the per-step token budget)"),
    "num_gpu_blocks": (int, "the KV pool in blocks (--num-gpu-blocks-override)"),
    "gpu_memory_utilization": (float, "--gpu-memory-utilization (converted to a KV pool)"),
    "prompt_scale": (float, "every prompt k times longer"),
    "output_scale": (float, "every answer k times longer"),
    "prefix_cache_hit_rate": (float, "the share of prompt tokens served from the prefix cache"),
}


class ChangeError(ValueError):
    """A ``--set`` that cannot be applied: one line saying why."""


def parse_change(flag: str) -> tuple[str, float | int]:
    """``KEY=VALUE`` → (key, value); :class:`ChangeError` naming the flag when bad."""
    key, sep, raw = flag.partition("=")
    key = key.strip()
    if not sep:
        raise ChangeError(f"--set {flag!r}: expected KEY=VALUE")
    if key not in CHANGES:
        raise ChangeError(f"--set {flag!r}: unknown key {key!r} (known: {', '.join(CHANGES)})")
    kind = CHANGES[key][0]
    try:
        value = kind(raw.strip())
    except ValueError:
        raise ChangeError(
            f"--set {flag!r}: {raw.strip()!r} is not {'an integer' if kind is int else 'a number'}"
        ) from None
    if isinstance(value, float) and not math.isfinite(value):
        raise ChangeError(f"--set {flag!r}: must be a finite number")
    if key == "prefix_cache_hit_rate":
        if not 0 <= value < 1:
            raise ChangeError(f"--set {flag!r}: a hit rate is in [0, 1)")
    elif key == "gpu_memory_utilization":
        if not 0 < value <= 1:
            raise ChangeError(f"--set {flag!r}: must be in (0, 1]")
    elif value <= 0:
        raise ChangeError(f"--set {flag!r}: must be positive")
    return key, value


def knobs_for(
    twin: Twin,
    changes: Mapping[str, float | int],
    memory_gb: float | None = None,
    gpu_memory_utilization: float | None = None,
    weight_gb: float | None = None,
) -> tuple[Knobs, list[str]]:
    """The engine knobs of a set of changes, and the notes of how each was applied.

    ``gpu_memory_utilization`` becomes a KV pool: the pool grows by the device memory the
    change frees, ``Δu × memory``, at the pool's own bytes per block (its blocks over its
    share of memory, ``u × memory − weights``); without the device's memory and the
    weights' size it cannot be converted (ChangeError). ``num_gpu_blocks`` wins over it.
    """
    notes: list[str] = []
    k: dict[str, Any] = {}
    rate = float(changes.get("rate_scale", 1.0))
    if "replicas" in changes:
        rate /= float(changes["replicas"])
        notes.append(
            f"replicas={changes['replicas']}: each gets 1/{changes['replicas']} of the traffic"
        )
    k["rate_scale"] = rate
    for key in ("prompt_scale", "output_scale"):
        if key in changes:
            k[key] = float(changes[key])
    if "prefix_cache_hit_rate" in changes:
        k["prefix_cache_hit_rate"] = float(changes["prefix_cache_hit_rate"])
        if not twin.engine.enable_prefix_caching:
            notes.append(
                "prefix caching is off on this server: the hit rate assumes it is turned on"
            )
    for key in ("max_num_seqs", "max_num_batched_tokens", "num_gpu_blocks"):
        if key in changes:
            k[key] = int(changes[key])
    if "gpu_memory_utilization" in changes and "num_gpu_blocks" not in changes:
        u_new = float(changes["gpu_memory_utilization"])
        if memory_gb is None or gpu_memory_utilization is None or weight_gb is None:
            raise ChangeError(
                "gpu_memory_utilization needs the device's memory, the current "
                "gpu_memory_utilization and the weights' size (--server device=… and the "
                "roofline's --weight-bytes/--params); or give num_gpu_blocks"
            )
        pool_gb = gpu_memory_utilization * memory_gb - weight_gb
        if pool_gb <= 0:
            raise ChangeError("the weights fill the memory at the current utilisation")
        per_block = pool_gb / twin.engine.num_gpu_blocks
        blocks = int((u_new * memory_gb - weight_gb) / per_block)
        if blocks < 1:
            raise ChangeError(f"gpu_memory_utilization={u_new}: no room left for the KV cache")
        k["num_gpu_blocks"] = blocks
        notes.append(f"gpu_memory_utilization={u_new}: a pool of {blocks:,} blocks")
    if "num_gpu_blocks" in k:
        pool = k["num_gpu_blocks"] * twin.engine.block_size
        if pool < twin.engine.max_model_len and pool < twin.prompt.mean * 4:
            notes.append(f"a pool of {pool:,} tokens holds only a few requests")
    return Knobs(**k), notes


@dataclass(frozen=True, slots=True)
class Figures:
    ttft_p50: Quantile
    ttft_p99: Quantile
    itl_p50: Quantile
    itl_p99: Quantile
    waiting_avg: float | None
    kv_usage_max: float | None
    preemptions_per_s: float | None
    # The twin's own (a page's request_queue_time / request_prefill_time means where
    # measured): what a TTFT is made of.
    queue_time_mean: float | None = None
    prefill_time_mean: float | None = None

    def value(self, name: str) -> float | None:
        v = getattr(self, name)
        return v.value if isinstance(v, Quantile) else v

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in (*FIGURES, "waiting_avg", "kv_usage_max", "preemptions_per_s"):
            v = self.value(name)
            out[name] = None if v is None or not math.isfinite(v) else float(f"{v:.4g}")
        ge = [n for n in FIGURES if getattr(self, n).ge_top_bucket]
        if ge:
            out["at_least"] = ge  # the rank fell in the +Inf bucket: "≥ value"
        return out


def measured(w: Window) -> Figures:
    """The baseline: the span's whole window as the service computes it."""

    def q(signal: str, p: str) -> Quantile:
        return w.quantiles.get(signal, {}).get(p) or Quantile(None)

    pre = w.rates.get("preemptions")
    return Figures(
        q("ttft", "p50"),
        q("ttft", "p99"),
        q("itl", "p50"),
        q("itl", "p99"),
        w.derived.waiting_avg,
        w.derived.kv_usage_max,
        pre,
        w.means.get("queue_time"),
        w.means.get("prefill_time"),
    )


def _median_q(qs: list[Quantile]) -> Quantile:
    vals = [q.value for q in qs if q.value is not None]
    if not vals:
        return Quantile(None)
    return Quantile(statistics.median(vals), any(q.ge_top_bucket for q in qs))


def _figures(outs: list[Outcome]) -> Figures:
    return Figures(
        _median_q([o.ttft_p50 for o in outs]),
        _median_q([o.ttft_p99 for o in outs]),
        _median_q([o.itl_p50 for o in outs]),
        _median_q([o.itl_p99 for o in outs]),
        statistics.median(o.waiting_avg for o in outs),
        statistics.median(o.kv_usage_max for o in outs),
        statistics.median(o.preemptions_per_s for o in outs),
        _median([o.queue_time_mean for o in outs]),
        _median([o.prefill_time_mean for o in outs]),
    )


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _rel(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b <= 0:
        return None
    return abs(a - b) / b


@dataclass(frozen=True, slots=True)
class WhatIf:
    twin: Twin
    changes: dict[str, float | int]
    baseline: Figures
    replay: Figures
    predicted: Figures
    interval: dict[str, tuple[float, float] | None]
    replay_errors: dict[str, float | None]
    step_scale: float
    notes: tuple[str, ...]
    ratio: dict[str, float] = field(default_factory=dict)

    @property
    def effect(self) -> dict[str, float | None]:
        """What the change does by the twin's own account: predicted ÷ replayed, per
        figure (the replay's bias divides out; 1: no change)."""
        out: dict[str, float | None] = {}
        for name in FIGURES:
            p, r = self.predicted.value(name), self.replay.value(name)
            k = self.ratio.get(name, 1.0)
            out[name] = None if p is None or r is None or r <= 0 else p / (r * k)
        return out

    @property
    def replay_error(self) -> float | None:
        errs = [e for e in self.replay_errors.values() if e is not None]
        return statistics.median(errs) if errs else None

    @property
    def unreliable(self) -> str | None:
        """Why the prediction is not to be trusted (None: it may be)."""
        return unreliable(self.replay_error)

    def to_dict(self) -> dict[str, Any]:
        fit = self.twin.to_dict()
        fit["replay_error"] = None if self.replay_error is None else round(self.replay_error, 4)
        fit["replay_errors"] = {
            k: None if v is None else round(v, 4) for k, v in self.replay_errors.items()
        }
        fit["replay"] = self.replay.to_dict()
        fit["step_time"]["calibration"] = round(self.step_scale, 4)
        return {
            "changes": dict(self.changes),
            "baseline": self.baseline.to_dict(),
            "predicted": self.predicted.to_dict(),
            "effect": {k: None if v is None else round(v, 4) for k, v in self.effect.items()},
            "interval": {
                k: None if v is None else [float(f"{v[0]:.4g}"), float(f"{v[1]:.4g}")]
                for k, v in self.interval.items()
            },
            "fit": fit,
            "replay_error": fit["replay_error"],
            "reliable": self.unreliable is None,
            "unreliable": self.unreliable,
            "warnings": [*self.twin.warnings, *self.notes],
        }


def unreliable(replay_error: float | None) -> str | None:
    """``replay error 53 % (over 25 %): the twin does not reproduce this span`` or None."""
    if replay_error is None or replay_error <= UNRELIABLE:
        return None
    return (
        f"replay error {replay_error:.0%} (over {UNRELIABLE:.0%}): the twin does not "
        "reproduce this span"
    )


@dataclass(frozen=True, slots=True)
class Calibration:
    """The twin against its span: the measured figures, the step-time scale that matches
    the replay's mean inter-token gap to the measured one, the replay and its errors."""

    twin: Twin
    bounds: dict[str, tuple[float, ...]]
    base: Figures
    scale: float
    replay: Figures
    errors: dict[str, float | None]
    seeds: int


def calibrate(twin: Twin, whole: Window, *, seeds: int = SEEDS) -> Calibration:
    """Replay the span (module docstring, step 2)."""
    ttft_h, itl_h = whole.histograms.get("ttft"), whole.histograms.get("itl")
    if ttft_h is None or itl_h is None:
        raise ValueError("the span has no TTFT or ITL histogram")
    bounds = {"ttft_bounds": tuple(ttft_h.bounds), "itl_bounds": tuple(itl_h.bounds)}
    base = measured(whole)
    scale, prefill = itl_scale(twin, whole, bounds)
    twin, scale = tune_compute(twin, whole, bounds, scale, prefill)
    outs = [run(twin, Knobs(step_scale=scale), seed=s, **bounds) for s in range(seeds)]
    fe = less_step_wait(twin.frontend, _median([o.step_wait_mean for o in outs]))
    twin = dataclasses.replace(twin, frontend=fe, sources={**twin.sources, "frontend": fe.source})
    twin = _with_frontend(twin, base, outs, bounds["ttft_bounds"])
    replay = _figures([_refigured(o, twin.frontend, bounds["ttft_bounds"]) for o in outs])
    errors = {n: _rel(replay.value(n), base.value(n)) for n in FIGURES}
    return Calibration(twin, bounds, base, scale, replay, errors, seeds)


def _with_frontend(
    twin: Twin, base: Figures, outs: list[Outcome], bounds: tuple[float, ...]
) -> Twin:
    """The twin with its front end's spread fitted on a queue-free span's TTFT p99
    (:func:`_queue_free`), or the prior with a warning where a queue hides the front
    end's tail (:mod:`app.twin.frontend`)."""
    fe = twin.frontend
    p99 = base.ttft_p99.value
    if fe.mean <= 0:
        return twin
    if _queue_free(base, fe) and p99 and not base.ttft_p99.ge_top_bucket:
        fitted = fit_sigma([(o.seed, o.engine_ttfts) for o in outs], fe, bounds, p99)
        return dataclasses.replace(
            twin, frontend=fitted, sources={**twin.sources, "frontend": fitted.source}
        )
    warning = (
        f"the API server's share of TTFT (mean {fe.mean * 1000:.3g} ms, measured) has the "
        f"prior spread σ {fe.sigma}: the span's queue hides the front end's own tail"
    )
    return dataclasses.replace(twin, warnings=(*twin.warnings, warning))


def _refigured(o: Outcome, fe: FrontEnd, bounds: tuple[float, ...]) -> Outcome:
    t50, t99, _ = ttft_quantiles(o.engine_ttfts, fe, o.seed, bounds)
    return dataclasses.replace(o, ttft_p50=t50, ttft_p99=t99)


def estimate(cal: Calibration, knobs: Knobs) -> tuple[Figures, dict[str, float], list[Outcome]]:
    """The corrected figures of the twin with ``knobs`` (module docstring, step 3), the
    correction of each figure, and the runs. The same seeds as the replay (common random
    numbers): the same arrivals and lengths where the change leaves them alone, so the
    effect is the change's, not the draw's."""
    pk = _with_scale(knobs, cal.scale)
    runs = [run(cal.twin, pk, seed=s, **cal.bounds) for s in range(cal.seeds)]
    predicted = _figures(runs)
    corrected = CORRECTED
    fe = cal.twin.frontend
    if _queue_free(cal.base, fe) and _queue_free(predicted, fe):
        corrected = FIGURES  # TTFT is a prefill step's on both sides: its bias carries over
    ratio = {
        n: _ratio(cal.base.value(n), cal.replay.value(n)) if n in corrected else 1.0
        for n in FIGURES
    }
    return _corrected(predicted, ratio), ratio, runs


def predict(
    twin: Twin,
    whole: Window,
    changes: Mapping[str, float | int],
    knobs: Knobs,
    *,
    notes: list[str] | None = None,
    seeds: int = SEEDS,
) -> WhatIf:
    """Replay, then predict (module docstring)."""
    cal = calibrate(twin, whole, seeds=seeds)
    return predict_from(cal, changes, knobs, notes=notes)


def predict_from(
    cal: Calibration,
    changes: Mapping[str, float | int],
    knobs: Knobs,
    *,
    notes: list[str] | None = None,
) -> WhatIf:
    """The prediction of a calibrated twin, with its interval."""
    twin, scale = cal.twin, cal.scale
    predicted, ratio, runs = estimate(cal, knobs)
    r = max(twin.step_residual, 0.02)
    # Past the steps the span showed, the step fits that explain it as well (app.twin.
    # extrapolate): the interval spans them, and the note says so.
    wider, note = widen(twin, scale, cal.bounds, knobs, runs)
    notes = [*(notes or ()), *([note] if note else [])]
    spread = (
        runs
        + wider
        + [
            run(twin, _with_scale(knobs, scale * (1 + r)), seed=0, **cal.bounds),
            run(twin, _with_scale(knobs, scale * max(1 - r, 0.5)), seed=0, **cal.bounds),
        ]
        + _lengths_runs(cal, knobs, runs)
    )
    interval: dict[str, tuple[float, float] | None] = {}
    for name in ("ttft_p99", "itl_p99", "ttft_p50", "itl_p50"):
        k = ratio[name]
        vals = [getattr(o, name).value * k for o in spread if getattr(o, name).value is not None]
        if not vals:
            interval[name] = None
            continue
        e = max(cal.errors.get(name) or 0.0, MIN_ERROR)
        interval[name] = (min(vals) * (1 - min(e, 0.9)), max(vals) * (1 + e))
    return WhatIf(
        twin,
        dict(changes),
        cal.base,
        cal.replay,
        predicted,
        interval,
        cal.errors,
        scale,
        tuple(notes or ()),
        ratio,
    )


# A run preempting at least this often (per second) has a pool under pressure.
PRESSED = 0.01


def _lengths_runs(cal: Calibration, knobs: Knobs, runs: list[Outcome]) -> list[Outcome]:
    """Under KV pressure, the runs with the lengths one standard error of their mean
    longer and shorter (``LengthFit.mean_error``): a pool held full takes as many
    sequences as their tokens fit, and each preemption recomputes a prompt and its
    answer so far, so the server's capacity moves faster than the lengths do — on a
    simulated server recomputing most of the time (kv_pressure, a pool ×1.5), prompts and
    answers 5 % longer than the server was sent (a finished sample of 232 requests, 1.6
    standard errors) took 18 % off the completions a second with the simulator's own
    step time. Where nothing is preempted on either side the lengths move the figures
    about in proportion, which the seeds' spread covers: nothing is run. Prompts and
    answers move together, each by its own error: the side that loads the pool most."""
    pressed = [cal.replay.preemptions_per_s or 0.0, *(o.preemptions_per_s for o in runs)]
    if max(pressed) < PRESSED:
        return []
    ep, eo = cal.twin.prompt.mean_error(), cal.twin.output.mean_error()
    if ep <= 0 and eo <= 0:
        return []
    out = []
    for sign in (1.0, -1.0):
        moved = dataclasses.replace(
            knobs,
            prompt_scale=knobs.prompt_scale * max(1 + sign * ep, 0.5),
            output_scale=knobs.output_scale * max(1 + sign * eo, 0.5),
        )
        out.append(run(cal.twin, _with_scale(moved, cal.scale), seed=0, **cal.bounds))
    return out


def _queue_free(f: Figures, fe: FrontEnd) -> bool:
    """Whether the queue cannot shape TTFT's tail in ``f``: few requests waiting on
    average (under ``QUEUE_FREE``), and the requests' own mean queue time — exact where
    the page has ``request_queue_time``; a waiting gauge sampled every few seconds misses
    short queues that still make the p99 — no longer than the rest of a mean TTFT (the
    API server's share and the prefill). Against the API server's share alone, a
    remainder of a fraction of a millisecond (where the page's and the replay's waits
    for the step in flight differ a little, on a server without an API server's own
    delay) called a 1 ms queue in front of a 50 ms prefill a queue."""
    if f.waiting_avg is None or f.waiting_avg >= QUEUE_FREE:
        return False
    if f.queue_time_mean is None:
        return True
    return f.queue_time_mean <= max(fe.mean, 0.0) + (f.prefill_time_mean or 0.0)


def _ratio(measured_v: float | None, replayed: float | None) -> float:
    if not measured_v or not replayed or measured_v <= 0 or replayed <= 0:
        return 1.0
    return min(max(measured_v / replayed, 1 / MAX_CORRECTION), MAX_CORRECTION)


def _corrected(f: Figures, ratio: dict[str, float]) -> Figures:
    def q(name: str) -> Quantile:
        v = getattr(f, name)
        return v if v.value is None else Quantile(v.value * ratio[name], v.ge_top_bucket)

    return Figures(
        q("ttft_p50"),
        q("ttft_p99"),
        q("itl_p50"),
        q("itl_p99"),
        f.waiting_avg,
        f.kv_usage_max,
        f.preemptions_per_s,
        f.queue_time_mean,
        f.prefill_time_mean,
    )


def _with_scale(k: Knobs, scale: float) -> Knobs:
    return dataclasses.replace(k, step_scale=scale)
