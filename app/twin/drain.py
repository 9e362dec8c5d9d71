"""What a change does to a growing queue: the traffic it moves, and the capacity an engine
setting moves, by the twin (pure).

During an incident the measured completion rate of a saturated replica is its capacity
for the workload it serves (``app.twin.incident``). A change of an engine setting —
``max_num_seqs``, the token budget, the KV pool, the lengths, the prefix-cache hit rate —
moves that capacity; the twin says by how much: its throughput with the change over its
throughput without, both saturated (the span's arrival timeline scaled until requests
queue in front of both). The measured rate is what the ratio multiplies (the twin's own
step-time bias divides out), as a planner corrects a model by measured over expected.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from app.twin.engine import Knobs, run
from app.twin.incident import Drain, Incident
from app.twin.whatif import Calibration

# Requests offered per request the replica completes: a saturated run has a queue
# through most of the span.
OVERLOAD = 3.0
SATURATED = 0.8  # a run that completes more than this share of what it is offered is not
TRIES = 3


def capacity_ratio(cal: Calibration, knobs: Knobs) -> float | None:
    """Saturated throughput with ``knobs`` over saturated throughput as fitted (None when
    the twin completes nothing). ``knobs.rate_scale`` is not read: the traffic is the
    run's own."""
    twin = cal.twin
    offered = twin.rate_mean * twin.duration
    if offered <= 0 or twin.duration <= 0:
        return None

    def done(k: Knobs, scale: float) -> float:
        k = dataclasses.replace(k, rate_scale=scale, step_scale=cal.scale)
        return float(run(twin, k, seed=0, **cal.bounds).finished)

    scale = OVERLOAD
    for _ in range(TRIES):
        base, changed = done(Knobs(), scale), done(knobs, scale)
        if max(base, changed) <= SATURATED * offered * scale:
            break
        scale *= 2.0
    return changed / base if base > 0 else None


TRAFFIC = ("replicas", "rate_scale")


def drain_of(
    incident: Incident, changes: Mapping[str, float | int], cal: Calibration | None, knobs: Knobs
) -> Drain:
    """What ``changes`` do to a growing queue: the traffic's keys (``replicas``,
    ``rate_scale``) move λ per replica; the engine's (every other key, already turned into
    ``knobs``) move μ by the twin's :func:`capacity_ratio`. ValueError when an engine
    change has no twin to price it."""
    replicas = int(changes.get("replicas", 1))
    rate = float(changes.get("rate_scale", 1.0))
    factor = 1.0
    if any(k not in TRAFFIC for k in changes):
        if cal is None:
            raise ValueError("an engine setting's capacity needs the twin, which has none here")
        ratio = capacity_ratio(cal, dataclasses.replace(knobs, rate_scale=1.0))
        if ratio is None:
            raise ValueError("the twin completes nothing: the setting's capacity is unknown")
        factor = ratio
    return incident.drain(replicas, rate, factor)
