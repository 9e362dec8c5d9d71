"""What a P/D fleet's pools say: each pool, the client's TTFT, the pool ratio. Pure.

The records of ``app.fleet.pools`` (which builds them) and the two readings made of the
pools:

* **The client's TTFT** (:func:`client_ttft`). No instance reports it. A probe of the
  model (``docs/probes.md``) measures it; without one it is **estimated**: the prefill
  pool's mean TTFT (queue + prefill; the prefill request's first token ends it) + the
  mean KV transfer + the decode pool's first step (its mean TTFT, which vLLM counts from
  the request's arrival at the decode instance and so holds the transfer, minus the mean
  transfer). The upper estimate adds the p99s the same way: the p99 of a sum is at most
  the sum of the p99s when the parts rise together, as they do when the fleet is busy.
  The router's own hop is in neither (no page counts it). Each pool's TTFT p99 within
  the SLO while the client's (the probe's, else the upper estimate) is over it is the
  **mismatch** named: each instance times only its part of the wait.
* **Pool imbalance** (:func:`pool_imbalance`, an imbalance finding of kind ``pool``):
  one pool saturated — its diagnosis a capacity class (queue-, prefill-, decode-bound or
  KV pressure) — while the other idles (healthy or idle, its load under
  :data:`IDLE_LOAD`). Each pool's load (``Pool.load``, read by ``app.fleet.pools``) is
  the share of its capacity in use: a prefill pool (compute-bound) is busy for (first
  tokens/s × mean prefill time) / replicas of each second (Little's law: requests in
  prefill per replica), a decode pool (memory-bound: a batch grows almost free until
  the KV runs out) fills its KV (usage average / the 0.9 the diagnosis calls full); a
  saturated pool is at 1. The **ratio to move to** keeps the fleet's instances: x = N ×
  w_P / (w_P + w_D), w = replicas × load, y = N − x (at least one each, and one replica
  moved when rounding would move none). Arrivals the saturated pool cannot complete
  would raise both pools' work alike, so they leave the ratio unchanged; they are named
  beside it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.diagnose import Diagnosis
from app.diagnose.classes import DiagnosisClass
from app.diagnose.records import Evidence, Hint, fmt_value
from app.fleet.aggregate import FleetWindow
from app.fleet.imbalance import Outlier
from app.model import Window
from app.windows.probefacts import probe_facts
from app.windows.transferfacts import TransferFacts

__all__ = [
    "CAPACITY_CLASSES",
    "IDLE_LOAD",
    "ClientTtft",
    "Pool",
    "PoolImbalance",
    "avg_of",
    "client_ttft",
    "mean_of",
    "p99_of",
    "pool_imbalance",
]

# A pool whose load is under this is idle beside a saturated one: it could give a
# replica and still run at most twice today's load per replica.
IDLE_LOAD = 0.5
C = DiagnosisClass
CAPACITY_CLASSES = frozenset({C.QUEUE_BOUND, C.PREFILL_BOUND, C.DECODE_BOUND, C.KV_PRESSURE})
QUIET_CLASSES = frozenset({C.HEALTHY, C.IDLE})


@dataclass(frozen=True, slots=True)
class Pool:
    """One role's replicas summed and diagnosed; ``load`` the share of its capacity in
    use (module docstring; None: unknown)."""

    role: str
    fleet: FleetWindow
    diagnosis: Diagnosis
    load: float | None
    load_basis: str
    transfer: TransferFacts | None

    @property
    def replicas(self) -> tuple[str, ...]:
        return tuple(w.target for w in self.fleet.replicas)

    def to_dict(self) -> dict[str, Any]:
        w = self.fleet.window
        d = self.diagnosis
        q = w.quantiles.get("ttft", {})
        itl = w.quantiles.get("itl", {})
        return {
            "role": self.role,
            "name": self.fleet.key.name,
            "replicas": list(self.replicas),
            "absent": list(self.fleet.absent),
            "class": str(d.cls),
            "sub_cause": None if d.sub_cause is None else str(d.sub_cause),
            "confidence": d.confidence,
            "summary": d.summary,
            "hints": [h.to_dict() for h in d.hints[:3]],
            "load": self.load,
            "load_basis": self.load_basis,
            "ttft_mean": mean_of(w, "ttft"),
            "ttft_p99": None if (p := q.get("p99")) is None else p.value,
            "itl_p99": None if (p := itl.get("p99")) is None else p.value,
            "running_avg": avg_of(w, "running"),
            "waiting_avg": avg_of(w, "waiting"),
            "kv_avg": avg_of(w, "kv_usage"),
            "transfer": None if self.transfer is None else self.transfer.numbers(),
        }


@dataclass(frozen=True, slots=True)
class ClientTtft:
    """What a client waits for a first token: measured by a probe, else estimated."""

    measured: bool
    mean: float | None
    upper: float | None
    prefill_mean: float | None
    transfer_mean: float | None
    first_step_mean: float | None
    probe_mean: float | None = None
    probe_p99: float | None = None
    probes: tuple[str, ...] = ()
    mismatch: str | None = None
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "measured": self.measured,
            "mean": self.mean,
            "upper": self.upper,
            "parts": {
                "prefill_ttft_mean": self.prefill_mean,
                "transfer_mean": self.transfer_mean,
                "decode_first_step_mean": self.first_step_mean,
            },
            "probe_mean": self.probe_mean,
            "probe_p99": self.probe_p99,
            "probes": list(self.probes),
            "mismatch": self.mismatch,
            "notes": list(self.notes),
        }

    def text(self) -> str:
        """``client TTFT ≈ 1.9 s (estimate: …)`` or ``measured by probe …``."""
        if self.measured:
            return (
                f"client TTFT {fmt_value(self.probe_mean, 's')} mean, "
                f"{fmt_value(self.probe_p99, 's')} p99, measured by "
                f"{', '.join(self.probes)}; estimate from the pools "
                f"{fmt_value(self.mean, 's')}"
            )
        return (
            f"client TTFT ≈ {fmt_value(self.mean, 's')} (estimate: prefill TTFT "
            f"{fmt_value(self.prefill_mean, 's')} + transfer {fmt_value(self.transfer_mean, 's')}"
            f" + decode first step {fmt_value(self.first_step_mean, 's')}), at most "
            f"≈ {fmt_value(self.upper, 's')} at p99"
        )


@dataclass(frozen=True, slots=True)
class PoolImbalance:
    """One pool saturated while the other idles, and the ratio of replicas to move to."""

    saturated: str
    idle: str
    now: tuple[int, int]
    target: tuple[int, int]
    loads: tuple[float, float]
    demand: float | None
    outlier: Outlier

    @property
    def ratio(self) -> str:
        return f"{self.target[0]}P{self.target[1]}D"

    def to_dict(self) -> dict[str, Any]:
        return {
            "saturated": self.saturated,
            "idle": self.idle,
            "now": f"{self.now[0]}P{self.now[1]}D",
            "move_to": self.ratio,
            "prefill_load": self.loads[0],
            "decode_load": self.loads[1],
            "demand": self.demand,
            "summary": self.outlier.summary,
        }


def mean_of(w: Window, sig: str) -> float | None:
    """Δsum / Δcount of a histogram signal; None without observations."""
    if w.observations.get(sig, 0.0) <= 0:
        return None
    return w.means.get(sig)


def p99_of(w: Window, sig: str) -> float | None:
    """The p99 of a histogram signal (None: no observations)."""
    q = w.quantiles.get(sig, {}).get("p99")
    return None if q is None else q.value


def avg_of(w: Window, sig: str) -> float | None:
    """A gauge's average over the window."""
    g = w.gauges.get(sig)
    return None if g is None else g.avg


def _transfer(pools: Mapping[str, Pool]) -> tuple[float | None, float | None]:
    """The mean and p99 transfer time, from the pool that counts the transfers."""
    best = None
    for p in pools.values():
        n = p.fleet.window.observations.get("kv_xfer_time", 0.0)
        if n > 0 and (best is None or n > best[0]):
            best = (n, p.fleet.window)
    if best is None:
        return None, None
    return mean_of(best[1], "kv_xfer_time"), p99_of(best[1], "kv_xfer_time")


def client_ttft(
    pools: Mapping[str, Pool],
    probes: Sequence[Window],
    ttft_slo: float,
) -> ClientTtft:
    """The client's TTFT of a P/D fleet (module docstring)."""
    notes: list[str] = []
    pre = pools.get("prefill")
    dec = pools.get("decode")
    p_mean = None if pre is None else mean_of(pre.fleet.window, "ttft")
    p_p99 = None if pre is None else p99_of(pre.fleet.window, "ttft")
    d_mean = None if dec is None else mean_of(dec.fleet.window, "ttft")
    d_p99 = None if dec is None else p99_of(dec.fleet.window, "ttft")
    x_mean, x_p99 = _transfer(pools)
    first = None
    if d_mean is not None:
        first = max(0.0, d_mean - (x_mean or 0.0))
        if x_mean is not None and x_mean > d_mean:
            notes.append(
                "the mean transfer is longer than the decode pool's mean TTFT: the "
                "transfer is counted elsewhere (push mode) or the windows hold different "
                "requests; the estimate adds it whole"
            )
    mean = upper = None
    if p_mean is not None and first is not None:
        mean = p_mean + (x_mean or 0.0) + first
    if p_p99 is not None and d_p99 is not None:
        upper = p_p99 + max(d_p99, x_p99 or 0.0)
    if x_mean is None:
        notes.append("no transfer time counted in the window (no transfer, or no NIXL page)")
    notes.append("the router's own hop between the pools is in neither pool's metrics")
    measured_mean = measured_p99 = None
    names: list[str] = []
    for w in probes:
        pf = probe_facts(w)
        if pf is None or pf.ttft_mean is None:
            continue
        names.append(w.target)
        if measured_mean is None or pf.ttft_n > 0:
            measured_mean, measured_p99 = pf.ttft_mean, pf.ttft_p99
    # The client's p99 against the SLO: the probe's, else the pools' p99s added.
    client = measured_p99 if measured_mean is not None else upper
    mismatch = None
    each = [(name, v) for name, v in (("prefill", p_p99), ("decode", d_p99)) if v is not None]
    if client is not None and client > ttft_slo and each and all(v <= ttft_slo for _, v in each):
        parts = ", ".join(f"{name} {fmt_value(v, 's')}" for name, v in each)
        how = "measured by a probe" if measured_mean is not None else "the pools' p99s added"
        mismatch = (
            f"every pool's TTFT p99 is within the {fmt_value(ttft_slo, 's')} SLO ({parts}), "
            f"yet a client's is ≈ {fmt_value(client, 's')} ({how}): each instance times only "
            "its part of the client's wait"
        )
    return ClientTtft(
        measured=measured_mean is not None,
        mean=mean,
        upper=upper,
        prefill_mean=p_mean,
        transfer_mean=x_mean,
        first_step_mean=first,
        probe_mean=measured_mean,
        probe_p99=measured_p99,
        probes=tuple(names),
        mismatch=mismatch,
        notes=tuple(notes),
    )


_POOL_HINTS = {
    "prefill": Hint(
        "pd_ratio_prefill",
        "Move replicas to the prefill pool",
        "",
        "prefill is compute-bound and its pool is saturated while the decode pool idles: "
        "a replica moved to prefill serves the requests that queue for their first token",
    ),
    "decode": Hint(
        "pd_ratio_decode",
        "Move replicas to the decode pool",
        "",
        "decode is memory-bound and its pool is full while the prefill pool idles: a "
        "replica moved to decode adds KV cache and bandwidth for the running streams",
    ),
}


def pool_imbalance(pools: Mapping[str, Pool]) -> PoolImbalance | None:
    """A saturated pool beside an idle one, with the ratio to move to (module docstring)."""
    pre, dec = pools.get("prefill"), pools.get("decode")
    if pre is None or dec is None or pre.load is None or dec.load is None:
        return None
    n_p, n_d = len(pre.replicas), len(dec.replicas)
    if n_p == 0 or n_d == 0:
        return None
    pair = _saturated_beside_idle(pre, dec)
    if pair is None:
        return None
    busy, quiet = pair
    target = _target(pre, dec, busy is pre)
    if target == (n_p, n_d):
        return None  # one replica per pool: nothing to move (add one instead)
    derived = busy.fleet.window.derived
    demand = None
    if derived.arrival_rate and derived.completion_rate:
        demand = derived.arrival_rate / derived.completion_rate
    outlier = _outlier(pre, dec, busy, quiet, target, demand)
    return PoolImbalance(
        busy.role,
        quiet.role,
        (n_p, n_d),
        target,
        (pre.load or 0.0, dec.load or 0.0),
        demand,
        outlier,
    )


def _saturated_beside_idle(pre: Pool, dec: Pool) -> tuple[Pool, Pool] | None:
    """(the saturated pool, the idle one), or None when neither pair is."""
    for busy, quiet in ((pre, dec), (dec, pre)):
        saturated = busy.diagnosis.cls in CAPACITY_CLASSES
        idle = quiet.diagnosis.cls in QUIET_CLASSES and (quiet.load or 0.0) < IDLE_LOAD
        if saturated and idle:
            return busy, quiet
    return None


def _weights(pre: Pool, dec: Pool) -> tuple[float, float]:
    """Each pool's replicas × load: what the split follows."""
    return len(pre.replicas) * (pre.load or 0.0), len(dec.replicas) * (dec.load or 0.0)


def _target(pre: Pool, dec: Pool, prefill_busy: bool) -> tuple[int, int]:
    """The (prefill, decode) replicas to run: the same total split by replicas × load,
    at least one each, and at least one moved toward the saturated pool."""
    n_p, n_d = len(pre.replicas), len(dec.replicas)
    total = n_p + n_d
    w_p, w_d = _weights(pre, dec)
    x = round(total * w_p / (w_p + w_d)) if w_p + w_d > 0 else n_p
    x = min(total - 1, max(1, x))
    if x == n_p:  # rounding moves nothing: move one toward the saturated pool
        x = min(total - 1, n_p + 1) if prefill_busy else max(1, n_p - 1)
    return x, total - x


def _outlier(
    pre: Pool,
    dec: Pool,
    busy: Pool,
    quiet: Pool,
    target: tuple[int, int],
    demand: float | None,
) -> Outlier:
    """The imbalance as the fleet view shows an outlier: its summary, evidence and hint."""
    n_p, n_d = len(pre.replicas), len(dec.replicas)
    total = n_p + n_d
    w_p, w_d = _weights(pre, dec)
    role, other = busy.role, quiet.role
    summary = (
        f"the {role} pool is {busy.diagnosis.cls} while the {other} pool idles "
        f"(load {fmt_value(quiet.load, 'ratio')}: {quiet.load_basis}); move toward "
        f"{target[0]}P{target[1]}D from {n_p}P{n_d}D"
    )
    if demand is not None and demand > 1.0:
        summary += (
            f"; arrivals are {demand:.2f}× what the {role} pool completes: at least "
            f"{math.ceil(len(busy.replicas) * demand)} {role} replica(s) at today's traffic"
        )
    evidence = (
        Evidence(
            "imbalance",
            f"{role}_pool_class",
            None,
            "",
            None,
            True,
            note=f"{busy.diagnosis.cls}: {busy.diagnosis.summary}",
        ),
        Evidence(
            "imbalance",
            f"{other}_pool_load",
            quiet.load,
            "<",
            IDLE_LOAD,
            True,
            "ratio",
            note=quiet.load_basis,
        ),
        Evidence(
            "imbalance",
            "prefill_share",
            target[0] / total,
            "",
            None,
            None,
            "ratio",
            note=f"prefill replicas {n_p} → {target[0]} of {total} (replicas × load: "
            f"prefill {w_p:.2g}, decode {w_d:.2g})",
        ),
    )
    base = _POOL_HINTS[role]
    reading = f"{role} pool {busy.diagnosis.cls}, {other} pool load "
    reading += fmt_value(quiet.load, "ratio")
    hint = Hint(
        base.id,
        base.title,
        f"run {target[0]}P{target[1]}D instead of {n_p}P{n_d}D (same {total} instances), or "
        f"add {role} replicas; llm-d and Dynamo's planner scale the two pools apart",
        f"{reading} — {base.why}",
        reading,
    )
    return Outlier(f"{role} pool", "pool", summary, evidence, (hint,))
