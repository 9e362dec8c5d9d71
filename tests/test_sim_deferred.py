"""A KV transfer's wait (``engine.kv_transfer_s``): requests wait deferred, the ready ones
behind them go first, and the diagnosis names the queue ``deferred``."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from app.evaluate.replay import diagnose_recording
from app.sim.errors import SimConfigError
from app.sim.record import record
from app.sim.scenario import from_tree, read_tree
from app.sources.recording import read_scrapes

SCENARIO = Path(__file__).resolve().parents[1] / "docs" / "scenarios" / "kv_transfer_wait.yaml"


def _shortened(change_at: float = 120.0, end: float = 360.0):
    tree = copy.deepcopy(read_tree(str(SCENARIO)))
    tree["phases"][0]["at_s"] = change_at
    tree["duration_s"] = end
    return from_tree(tree)


def test_a_kv_transfer_wait_is_deferred_waiting_and_a_deferred_queue(tmp_path: Path) -> None:
    folder = record(_shortened(), tmp_path / "rec", seed=3)
    pages = sorted(folder.glob("*.prom"))
    last = pages[-1].read_text()
    deferred = next(
        float(line.split()[-1])
        for line in last.splitlines()
        if line.startswith("vllm:num_requests_waiting_by_reason") and 'reason="deferred"' in line
    )
    assert deferred > 5  # ~4 req/s × 6 s in transfer
    scrapes = read_scrapes(folder)
    timeline = diagnose_recording(folder)
    early = [d for d in timeline if d.end <= scrapes.start + 120]
    late = [d for d in timeline if d.end >= scrapes.start + 240]
    assert early and all(d.label == "healthy" for d in early)
    assert late and all(d.label == "queue_bound/deferred" for d in late)
    assert late[-1].hints[0].id == "deferred-admission"
    # No capacity advice: the engine has room, the requests wait for their KV.
    assert not {"more-replicas", "max-num-seqs-up", "rate-limit"} & {h.id for h in late[-1].hints}


def test_a_negative_transfer_time_is_refused() -> None:
    tree = copy.deepcopy(read_tree(str(SCENARIO)))
    tree["engine"]["kv_transfer_s"] = -1
    with pytest.raises(SimConfigError, match="kv_transfer_s"):
        from_tree(tree)
