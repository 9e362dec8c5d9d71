"""Disaggregated prefill/decode fleets: pools by role, the client's TTFT, the pool ratio.

A fleet of one model whose replicas split the two phases (docs/concepts.md, "Disaggregation")
is read as **pools** (:func:`pd_view`):

* **Roles.** Each replica is ``prefill``, ``decode`` or ``both``: the target's ``role``
  label when the configuration gives one (:data:`ROLE_LABEL`), else what its page shows
  (``app.windows.transferfacts.page_role``: a KV consumer's ``kv_fetch`` gauges → decode;
  KV-connector families without them → prefill; neither → both). A fleet is a P/D
  fleet with a prefill and a decode replica, or a prefill or decode role configured
  (``pd_view`` gives None otherwise: a lone KV consumer may be an offloading instance).
* **Pools.** The replicas of one role summed as a fleet is (``app.fleet.aggregate``),
  named ``model{role=prefill}``, each diagnosed like a stream: a prefill pool is
  prefill- or queue-bound, a decode pool decode-bound or short of KV, either
  ``transfer_bound`` (``app.diagnose.rules.transfer``) — the decode pool when transfers are
  slow or fail (it starts them, in pull mode), the prefill pool when the KV it holds
  expires. Replicas are compared for imbalance within their pool only: a prefill and a
  decode instance are no peers.
* **The client's TTFT** and the **pool imbalance** with the ratio to move to:
  ``app.fleet.pool_readings`` (each pool's load, the estimate and its bound, the mismatch).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.diagnose import Diagnosis, DiagnosisConfig, diagnose
from app.diagnose.records import Hint
from app.fleet.aggregate import FleetKey, FleetWindow, fleet_window
from app.fleet.imbalance import Imbalance, ImbalanceThresholds, Outlier, find_imbalance
from app.fleet.pool_readings import (
    CAPACITY_CLASSES,
    IDLE_LOAD,
    ClientTtft,
    Pool,
    PoolImbalance,
    avg_of,
    client_ttft,
    mean_of,
    pool_imbalance,
)
from app.model import Window
from app.probeconfig import PROBE_LABEL
from app.windows.transferfacts import ROLES, page_role, transfer_facts

__all__ = [
    "IDLE_LOAD",
    "ROLE_LABEL",
    "ClientTtft",
    "PDView",
    "Pool",
    "PoolImbalance",
    "client_ttft",
    "imbalance_within_pools",
    "pd_view",
    "pool_aware_imbalance",
    "pool_imbalance",
    "probe_targets",
    "roles_from_labels",
]

# The target label that says a replica's role (llm-d's pods carry ``llm-d.ai/role``;
# relabel it to ``role``).
ROLE_LABEL = "role"
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


def _load(role: str, fw: FleetWindow, d: Diagnosis) -> tuple[float | None, str]:
    """The share of a pool's capacity in use (module docstring), and how it was read."""
    w = fw.window
    n = max(1, len(fw.replicas))
    if d.cls in CAPACITY_CLASSES:
        return 1.0, f"{d.cls}: at its capacity"
    if role == "prefill":
        prefill = mean_of(w, "prefill_time")
        covered = w.covered or (w.end - w.start)
        first = w.observations.get("ttft", 0.0)
        if prefill is None or covered <= 0:
            return None, "no prefill time on the page"
        busy = first / covered * prefill / n
        return min(1.0, busy), "requests in prefill per replica (first tokens/s × prefill time)"
    kv = avg_of(w, "kv_usage")
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
    infos = {tuple(sorted(w.info.items())) for w in fw.replicas}
    if len(infos) == 1 and fw.replicas[0].info:
        # One cache configuration across the pool: its settings are the hints' to read.
        window = dataclasses.replace(fw.window, info=fw.replicas[0].info)
        fw = dataclasses.replace(fw, window=window)
    d = diagnose(fw.window, config)
    load, basis = _load(role, fw, d)
    return Pool(role, fw, d, load, basis, transfer_facts(fw.window))


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


def _is_pd(roles: Mapping[str, str], sources: Mapping[str, str]) -> bool:
    """A P/D fleet: a prefill and a decode replica, or a prefill or decode role configured
    (a lone KV consumer may be an offloading instance, ``kv_both``, not a decode pool)."""
    found = set(roles.values())
    configured = any(
        sources.get(t) == "label" and r in ("prefill", "decode") for t, r in roles.items()
    )
    return configured or {"prefill", "decode"} <= found


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
    if not _is_pd(found, sources):
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


def _merged(parts: Sequence[Imbalance], first: Sequence[Outlier] = ()) -> Imbalance:
    outliers = (*first, *(o for part in parts for o in part.outliers))
    shares = tuple(s for part in parts for s in part.shares)
    hints: list[Hint] = []
    for o in outliers:
        hints.extend(h for h in o.hints if h not in hints)
    # Each pool has its own fair share (1 / its replicas): no one figure for the fleet.
    return Imbalance(tuple(outliers), shares, None, tuple(hints))


def pool_aware_imbalance(
    view: PDView,
    thresholds: ImbalanceThresholds | None = None,
    config: DiagnosisConfig | None = None,
) -> Imbalance:
    """The fleet's imbalance, replicas compared within their pool (a latency difference
    judged against their SLOs from ``config``), and the pool finding."""
    parts = [find_imbalance(p.fleet.replicas, thresholds, config) for p in view.pools.values()]
    first = () if view.imbalance is None else (view.imbalance.outlier,)
    return _merged(parts, first)


def imbalance_within_pools(
    replicas: Sequence[Window],
    roles: Mapping[str, str] | None = None,
    thresholds: ImbalanceThresholds | None = None,
    config: DiagnosisConfig | None = None,
) -> Imbalance | None:
    """Replicas compared within their pool (no pool diagnosed: a chart's many windows),
    or None when the fleet is no P/D fleet."""
    found, sources = _roles(replicas, roles or {})
    if not _is_pd(found, sources):
        return None
    groups = [[w for w in replicas if found[w.target] == role] for role in ROLES]
    return _merged([find_imbalance(g, thresholds, config) for g in groups if g])
