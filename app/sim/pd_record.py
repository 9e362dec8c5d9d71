"""Record a P/D fleet: one recording folder per replica, side by side.

``DIR/<replica>/`` is a recording of that replica (``app.sim.record``'s format: a page
per 5 s of sim time named by its Unix time, its ``truth.jsonl``), for ``prefill-0``…
then ``decode-0``…; ``DIR/client.jsonl`` is what the fleet's clients saw per 5 s
interval (``app.sim.pd.ClientAccount``: requests by the time of their first token, their
TTFT from the fleet's door, failures); ``DIR/fleet.json`` says what was simulated, with
each replica's role (``replicas``). ``phasewatch replay DIR`` reads it as one fleet.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from app.sim.engine import INTERVAL_S
from app.sim.exposition import TextWriter, replica_families
from app.sim.pd import ClientAccount, OnInterval, PDFleet, replica_names
from app.sim.pd_scenario import PDScenario, load_pd
from app.sim.record import DEFAULT_EPOCH, describe
from app.sim.scenario import Phase
from app.sim.truth import Account, Verdict, row

__all__ = ["FLEET_FILE", "read_fleet", "record_pd"]

FLEET_FILE = "fleet.json"


def record_pd(
    scenario: str | PDScenario,
    out_dir: str | Path,
    duration: float | None = None,
    seed: int = 0,
    overrides: Mapping[str, Any] | None = None,
    *,
    version: str = "0.33",
    start_unix: float = DEFAULT_EPOCH,
) -> Path:
    """Simulate the fleet for ``duration`` s (default: the scenario's) and write it."""
    sc = scenario if isinstance(scenario, PDScenario) else load_pd(scenario, dict(overrides or {}))
    length = sc.duration_s if duration is None else float(duration)
    if length <= 0:
        raise ValueError("duration must be positive")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows: dict[str, list[dict[str, Any]]] = {}
    client: list[ClientAccount] = []

    def hook(name: str) -> OnInterval:
        kept = rows.setdefault(name, [])

        def keep(acct: Account, verdict: Verdict, phase: Phase) -> None:
            kept.append(row(acct, verdict, start_unix, phase.name, phase.expect, phase.cause))

        return keep

    fleet = PDFleet(sc, seed, version, hook, client.append)
    names = [name for name, _ in replica_names(sc)]
    writers = []
    for name, rep in zip(names, fleet.replicas, strict=True):
        (out / name).mkdir(exist_ok=True)
        writers.append((out / name, TextWriter(replica_families(rep), created_ts=start_unix)))
    pages = int(length // INTERVAL_S)
    for k in range(pages + 1):
        t = k * INTERVAL_S
        fleet.advance_to(t)
        for folder, writer in writers:
            (folder / f"{start_unix + t:.3f}.prom").write_bytes(writer.render())
    extra = 0.0
    while min(len(r) for r in rows.values()) < pages:  # steps in flight: finish the intervals
        extra += INTERVAL_S
        fleet.advance_to(pages * INTERVAL_S + extra)
    fleet.flush_client()
    for name in names:
        with (out / name / "truth.jsonl").open("w", encoding="utf-8") as fh:
            for r in rows[name][:pages]:
                fh.write(json.dumps(r) + "\n")
    with (out / "client.jsonl").open("w", encoding="utf-8") as fh:
        for acct in client[:pages]:
            fh.write(json.dumps(acct.row(start_unix)) + "\n")
    (out / FLEET_FILE).write_text(
        json.dumps(describe_pd(sc, seed, version, start_unix, length), indent=2) + "\n",
        encoding="utf-8",
    )
    return out


def describe_pd(
    sc: PDScenario, seed: int, version: str, start: float, duration: float
) -> dict[str, Any]:
    """What a P/D recording or server simulates: the pools, the transfer, each pool's
    settings (``app.sim.record.describe``), and every replica's role."""
    transfers = []
    for ph, tr in zip(sc.fleet.phases, sc.transfers, strict=True):
        transfers.append({"at_s": ph.at_s, "phase": ph.name, **_fields(tr)})
    return {
        "scenario": sc.name,
        "description": sc.description,
        "kind": "pd",
        "seed": seed,
        "vllm_version": version,
        "start_unix": start,
        "duration_s": duration,
        "interval_s": INTERVAL_S,
        "model_name": sc.fleet.base.served_model_name,
        "replicas": [{"name": n, "role": r} for n, r in replica_names(sc)],
        "transfer": transfers,
        "fleet": describe(sc.fleet, seed, version, start, duration),
        "prefill": describe(sc.prefill, seed, version, start, duration),
        "decode": describe(sc.decode, seed, version, start, duration),
    }


def _fields(obj: Any) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in obj.__dataclass_fields__}


def read_fleet(folder: str | Path) -> dict[str, Any] | None:
    """``fleet.json`` of a P/D recording folder, or None when the folder is not one."""
    path = Path(folder) / FLEET_FILE
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) and data.get("kind") == "pd" else None
