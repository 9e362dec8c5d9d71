"""Write a recording without waiting for the wall clock.

A recording (docs/architecture.md, "Recordings"): one exposition page per 5 s of simulated
time, named by its Unix time (``1764403200.000.prom``), plus ``truth.jsonl`` (one line per 5 s
interval, ``app.sim.truth.row``) and ``sim.json`` (what was simulated).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from app.sim.engine import INTERVAL_S, Replica
from app.sim.exposition import TextWriter, replica_families
from app.sim.scenario import Scenario, load
from app.sim.truth import Account, Verdict, row

DEFAULT_EPOCH = 1764403200.0


def record(
    scenario: str | Scenario,
    out_dir: str | Path,
    duration: float | None = None,
    seed: int = 0,
    overrides: Mapping[str, Any] | None = None,
    *,
    version: str = "0.33",
    start_unix: float = DEFAULT_EPOCH,
) -> Path:
    """Simulate ``duration`` seconds (default: the scenario's) and write the recording.

    Returns the output directory. Pages are written at 0, 5, 10, ... ``duration`` s.
    """
    sc = scenario if isinstance(scenario, Scenario) else load(scenario, dict(overrides or {}))
    length = sc.duration_s if duration is None else float(duration)
    if length <= 0:
        raise ValueError("duration must be positive")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []

    def keep(acct: Account, verdict: Verdict, phase: Any) -> None:
        rows.append(
            row(
                acct,
                verdict,
                start_unix,
                phase.name,
                phase.expect,
                phase.cause,
                phase.config.faults.frontend_delay_s,
            )
        )

    replica = Replica(sc, seed=seed, version=version, on_interval=keep)
    writer = TextWriter(replica_families(replica), created_ts=start_unix)
    pages = int(length // INTERVAL_S)
    for k in range(pages + 1):
        t = k * INTERVAL_S
        replica.advance_to(t)
        (out / f"{start_unix + t:.3f}.prom").write_bytes(writer.render())
    extra = 0.0
    while len(rows) < pages:  # a step still in flight at the end: finish its intervals
        extra += INTERVAL_S
        replica.advance_to(pages * INTERVAL_S + extra)
    with (out / "truth.jsonl").open("w", encoding="utf-8") as fh:
        for r in rows[:pages]:
            fh.write(json.dumps(r) + "\n")
    (out / "sim.json").write_text(
        json.dumps(describe(sc, seed, version, start_unix, length), indent=2) + "\n",
        encoding="utf-8",
    )
    return out


def describe(
    sc: Scenario, seed: int, version: str, start: float, duration: float
) -> dict[str, Any]:
    """What a recording or a live server simulates, for humans and for the evaluator."""
    phases = []
    for ph in sc.phases:
        c = ph.config
        phases.append(
            {
                "at_s": ph.at_s,
                "name": ph.name,
                "expect": ph.expect,
                "device": c.device.name,
                "model": c.model.name,
                "params_b": c.model.params / 1e9,
                "weight_bits": c.model.weight_bits,
                "rate_req_s": round(c.workload.rate * c.workload.rate_multiplier, 4),
                "max_num_seqs": c.engine.max_num_seqs,
                "max_num_batched_tokens": c.engine.max_num_batched_tokens,
                "num_gpu_blocks": c.num_gpu_blocks,
                "block_size": c.engine.block_size,
                "ttft_slo_s": c.slo.ttft_s,
                "itl_slo_s": c.slo.itl_s,
                "prefix_share": c.workload.prefix_share,
                "prefix_reuse": c.workload.prefix_reuse,
                "num_speculative_tokens": c.speculative.num_speculative_tokens,
                "spec_accept_prob": c.speculative.accept_prob,
                "hang": c.faults.hang,
                "slowdown": c.faults.slowdown,
                "cause": None
                if ph.cause is None
                else {
                    "class": ph.cause.cls,
                    "sub_cause": ph.cause.sub_cause,
                    "headline_change": ph.cause.headline_change,
                },
            }
        )
    return {
        "scenario": sc.name,
        "description": sc.description,
        "seed": seed,
        "vllm_version": None if version == "sglang" else version,
        "engine": "sglang" if version == "sglang" else "vllm",
        "start_unix": start,
        "duration_s": duration,
        "interval_s": INTERVAL_S,
        "loop_s": sc.loop_s,
        "model_name": sc.base.served_model_name,
        "phases": phases,
    }
