"""A surge's simulated replica continued with N replicas: the ground truth of the
incident model's answers (``bench/incident.py`` and its tests judge them on it).

:func:`record_until` records one replica's pages up to a moment (the moment an on-call
engineer asks); :func:`scale_out` then continues the same replica — its queue, its
batch — with N − 1 fresh replicas beside it under the routing the incident model states:
its queued requests stay on it (a vLLM queue is inside one engine), new arrivals, the
same Poisson traffic the scenario has at that moment, go round-robin. It reports whether
the growth ended (the first replica's queue at the horizon is below the backlog it had),
when the queue first emptied, and from when the TTFT p99 of the arrivals is under an
SLO (:func:`under_slo`). Nothing here knows the diagnosis or the twin.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass
from pathlib import Path

from app.sim.engine import INTERVAL_S, Replica
from app.sim.exposition import TextWriter, replica_families
from app.sim.scenario import Scenario
from app.sim.scheduler import Request
from app.sim.workload import sample_request

EPOCH = 1764403200.0
BUCKET_S = 10.0
SPARE = 0.05


@dataclass(frozen=True, slots=True)
class ScaleOut:
    """What N replicas did from the change (seconds from it; None: not within the
    horizon)."""

    replicas: int
    backlog: int  # the first replica's queue at the change
    ended: bool
    drain_s: float | None
    under_slo_s: float | None


def silence(r: Replica) -> None:
    """Stop a replica's own arrivals: from now on the router submits them."""
    r.next_arrival = math.inf
    r._draw = lambda t: math.inf  # type: ignore[method-assign]


def record_until(sc: Scenario, seed: int, until: float, out: Path | None) -> Replica:
    """Run one replica to ``until`` s, writing a page every 5 s into ``out`` (named by
    Unix time from :data:`EPOCH`, as a recording); the replica, to go on with."""
    r = Replica(sc, seed=seed)
    writer = TextWriter(replica_families(r), created_ts=EPOCH)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    for k in range(int(until // INTERVAL_S) + 1):
        t = k * INTERVAL_S
        r.advance_to(t)
        if out is not None:
            (out / f"{EPOCH + t:.3f}.prom").write_bytes(writer.render())
    return r


def scale_out(
    sc: Scenario, seed: int, at: float, replicas: int, *, horizon: float, slo_ttft: float
) -> ScaleOut:
    """The scenario's replica to ``at`` s, then ``replicas`` replicas for ``horizon`` s
    (module docstring)."""
    first = record_until(sc, seed, at, None)
    silence(first)
    backlog0 = len(first.sched.waiting)
    fleet = [first]
    for k in range(replicas - 1):
        o = Replica(sc, seed=seed + 100 + k)
        silence(o)
        o.advance_to(at)
        fleet.append(o)
    cfg = sc.phase_at(at)[0].config
    rate = cfg.workload.rate_segment(at)[0]
    rng, lengths = random.Random(seed * 7 + replicas), random.Random(seed * 11 + replicas)
    sent: list[Request] = []
    drained: float | None = None
    t, turn = at, itertools.cycle(range(replicas))
    while True:
        t += rng.expovariate(rate)
        if t > at + horizon:
            break
        for r in fleet:
            r.advance_to(t)
        if drained is None and not first.sched.waiting:
            drained = first.now - at
        d = sample_request(lengths, cfg.workload, cfg.engine.max_model_len, cfg.engine.block_size)
        r = fleet[next(turn)]
        sent.append(
            r.submit(d.prompt_len, d.output_len, d.max_tokens, at=t, prefix=d.prefix_tokens)
        )
    backlog_end = len(first.sched.waiting)
    for r in fleet:
        r.advance_to(at + horizon + 300.0)
    return ScaleOut(
        replicas, backlog0, backlog_end < backlog0, drained, under_slo(sent, at, slo_ttft)
    )


def under_slo(sent: list[Request], t0: float, slo_ttft: float) -> float | None:
    """The start of the first ``BUCKET_S`` bucket of arrivals from which each bucket's
    TTFT p99 is under ``slo_ttft`` (all but ``SPARE`` of the later buckets: a queue near
    its limit spills over now and then); None: never within the requests sent."""
    buckets: dict[int, list[float]] = {}
    for r in sent:
        ttft = math.inf if r.first_token is None else r.first_token - r.arrival
        buckets.setdefault(int((r.arrival - t0) // BUCKET_S), []).append(ttft)
    keys = sorted(buckets)
    over = []
    for k in keys:
        v = sorted(buckets[k])
        over.append(v[min(len(v) - 1, math.ceil(0.99 * len(v)) - 1)] > slo_ttft)
    for i, k in enumerate(keys):
        later = over[i:]
        if not over[i] and sum(later) <= SPARE * len(later):
            return k * BUCKET_S
    return None
