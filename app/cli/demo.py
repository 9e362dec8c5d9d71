"""``phasewatch demo``: simulated vLLM replicas and the service, in one command."""

from __future__ import annotations

import argparse
from typing import Any

from app.cli.serve import serve

DEMO_SCENARIOS = ("healthy", "incident", "kv_pressure", "prefill_interference")
# The incident's spike starts this many seconds after the demo does (the shipped
# scenario waits 5 minutes); time still runs at 1x, so every number stays realistic.
INCIDENT_SPIKE_AT_S = 60.0


def _scenario(name: str) -> Any:
    """The scenario to simulate; ``incident`` with its phases moved earlier."""
    if name != "incident":
        return name
    from app.sim.scenario import from_tree, read_tree

    tree = read_tree(name)
    tree.setdefault("name", name)
    shift = tree["phases"][0]["at_s"] - INCIDENT_SPIKE_AT_S
    tree["phases"] = [{**ph, "at_s": ph["at_s"] - shift} for ph in tree["phases"]]
    return from_tree(tree)


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "demo", help="run simulated vLLM servers and the service together"
    )
    p.add_argument("--port", type=int, default=8321, help="service port (default 8321)")
    p.add_argument("--db", default="data/demo.db", help="SQLite store (default data/demo.db)")
    p.add_argument(
        "--scenarios",
        default=",".join(DEMO_SCENARIOS),
        help="comma-separated simulator scenarios, one replica each",
    )
    p.set_defaults(func=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    from app.cli.config import load_config
    from app.config import ConfigError
    from app.sim.server import start_server

    servers = []
    targets = []
    try:
        for i, name in enumerate(s.strip() for s in args.scenarios.split(",") if s.strip()):
            server, _thread, url = start_server(_scenario(name), port=0, seed=i)
            servers.append(server)
            targets.append({"name": f"sim-{name}", "url": f"{url}/metrics"})
            print(f"simulator: {name:<22} {url}/metrics")
            if name == "incident":
                print(
                    f"  incident: healthy, then from {INCIDENT_SPIKE_AT_S:.0f} s a 5-minute x4 "
                    "traffic spike (queue builds), then recovery; repeats every 15 minutes"
                )
        settings = load_config(
            None,
            {
                "targets": targets,
                "server": {"port": args.port},
                "storage": {"path": args.db},
            },
        )
    except (ConfigError, ValueError, KeyError) as exc:
        print(f"demo: {exc}")
        for s in servers:
            s.shutdown()
            s.server_close()
        return 2
    print("press Ctrl-C to stop")
    try:
        return serve(settings)
    finally:
        for s in servers:
            s.shutdown()
            s.server_close()
        print("demo stopped")
