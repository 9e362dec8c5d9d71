"""Disaggregated prefill/decode fleets: pools by role, the client's TTFT, the pool ratio.

A fleet of one model whose replicas split the two phases (physics.md, "Disaggregation")
is read as **pools** (:func:`pd_view`):

* **Roles.** Each replica is ``prefill``, ``decode`` or ``both``: the target's ``role``
  label when the configuration gives one (:data:`ROLE_LABEL`), else what its page shows
  (``app.windows.transferfacts.page_role``: a KV consumer's ``kv_fetch`` gauges → decode;
  KV-connector families without them → prefill; neither → both). A fleet with no
  prefill or decode replica is no P/D fleet (``pd_view`` gives None).
* **Pools.** The replicas of one role summed as a fleet is (``app.fleet.aggregate``),
  named ``model{role=prefill}``, each diagnosed like a stream: a prefill pool is
  prefill- or queue-bound, a decode pool decode-bound or short of KV, either
  ``transfer_bound`` (``app.diagnose.transfer``) — the decode pool when transfers are
  slow or fail (it starts them, in pull mode), the prefill pool when the KV it holds
  expires. Replicas are compared for imbalance within their pool only: a prefill and a
  decode instance are no peers.
* **The client's TTFT.** No instance reports it. A probe of the model (``docs/probes.md``)
  measures it; without one it is **estimated** (:class:`ClientTtft`): the prefill pool's
  mean TTFT (queue + prefill; the prefill request's first token ends it) + the mean KV
  transfer + the decode pool's first step (its mean TTFT, which vLLM counts from the
  request's arrival at the decode instance and so holds the transfer, minus the mean
  transfer). The upper estimate adds the p99s the same way: the p99 of a sum is at most
  the sum of the p99s when the parts rise together, as they do when the fleet is busy.
  The router's own hop is in neither (no page counts it). Each instance's TTFT within its
  SLO while the client's is over it is the **mismatch** named (vLLM #22454).
* **Pool imbalance** (:class:`PoolImbalance`, an imbalance finding of kind ``pool``):
  one pool saturated — its diagnosis a capacity class (queue-, prefill-, decode-bound
  or KV pressure) — while the other idles (healthy or idle, its load under
  :data:`IDLE_LOAD`). Each pool's load is the share of its capacity in use: a prefill
  pool (compute-bound) is busy for (first tokens/s × mean prefill time) / replicas of
  each second (Little's law: requests in prefill per replica), a decode pool
  (memory-bound: a batch grows almost free until the KV runs out) fills its KV (usage
  average / the 0.9 the diagnosis calls full); a saturated pool is at 1. The
  **ratio to move to** keeps the fleet's GPUs: x = N × w_P / (w_P + w_D), w = replicas ×
  load, y = N − x (at least one each, and one replica moved when rounding would move
  none). Arrivals the saturated pool cannot complete would raise both pools' work
  alike, so they leave the ratio unchanged; they are named beside it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.diagnose import Diagnosis, DiagnosisConfig, diagnose
from app.diagnose.classes import DiagnosisClass
from app.diagnose.records import Evidence, Hint, fmt_value
from app.fleet.aggregate import FleetKey, FleetWindow, fleet_window
from app.fleet.imbalance import Imbalance, ImbalanceThresholds, Outlier, find_imbalance
from app.model import Window
from app.probeconfig import PROBE_LABEL
from app.windows.probefacts import probe_facts
from app.windows.transferfacts import ROLES, TransferFacts, page_role, transfer_facts

__all__ = [
    "IDLE_LOAD",
    "ROLE_LABEL",
    "ClientTtft",
    "PDView",
    "Pool",
    "PoolImbalance",
    "client_ttft",
    "pd_view",
    "pool_aware_imbalance",
    "pool_imbalance",
    "probe_targets",
    "roles_from_labels",
]

# The target label that says a replica's role (llm-d's pods carry ``llm-d.ai/role``;
# relabel it to ``role``).
ROLE_LABEL = "role"
# A pool whose load is under this is idle beside a saturated one: it could give a
# replica and still run at most twice today's load per replica.
IDLE_LOAD = 0.5
C = DiagnosisClass
CAPACITY_CLASSES = frozenset({C.QUEUE_BOUND, C.PREFILL_BOUND, C.DECODE_BOUND, C.KV_PRESSURE})
QUIET_CLASSES = frozenset({C.HEALTHY, C.IDLE})
# What a decode pool's KV usage is read against: the diagnosis' "full" (``kv_usage_high``).
KV_FULL = 0.9


def roles_from_labels(labels_of: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """target → role, for the targets whose ``role`` label names one of :data:`ROLES`."""
    out = {}
    for target, labels in labels_of.items():
        role = labels.get(ROLE_LABEL)
        if role in ROLES:
            out[target] = str(role)
    return out


def probe_targets(
    streams: Iterable[tuple[str, str]],
    labels_of: Mapping[str, Mapping[str, str]],
    key: FleetKey,
) -> list[str]:
    """The probes of a fleet's model: targets labelled ``probe`` with the fleet's model
    and its ``group_by`` label values."""
    out = []
    for target, model in streams:
        labels = labels_of.get(target, {})
        if model != key.model_name or PROBE_LABEL not in labels:
            continue
        if all(labels.get(k, "") == v for k, v in key.labels):
            out.append(target)
    return sorted(set(out))


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
            "ttft_mean": _mean(w, "ttft"),
            "ttft_p99": None if (p := q.get("p99")) is None else p.value,
            "itl_p99": None if (p := itl.get("p99")) is None else p.value,
            "running_avg": _avg(w, "running"),
            "waiting_avg": _avg(w, "waiting"),
            "kv_avg": _avg(w, "kv_usage"),
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


@dataclass(frozen=True, slots=True)
class PDView:
    """A P/D fleet over one window: roles, pools, the client's TTFT, the pool ratio."""

    roles: Mapping[str, str]
    role_sources: Mapping[str, str]
    pools: Mapping[str, Pool]
    client: ClientTtft
    imbalance: PoolImbalance | None
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {
            "roles": [
                {"replica": t, "role": r, "source": self.role_sources.get(t, "page")}
                for t, r in sorted(self.roles.items())
            ],
            "pools": {role: p.to_dict() for role, p in self.pools.items()},
            "client_ttft": self.client.to_dict(),
            "pool_imbalance": None if self.imbalance is None else self.imbalance.to_dict(),
            "notes": list(self.notes),
        }


def _mean(w: Window, sig: str) -> float | None:
    if w.observations.get(sig, 0.0) <= 0:
        return None
    return w.means.get(sig)


def _p99(w: Window, sig: str) -> float | None:
    q = w.quantiles.get(sig, {}).get("p99")
    return None if q is None else q.value


def _avg(w: Window, sig: str) -> float | None:
    g = w.gauges.get(sig)
    return None if g is None else g.avg


def _load(role: str, fw: FleetWindow, d: Diagnosis) -> tuple[float | None, str]:
    """The share of a pool's capacity in use (module docstring), and how it was read."""
    w = fw.window
    n = max(1, len(fw.replicas))
    if d.cls in CAPACITY_CLASSES:
        return 1.0, f"{d.cls}: at its capacity"
    if role == "prefill":
        prefill = _mean(w, "prefill_time")
        covered = w.covered or (w.end - w.start)
        first = w.observations.get("ttft", 0.0)
        if prefill is None or covered <= 0:
            return None, "no prefill time on the page"
        busy = first / covered * prefill / n
        return min(1.0, busy), "requests in prefill per replica (first tokens/s × prefill time)"
    kv = _avg(w, "kv_usage")
    if kv is None:
        return None, "no KV usage on the page"
    return min(1.0, kv / KV_FULL), f"KV usage average / {KV_FULL:g}"


def _pool(
    key: FleetKey,
    role: str,
    members: Sequence[Window],
    start: float,
    end: float,
    config: DiagnosisConfig,
) -> Pool:
    pool_key = FleetKey(key.model_name, (*key.labels, (ROLE_LABEL, role)))
    fw = fleet_window(pool_key, members, start=start, end=end)
    d = diagnose(fw.window, config)
    load, basis = _load(role, fw, d)
    return Pool(role, fw, d, load, basis, transfer_facts(fw.window))


def _transfer(pools: Mapping[str, Pool]) -> tuple[float | None, float | None]:
    """The mean and p99 transfer time, from the pool that counts the transfers."""
    best = None
    for p in pools.values():
        n = p.fleet.window.observations.get("kv_xfer_time", 0.0)
        if n > 0 and (best is None or n > best[0]):
            best = (n, p.fleet.window)
    if best is None:
        return None, None
    return _mean(best[1], "kv_xfer_time"), _p99(best[1], "kv_xfer_time")


def client_ttft(
    pools: Mapping[str, Pool],
    probes: Sequence[Window],
    ttft_slo: float,
) -> ClientTtft:
    """The client's TTFT of a P/D fleet (module docstring)."""
    notes: list[str] = []
    pre = pools.get("prefill")
    dec = pools.get("decode")
    p_mean = None if pre is None else _mean(pre.fleet.window, "ttft")
    p_p99 = None if pre is None else _p99(pre.fleet.window, "ttft")
    d_mean = None if dec is None else _mean(dec.fleet.window, "ttft")
    d_p99 = None if dec is None else _p99(dec.fleet.window, "ttft")
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
    client = measured_mean if measured_mean is not None else mean
    mismatch = None
    each = [(name, v) for name, v in (("prefill", p_p99), ("decode", d_p99)) if v is not None]
    if client is not None and client > ttft_slo and each and all(v <= ttft_slo for _, v in each):
        parts = ", ".join(f"{name} {fmt_value(v, 's')}" for name, v in each)
        mismatch = (
            f"every pool's TTFT p99 is within the {fmt_value(ttft_slo, 's')} SLO ({parts}), "
            f"yet a client waits {fmt_value(client, 's')} on average "
            f"({'measured' if measured_mean is not None else 'estimated'}): each instance "
            "times only its part of the client's wait"
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
    for busy, quiet in ((pre, dec), (dec, pre)):
        saturated = busy.diagnosis.cls in CAPACITY_CLASSES
        idle = quiet.diagnosis.cls in QUIET_CLASSES and (quiet.load or 0.0) < IDLE_LOAD
        if saturated and idle:
            break
    else:
        return None
    total = n_p + n_d
    w_p, w_d = n_p * (pre.load or 0.0), n_d * (dec.load or 0.0)
    x = round(total * w_p / (w_p + w_d)) if w_p + w_d > 0 else n_p
    x = min(total - 1, max(1, x))
    if x == n_p:  # rounding moves nothing: move one toward the saturated pool
        x = min(total - 1, n_p + 1) if busy is pre else max(1, n_p - 1)
    target = (x, total - x)
    if target == (n_p, n_d):
        return None  # one replica per pool: nothing to move (add one instead)
    derived = busy.fleet.window.derived
    demand = None
    if derived.arrival_rate and derived.completion_rate:
        demand = derived.arrival_rate / derived.completion_rate
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
    outlier = Outlier(f"{role} pool", "pool", summary, evidence, (hint,))
    return PoolImbalance(
        role,
        other,
        (n_p, n_d),
        target,
        (pre.load or 0.0, dec.load or 0.0),
        demand,
        outlier,
    )


def _roles(
    replicas: Sequence[Window], given: Mapping[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    roles, sources = {}, {}
    for w in replicas:
        if w.target in given:
            roles[w.target], sources[w.target] = given[w.target], "label"
        else:
            roles[w.target], sources[w.target] = page_role(w), "page"
    return roles, sources


def pd_view(
    key: FleetKey,
    replicas: Sequence[Window],
    *,
    start: float,
    end: float,
    config: DiagnosisConfig,
    roles: Mapping[str, str] | None = None,
    probes: Sequence[Window] = (),
) -> PDView | None:
    """The pools of a fleet's replica windows, or None when no replica is a prefill or a
    decode instance (module docstring)."""
    found, sources = _roles(replicas, roles or {})
    if not any(r in ("prefill", "decode") for r in found.values()):
        return None
    pools: dict[str, Pool] = {}
    for role in ROLES:
        members = [w for w in replicas if found[w.target] == role]
        if members:
            pools[role] = _pool(key, role, members, start, end, config)
    slo = config.slo_for(key.name, key.model_name)
    notes = []
    if "both" in pools:
        notes.append(
            f"{len(pools['both'].replicas)} replica(s) serve both phases: not in the client's "
            "TTFT estimate or the pool ratio"
        )
    return PDView(
        roles=found,
        role_sources=sources,
        pools=pools,
        client=client_ttft(pools, probes, slo.ttft_p99),
        imbalance=pool_imbalance(pools),
        notes=tuple(notes),
    )


def pool_aware_imbalance(view: PDView, thresholds: ImbalanceThresholds | None = None) -> Imbalance:
    """The fleet's imbalance, replicas compared within their pool, and the pool finding."""
    parts = [find_imbalance(p.fleet.replicas, thresholds) for p in view.pools.values()]
    outliers = tuple(o for part in parts for o in part.outliers)
    shares = tuple(s for part in parts for s in part.shares)
    if view.imbalance is not None:
        outliers = (view.imbalance.outlier, *outliers)
    hints: list[Hint] = []
    for o in outliers:
        hints.extend(h for h in o.hints if h not in hints)
    # Each pool has its own fair share (1 / its replicas): no one figure for the fleet.
    return Imbalance(outliers, shares, None, tuple(hints))
