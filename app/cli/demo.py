"""``phasewatch demo``: simulated vLLM servers and the service, in one command.

The demo's fleet means something on the first screen: three replicas of one model, one of
which the "load balancer" sends 2.5 times its share — decode-bound, while its peers stay
healthy; the fleet page flags it and says how to route — beside single servers of other
models that each show one bottleneck. (2.5, not 3: at three times its share the replica's
queue grows without end, and a demo runs for hours.)
Every server names its own model (``engine.served_model_name``), so fleets form only where
replicas really serve the same model.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.cli.serve import serve
from app.cli.sim import timeline_text

# The incident's spike starts this many seconds after the demo does (the shipped
# scenario waits 5 minutes); time still runs at 1x, so every number stays realistic.
INCIDENT_SPIKE_AT_S = 60.0


@dataclass(frozen=True)
class DemoServer:
    """One simulated server of the demo: a scenario serving ``model`` on ``replicas``
    replicas (targets ``sim-<name>``, or ``sim-<name>-<i>`` for several); ``replica_set``
    gives a replica settings of its own (``phasewatch sim --replica-set``)."""

    name: str
    scenario: str
    model: str
    replicas: int = 1
    replica_set: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    note: str = ""

    def target_names(self) -> list[str]:
        if self.replicas == 1:
            return [f"sim-{self.name}"]
        return [f"sim-{self.name}-{i}" for i in range(self.replicas)]


DEMO: tuple[DemoServer, ...] = (
    DemoServer(
        "chat",
        "healthy",
        "llama-3.1-8b-chat",
        replicas=3,
        replica_set={2: {"workload.rate_multiplier": 2.5}},
        note="three replicas of one model; replica 2 gets 2.5 times its share of the "
        "traffic (imbalanced, decode-bound: the fleet page names it and how to route)",
    ),
    DemoServer(
        "incident",
        "incident",
        "llama-3.1-8b-support",
        note="one server; a x4 traffic spike makes it queue-bound, then it recovers",
    ),
    DemoServer(
        "kv_pressure",
        "kv_pressure",
        "llama-3.1-8b-longctx",
        note="one server; long contexts outgrow the KV pool: preemptions, waiting",
    ),
    DemoServer(
        "prefill_interference",
        "prefill_interference",
        "llama-3.1-8b-docs",
        note="one server; long documents prefilled in one step stall every stream (ITL p99)",
    ),
)


def plan(scenarios: str | None = None) -> tuple[DemoServer, ...]:
    """The demo's servers: :data:`DEMO`, or one single server per named scenario, each
    serving a model named after it (``--scenarios``)."""
    if scenarios is None:
        return DEMO
    names = [s.strip() for s in scenarios.split(",") if s.strip()]
    return tuple(DemoServer(n, n, f"sim-{n}") for n in dict.fromkeys(names))


def scenario_of(name: str, model: str, extra: Mapping[str, Any] | None = None) -> Any:
    """The scenario to simulate, serving ``model``; ``incident`` with its phases moved
    earlier (:data:`INCIDENT_SPIKE_AT_S`)."""
    from app.sim.scenario import from_tree, read_tree

    tree = read_tree(name)
    tree.setdefault("name", Path(name).stem)
    if name == "incident":
        shift = tree["phases"][0]["at_s"] - INCIDENT_SPIKE_AT_S
        tree["phases"] = [{**ph, "at_s": ph["at_s"] - shift} for ph in tree["phases"]]
    return from_tree(tree, {"engine.served_model_name": model, **(extra or {})})


def start_servers(servers: Sequence[DemoServer]) -> tuple[list[Any], list[dict[str, str]]]:
    """Start every simulated server on a free loopback port (seeds by position); returns
    the HTTP servers (to shut down) and the service's targets. Prints one line each."""
    from app.sim.server import start_server

    started: list[Any] = []
    targets: list[dict[str, str]] = []
    try:
        for seed, s in enumerate(servers):
            own = {
                i: scenario_of(s.scenario, s.model, overrides)
                for i, overrides in s.replica_set.items()
            }
            server, _thread, url = start_server(
                scenario_of(s.scenario, s.model),
                port=0,
                replicas=s.replicas,
                seed=seed,
                replica_scenarios=own,
            )
            started.append(server)
            paths = (
                ["/metrics"]
                if s.replicas == 1
                else [f"/replica/{i}/metrics" for i in range(s.replicas)]
            )
            for name, path in zip(s.target_names(), paths, strict=True):
                targets.append({"name": name, "url": f"{url}{path}"})
            _describe(s, url)
    except BaseException:
        stop_servers(started)
        raise
    return started, targets


def _describe(s: DemoServer, url: str) -> None:
    last = s.replicas - 1
    where = f"{url}/metrics" if s.replicas == 1 else f"{url}/replica/{{0..{last}}}/metrics"
    print(f"simulator: {s.model:<22} {s.scenario:<22} {where}")
    if s.note:
        print(f"  {s.note}")
    timeline = timeline_text(scenario_of(s.scenario, s.model))
    if timeline:
        moved = ""
        if s.scenario == "incident":
            moved = (
                " (moved earlier for the demo; `phasewatch sim --scenario incident` spikes "
                "at 5 min)"
            )
        print(f"  {timeline}{moved}")


def stop_servers(servers: Sequence[Any]) -> None:
    for s in servers:
        s.shutdown()
        s.server_close()


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "demo", help="run simulated vLLM servers and the service together"
    )
    p.add_argument("--port", type=int, default=8321, help="service port (default 8321)")
    p.add_argument("--db", default="data/demo.db", help="SQLite store (default data/demo.db)")
    p.add_argument(
        "--scenarios",
        help="comma-separated simulator scenarios, one single server each (default: a fleet "
        "of three chat replicas, one overloaded, beside incident, kv_pressure and "
        "prefill_interference servers)",
    )
    p.set_defaults(func=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    from app.cli.config import load_config
    from app.config import ConfigError
    from app.sim.errors import SimConfigError

    servers: list[Any] = []
    try:
        servers, targets = start_servers(plan(args.scenarios))
        settings = load_config(
            None,
            {
                "targets": targets,
                "server": {"port": args.port},
                "storage": {"path": args.db},
            },
        )
    except (ConfigError, SimConfigError, ValueError, KeyError) as exc:
        print(f"demo: {exc}")
        stop_servers(servers)
        return 2
    print("press Ctrl-C to stop")
    try:
        return serve(settings)
    finally:
        stop_servers(servers)
        print("demo stopped")
