"""Scenarios: data files that set up a replica and change it over time.

A scenario file (YAML) holds the config mapping of ``app.sim.config`` plus::

    name: incident
    description: one line
    expect: healthy            # the class it is built to show (documentation only)
    duration_s: 900            # default length of a recording
    loop_s: 900                # optional: the phase timeline repeats (live demo)
    phases:                    # optional, applied in order; each change persists
      - {at_s: 300, name: spike, expect: queue_bound, set: {workload.rate_multiplier: 3.5}}
      - at_s: 900                # a phase may say what it changed, for the ground truth
        name: surge
        expect: queue_bound
        cause: {sub_cause: arrival_surge, headline_change: arrival_rate}
        set: {workload.rate_multiplier: 4.0}

A phase's ``cause`` is the scenario's own account of the change it made
(``app.sim.truth.Cause``): the sub-cause that refines its ``expect`` class (or null)
and the canonical name of the signal the change moved (``headline_change``). It holds
for that phase only; the ground truth uses it for the windows of that phase.

Overrides (CLI flags, ``--set a.b=value``) change the base mapping before the phases are
applied. A base ``workload.load`` is turned into an absolute rate once, from the base
config, so a phase that changes an engine flag does not silently change the traffic.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from app.sim.config import SimConfig, resolve
from app.sim.errors import SimConfigError
from app.sim.truth import CLIENT_CLASSES, HEADLINE_CHANGES, SUB_CAUSES, Cause

_TOP_LEVEL = {"name", "description", "expect", "duration_s", "loop_s", "phases"}
_SECTIONS = {"device", "model", "physics", "engine", "workload", "slo", "speculative", "faults"}


@dataclass(frozen=True, slots=True)
class Phase:
    at_s: float
    name: str
    config: SimConfig
    expect: str | None
    cause: Cause | None = None


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    description: str
    expect: str | None
    duration_s: float
    loop_s: float | None
    phases: tuple[Phase, ...]

    def phase_at(self, t: float) -> tuple[Phase, float]:
        """The phase active at sim time ``t`` and the time the next one starts (or inf)."""
        offset = 0.0
        local = t
        if self.loop_s:
            cycles = math.floor(t / self.loop_s)
            offset = cycles * self.loop_s
            local = t - offset
        current = self.phases[0]
        until = math.inf if not self.loop_s else offset + self.loop_s
        for ph in self.phases[1:]:
            if ph.at_s <= local:
                current = ph
            else:
                until = offset + ph.at_s
                break
        return current, until

    @property
    def base(self) -> SimConfig:
        return self.phases[0].config


def available() -> list[str]:
    """Names of the scenarios shipped with the package."""
    root = resources.files("app.sim") / "scenarios"
    return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".yaml"))


def read_tree(name_or_path: str) -> dict[str, Any]:
    """The raw mapping of a shipped scenario (by name) or of a YAML file (by path)."""
    if name_or_path.endswith((".yaml", ".yml")) or "/" in name_or_path:
        path = Path(name_or_path)
        if not path.is_file():
            raise SimConfigError(f"scenario file {name_or_path} not found")
        text = path.read_text(encoding="utf-8")
    else:
        res = resources.files("app.sim") / "scenarios" / f"{name_or_path}.yaml"
        if not res.is_file():
            known = ", ".join(available())
            raise SimConfigError(f"unknown scenario {name_or_path!r} (known: {known})")
        text = res.read_text(encoding="utf-8")
    try:
        tree = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SimConfigError(f"scenario {name_or_path}: invalid YAML: {exc}") from None
    if not isinstance(tree, dict):
        raise SimConfigError(f"scenario {name_or_path}: expected a mapping at the top")
    return tree


def set_dotted(tree: dict[str, Any], key: str, value: Any) -> None:
    """Set ``a.b.c`` (list items by index) in a nested mapping, creating mappings."""
    parts = key.split(".")
    node: Any = tree
    for i, part in enumerate(parts[:-1]):
        nxt = node[int(part)] if isinstance(node, list) else node.get(part)
        if isinstance(nxt, str) and parts[i] in ("device", "model") and i == 0:
            nxt = {"preset": nxt}
            node[part] = nxt
        if nxt is None:
            nxt = {}
            node[part] = nxt
        if not isinstance(nxt, dict | list):
            raise SimConfigError(f"cannot set {key}: {'.'.join(parts[: i + 1])} is a value")
        node = nxt
    last = parts[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    if parts[0] == "workload" and len(parts) == 2 and last in ("rate", "load"):
        node.pop("load" if last == "rate" else "rate", None)


def load(name_or_path: str, overrides: dict[str, Any] | None = None) -> Scenario:
    """Load a shipped scenario (by name) or a YAML file, apply overrides, validate."""
    tree = read_tree(name_or_path)
    tree.setdefault("name", Path(name_or_path).stem)
    return from_tree(tree, overrides)


def from_tree(tree: dict[str, Any], overrides: dict[str, Any] | None = None) -> Scenario:
    """Build a scenario from its mapping; every phase is resolved (validated) up front."""
    unknown = set(tree) - _TOP_LEVEL - _SECTIONS
    if unknown:
        raise SimConfigError(f"unknown scenario key(s): {', '.join(sorted(unknown))}")
    base_tree = {k: copy.deepcopy(v) for k, v in tree.items() if k not in _TOP_LEVEL}
    for key, value in (overrides or {}).items():
        set_dotted(base_tree, key, value)
    name = str(tree.get("name", "custom"))
    base = _resolve(base_tree, name, "base")
    expect = tree.get("expect")
    phases = [Phase(0.0, "base", base, expect)]
    running_tree = copy.deepcopy(base_tree)
    wl = running_tree.setdefault("workload", {})
    wl.pop("load", None)
    wl["rate"] = base.workload.rate
    for i, raw in enumerate(tree.get("phases") or []):
        if not isinstance(raw, dict) or "at_s" not in raw:
            raise SimConfigError(f"{name}: phases[{i}] needs at_s")
        at = float(raw["at_s"])
        if at < 0 or (phases and at < phases[-1].at_s):
            raise SimConfigError(f"{name}: phases must be in time order from 0")
        for key, value in (raw.get("set") or {}).items():
            set_dotted(running_tree, str(key), value)
        pname = str(raw.get("name", f"phase{i + 1}"))
        cfg = _resolve(copy.deepcopy(running_tree), name, pname)
        cause = _cause(raw, f"{name}, phase {pname}")
        phases.append(Phase(at, pname, cfg, raw.get("expect"), cause))
    if len(phases) > 1 and phases[1].at_s == 0:
        phases.pop(0)
        first = phases[0]
        phases[0] = Phase(0.0, first.name, first.config, first.expect, first.cause)
    for ph in phases:
        # A phase may be built to show what a probe sees (frontend_bound: client_class).
        if ph.expect is not None and ph.expect not in CLIENT_CLASSES:
            raise SimConfigError(f"{name}: expect {ph.expect!r} is not one of {CLIENT_CLASSES}")
    base_blocks = phases[0].config.num_gpu_blocks
    prefix = phases[0].config.workload.shared_prefix_tokens
    spec = phases[0].config.speculative.num_speculative_tokens
    for ph in phases[1:]:
        if ph.config.workload.shared_prefix_tokens != prefix:
            raise SimConfigError(f"{name}: shared_prefix_tokens cannot change in a phase")
        if ph.config.speculative.num_speculative_tokens != spec:
            raise SimConfigError(
                f"{name}: speculative.num_speculative_tokens cannot change in a phase (restart)"
            )
        if ph.config.num_gpu_blocks != base_blocks:
            raise SimConfigError(f"{name}: phases cannot resize the KV pool (restart instead)")
    loop = tree.get("loop_s")
    if loop is not None and float(loop) <= phases[-1].at_s:
        raise SimConfigError(f"{name}: loop_s must be after the last phase")
    duration = float(tree.get("duration_s", 600.0))
    if duration <= 0:
        raise SimConfigError(f"{name}: duration_s must be positive")
    return Scenario(
        name=name,
        description=str(tree.get("description", "")),
        expect=expect,
        duration_s=duration,
        loop_s=float(loop) if loop is not None else None,
        phases=tuple(phases),
    )


def _cause(raw: dict[str, Any], where: str) -> Cause | None:
    """A phase's ``cause``: which sub-cause and headline change it is built to show."""
    given = raw.get("cause")
    if given is None:
        return None
    if not isinstance(given, dict) or set(given) - {"sub_cause", "headline_change"}:
        raise SimConfigError(f"{where}: cause takes sub_cause and headline_change")
    expect = raw.get("expect")
    sub = given.get("sub_cause")
    headline = given.get("headline_change")
    if expect is None:
        raise SimConfigError(f"{where}: a cause needs the phase's expect class")
    if sub is not None and sub not in SUB_CAUSES:
        raise SimConfigError(f"{where}: sub_cause {sub!r} is not one of {SUB_CAUSES}")
    if headline not in HEADLINE_CHANGES:
        raise SimConfigError(
            f"{where}: headline_change {headline!r} is not one of {HEADLINE_CHANGES}"
        )
    return Cause(str(expect), sub, str(headline))


def _resolve(tree: dict[str, Any], name: str, phase: str) -> SimConfig:
    try:
        return resolve(tree)
    except SimConfigError as exc:
        where = name if phase == "base" else f"{name}, phase {phase}"
        raise SimConfigError(f"{where}: {exc}") from None
