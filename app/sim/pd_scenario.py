"""Disaggregated prefill/decode scenarios: one file, a fleet of two pools.

A P/D scenario (``app/sim/scenarios/pd/*.yaml``, or any file with a ``pd`` section) is a
scenario file (``app.sim.scenario``) whose ``workload`` is the fleet's traffic — an
absolute ``rate``: the router splits it — plus::

    pd:
      prefill: {replicas: 2, set: {engine.max_num_batched_tokens: 8192}}
      decode: {replicas: 2, set: {engine.max_num_queued_reqs: 64}}
      transfer: {bandwidth_gb_s: 25, latency_s: 0.002, per_descriptor_s: 2.0e-7,
                 failure_prob: 0.0, lease_s: 30, proxy_s: 0.001}

``set`` holds dotted settings of one pool on top of the shared ones (the device, the
engine flags). A phase's ``set`` may name ``pd.prefill.<key>``, ``pd.decode.<key>`` (that
pool only) and ``pd.transfer.<key>`` (the transfer model from then on) beside the
settings of everything. ``expect`` of a phase is what a client of the fleet sees; the
pools' own truth is computed (``app.sim.pd``).

The transfer model (:class:`Transfer`): each decode instance reads the KV of its
requests over its own link, one transfer after another at ``bandwidth_gb_s``; a
transfer of B bytes and D descriptors (one per block and layer, K and V) takes its wait
for the link, B / bandwidth, ``latency_s`` and D × ``per_descriptor_s``; it fails with
``failure_prob``. A prefill instance holds a finished request's KV until the transfer
ends, or ``lease_s`` (vLLM's ``kv_lease_duration``) after it finished if the decode
side has not picked the request up by then: the KV expires. ``proxy_s`` is the router's
hop between the prefill answer and the decode request.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, fields, replace
from importlib import resources
from pathlib import Path
from typing import Any

from app.sim.errors import SimConfigError
from app.sim.scenario import Phase, Scenario, from_tree, read_tree

__all__ = [
    "PD_DIR",
    "ROLES",
    "PDScenario",
    "Transfer",
    "available_pd",
    "is_pd",
    "load_pd",
    "pd_from_tree",
]

PD_DIR = "pd"
ROLES = ("prefill", "decode")
_PD_KEYS = {"prefill", "decode", "transfer"}
_POOL_KEYS = {"replicas", "set"}


@dataclass(frozen=True, slots=True)
class Transfer:
    """How the KV cache travels from a prefill to a decode instance (module docstring)."""

    bandwidth_gb_s: float = 25.0
    latency_s: float = 0.002
    per_descriptor_s: float = 2.0e-7
    failure_prob: float = 0.0
    lease_s: float = 30.0
    proxy_s: float = 0.001
    # Posting one descriptor (``vllm:nixl_post_time_seconds``), a small CPU cost.
    post_per_descriptor_s: float = 2.0e-8

    def validate(self) -> None:
        if not self.bandwidth_gb_s > 0:
            raise SimConfigError("pd.transfer.bandwidth_gb_s must be positive")
        if min(self.latency_s, self.per_descriptor_s, self.proxy_s, self.post_per_descriptor_s) < 0:
            raise SimConfigError("pd.transfer times must not be negative")
        if not 0 <= self.failure_prob < 1:
            raise SimConfigError("pd.transfer.failure_prob must be in [0, 1)")
        if not self.lease_s > 0:
            raise SimConfigError("pd.transfer.lease_s must be positive")


@dataclass(frozen=True, slots=True)
class PDScenario:
    """A P/D fleet: the fleet's traffic and phases (``fleet``), each pool's scenario (its
    own settings, no traffic of its own), the replicas per pool and the transfer model
    of every phase of ``fleet`` (by position)."""

    name: str
    description: str
    fleet: Scenario
    prefill: Scenario
    decode: Scenario
    prefill_replicas: int
    decode_replicas: int
    transfers: tuple[Transfer, ...]

    @property
    def duration_s(self) -> float:
        return self.fleet.duration_s

    def transfer_at(self, t: float) -> Transfer:
        """The transfer model of the phase active at sim time ``t``."""
        phase, _ = self.fleet.phase_at(t)
        return self.transfers[_index(self.fleet, phase)]

    def pool(self, role: str) -> Scenario:
        return self.prefill if role == "prefill" else self.decode

    def replicas(self, role: str) -> int:
        return self.prefill_replicas if role == "prefill" else self.decode_replicas


def _index(sc: Scenario, phase: Phase) -> int:
    for i, ph in enumerate(sc.phases):
        if ph is phase:
            return i
    raise KeyError(phase.name)


def available_pd() -> list[str]:
    """Names of the P/D scenarios shipped with the package."""
    root = resources.files("app.sim") / "scenarios" / PD_DIR
    return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".yaml"))


def _read(name_or_path: str) -> dict[str, Any]:
    if name_or_path in available_pd():
        res = resources.files("app.sim") / "scenarios" / PD_DIR / f"{name_or_path}.yaml"
        with resources.as_file(res) as path:
            tree = read_tree(str(path))
        tree.setdefault("name", name_or_path)
        return tree
    tree = read_tree(name_or_path)
    tree.setdefault("name", Path(name_or_path).stem)
    return tree


def is_pd(name_or_path: str) -> bool:
    """Whether a scenario name or file is a P/D fleet (a shipped one, or a ``pd`` section)."""
    if name_or_path in available_pd():
        return True
    if not name_or_path.endswith((".yaml", ".yml")) and "/" not in name_or_path:
        return False
    try:
        return "pd" in read_tree(name_or_path)
    except SimConfigError:
        return False


def load_pd(name_or_path: str, overrides: dict[str, Any] | None = None) -> PDScenario:
    """Load a P/D scenario; ``overrides`` are dotted settings (``pd.*`` ones included)."""
    return pd_from_tree(_read(name_or_path), overrides)


def _split(settings: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Dotted settings → ``all``, ``prefill``, ``decode`` and ``transfer`` parts."""
    out: dict[str, dict[str, Any]] = {"all": {}, "prefill": {}, "decode": {}, "transfer": {}}
    for key, value in settings.items():
        key = str(key)
        if key.startswith("pd."):
            part, _, rest = key[3:].partition(".")
            if part not in ("prefill", "decode", "transfer") or not rest:
                raise SimConfigError(f"unknown P/D setting {key!r}")
            out[part][rest[4:] if rest.startswith("set.") else rest] = value
        else:
            out["all"][key] = value
    return out


def _transfer(base: Transfer, values: dict[str, Any], where: str) -> Transfer:
    known = {f.name for f in fields(Transfer)}
    unknown = set(values) - known
    if unknown:
        raise SimConfigError(f"{where}: unknown transfer setting(s): {', '.join(sorted(unknown))}")
    try:
        out = replace(base, **{k: float(v) for k, v in values.items()})
    except (TypeError, ValueError) as exc:
        raise SimConfigError(f"{where}: bad transfer settings: {exc}") from None
    out.validate()
    return out


def pd_from_tree(tree: dict[str, Any], overrides: dict[str, Any] | None = None) -> PDScenario:
    """Build a P/D scenario from its mapping (module docstring)."""
    tree = copy.deepcopy(tree)
    name = str(tree.get("name", "pd"))
    pd = tree.pop("pd", None)
    if not isinstance(pd, dict) or set(pd) - _PD_KEYS:
        raise SimConfigError(f"{name}: pd must be a mapping of prefill, decode and transfer")
    wl = tree.get("workload") or {}
    if "load" in wl:
        raise SimConfigError(f"{name}: a P/D fleet's workload takes an absolute rate, not load")
    extra = _split(dict(overrides or {}))
    counts: dict[str, int] = {}
    pool_sets: dict[str, dict[str, Any]] = {}
    for role in ROLES:
        section = pd.get(role) or {}
        if not isinstance(section, dict) or set(section) - _POOL_KEYS:
            raise SimConfigError(f"{name}: pd.{role} takes replicas and set")
        counts[role] = int(extra[role].pop("replicas", section.get("replicas", 1)))
        if counts[role] < 1:
            raise SimConfigError(f"{name}: pd.{role}.replicas must be at least 1")
        pool_sets[role] = {**dict(section.get("set") or {}), **extra[role]}
    phases = tree.pop("phases", None) or []
    split_phases = []
    for i, raw in enumerate(phases):
        if not isinstance(raw, dict):
            raise SimConfigError(f"{name}: phases[{i}] must be a mapping")
        parts = _split(dict(raw.get("set") or {}))
        if "replicas" in parts["prefill"] or "replicas" in parts["decode"]:
            raise SimConfigError(f"{name}: a pool's replicas cannot change in a phase")
        split_phases.append((raw, parts))

    def scenario(role: str | None) -> Scenario:
        t = copy.deepcopy(tree)
        own: list[dict[str, Any]] = []
        for raw, parts in split_phases:
            sets = dict(parts["all"])
            if role is not None:
                sets.update(parts[role])
            own.append({**raw, "set": sets})
        t["phases"] = own
        over = dict(extra["all"])
        if role is not None:
            over.update(pool_sets[role])
            # A pool's replicas take the router's requests only.
            over["workload.rate"] = 0.0
            over["workload.bursts"] = None
        return from_tree(t, over)

    fleet = scenario(None)
    transfers = [
        _transfer(Transfer(), {**dict(pd.get("transfer") or {}), **extra["transfer"]}, name)
    ]
    for raw, parts in split_phases:
        where = f"{name}, phase {raw.get('name', '?')}"
        transfers.append(_transfer(transfers[-1], parts["transfer"], where))
    if len(fleet.phases) == len(phases):  # a phase at 0 replaced the base (app.sim.scenario)
        transfers = transfers[1:]
    return PDScenario(
        name=name,
        description=str(tree.get("description", "")),
        fleet=fleet,
        prefill=scenario("prefill"),
        decode=scenario("decode"),
        prefill_replicas=counts["prefill"],
        decode_replicas=counts["decode"],
        transfers=tuple(transfers),
    )
