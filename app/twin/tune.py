"""The compute side of the step time, tuned on the replay's prefill time (pure).

The step fit (``app.twin.steptime``) prices a request's prefill by an equation: its
prompt in chunks of the token budget, beside the decodes of the window's mean batch. The
scheduler does more than the equation says — the decodes take their tokens of the budget
first, prompts arriving together share a step's budget, a chunk waits a step where the
budget is spent — so a prompt takes more steps than the equation counts, and the fit
charges the difference to the prompt token's price. Past the steps the span showed
that price is what a larger chunk pays (a budget raised from 256 to 2,048 tokens priced
its chunks 40 % over the server's). The replay runs the real scheduling: the compute
side (``per_token``, ``compute_base``) is scaled so that the replay's mean prefill time
is the measured one, by a secant step between two replays; where the prefill barely
moves with it (its chunks are memory-bound), it is left alone. The inter-token scale is
then calibrated again.
"""

from __future__ import annotations

import dataclasses

from app.model import Window
from app.twin.engine import Knobs, run
from app.twin.fit import Twin
from app.twin.steptime import StepModel

# Requests whose prefill the span timed, at least, to tune on; a replay within this of
# the measured mean is left alone; the compute side moves at most this far either way.
MIN_PREFILLS = 20
CLOSE = 0.03
LIMIT = 2.0
# The prefill's response to the compute side under which it is taken as memory-bound.
SENSITIVE = 0.2
# Secant steps after the first two replays, at most.
STEPS = 3


def _compute(step: StepModel, k: float) -> StepModel:
    return dataclasses.replace(
        step, per_token=step.per_token * k, compute_base=step.compute_base * k
    )


def _scaled(twin: Twin, k: float) -> Twin:
    alts = tuple((key, why, _compute(m, k)) for key, why, m in twin.alternatives)
    why = f"compute side ×{k:.3g} on the replay's prefill time"
    sources = {**twin.sources, "step.tuned": why}
    step = _compute(twin.step, k)
    return dataclasses.replace(twin, step=step, alternatives=alts, sources=sources)


def itl_scale(
    twin: Twin, whole: Window, bounds: dict[str, tuple[float, ...]]
) -> tuple[float, float | None]:
    """The step scale that matches the replay's mean inter-token gap to the measured one
    (at most ×2 either way), and that replay's mean prefill time."""
    target = whole.means.get("itl")
    first = run(twin, Knobs(), seed=0, **bounds)
    if not target or not first.itl_mean:
        return 1.0, first.prefill_time_mean
    return min(max(target / first.itl_mean, 1 / LIMIT), LIMIT), first.prefill_time_mean


def tune_compute(
    twin: Twin,
    whole: Window,
    bounds: dict[str, tuple[float, ...]],
    scale: float,
    unscaled: float | None,
) -> tuple[Twin, float]:
    """The twin with its compute side tuned on the replay's mean prefill time, and the
    inter-token scale calibrated again (module docstring); as given where the span timed
    too few prefills or the prefill does not respond. ``unscaled``: the replay's mean
    prefill time at step scale 1 (a prefill's steps scale with the step: at ``scale`` it
    is about ``scale`` times that)."""
    target = whole.means.get("prefill_time")
    if not target or whole.observations.get("prefill_time", 0.0) < MIN_PREFILLS:
        return twin, scale

    def prefill(k: float) -> float | None:
        return run(_scaled(twin, k), Knobs(step_scale=scale), seed=0, **bounds).prefill_time_mean

    k1, p1 = 1.0, (unscaled * scale if unscaled else None)
    if not p1 or abs(p1 / target - 1) < CLOSE:
        return twin, scale
    k2 = min(max(target / p1, 1 / LIMIT), LIMIT)
    p2 = prefill(k2)
    if not p2 or abs(p2 - p1) < SENSITIVE * abs(k2 - k1) * p1:
        return twin, scale
    for _ in range(STEPS):  # the secant, while the replay is off by more than CLOSE
        if abs(p2 / target - 1) < CLOSE or p2 == p1:
            break
        k = k2 + (target - p2) * (k2 - k1) / (p2 - p1)
        k1, p1 = k2, p2
        k2 = min(max(k, 1 / LIMIT), LIMIT)
        p2 = prefill(k2)
        if not p2:
            return twin, scale
    tuned = _scaled(twin, k2)
    return tuned, itl_scale(tuned, whole, bounds)[0]
