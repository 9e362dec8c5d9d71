"""Headroom: the twin's breaking traffic against the simulator's own, found by sweeping."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.model import Quantile
from app.read.whatif import from_scrapes
from app.sim.record import record
from app.sim.scenario import from_tree
from app.sources.recording import read_scrapes
from app.twin.fit import fit
from app.twin.headroom import Limit, headroom, limit_of
from app.twin.whatif import Figures, calibrate
from bench.headroom import sim_point, tree_of

SLO_TTFT, SLO_ITL = 2.0, 0.1


def test_headroom_is_within_20_percent_of_the_simulators_breaking_point(tmp_path: Path) -> None:
    """Long answers over long contexts: ITL p99 is over its SLO today (decode-bound);
    the twin says how far the traffic must fall (within 20 % of where the simulator
    itself breaks), and that decode breaks first (bench/headroom.py: other scenarios)."""
    tree = tree_of("decode_heavy")
    rec = record(from_tree(tree), tmp_path / "a", duration=300, seed=7)
    span = from_scrapes(read_scrapes(rec))
    room = headroom(calibrate(fit(span), span.whole), SLO_TTFT, SLO_ITL)
    truth = sim_point(tree, tmp_path)  # the sweep bench/headroom.py runs
    assert room.breaks_at is not None
    twin_point = math.sqrt(room.rate_scale * room.breaks_at)
    assert abs(twin_point / truth - 1) <= 0.20, (twin_point, truth)
    assert room.breaks == ("itl_p99",) and room.limit is Limit.DECODE
    assert room.text().startswith("over its SLO now: needs ×")
    assert "(ITL p99 breaks 100 ms above" in room.text()


def _figures(**kw: Any) -> Figures:
    base = {"waiting_avg": 0.0, "kv_usage_max": 0.3, "preemptions_per_s": 0.0}
    q = Quantile(1.0)
    return Figures(q, q, q, q, **{**base, **kw})


def test_what_breaks_first() -> None:
    assert limit_of(_figures(kv_usage_max=0.95), ("ttft_p99",)) is Limit.KV
    assert limit_of(_figures(preemptions_per_s=0.2), ("itl_p99",)) is Limit.KV
    assert limit_of(_figures(waiting_avg=4.0), ("ttft_p99",)) is Limit.QUEUE
    queued = _figures(queue_time_mean=3.0, prefill_time_mean=0.5)
    assert limit_of(queued, ("ttft_p99",)) is Limit.QUEUE
    assert limit_of(_figures(queue_time_mean=0.1, prefill_time_mean=2.5), ("ttft_p99",)) is (
        Limit.PREFILL
    )
    assert limit_of(_figures(), ("itl_p99",)) is Limit.DECODE


def test_cli_headroom(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rec = record("queue_overload", tmp_path / "q", duration=180, seed=3)
    args = ["whatif", str(rec), "--server", "max_num_seqs=32", "--headroom", "--seeds", "2"]
    assert main([*args, "--json", "--quiet"]) == 0
    room = json.loads(capsys.readouterr().out)["headroom"]
    assert room["rate_scale"] < 1 and room["limit"] == "queue" and room["breaks"] == ["ttft_p99"]
    assert room["slo"] == {"ttft_p99": 2.0, "itl_p99": 0.1}
    # The queue grows through the recording: the capacity it needs now, by the fluid
    # model (arrivals over one replica's completions), not a traffic multiple searched.
    assert room["needs_now"] > 1 and room["replicas_needed"] >= 2
    assert room["incident"]["regime"] == "growing" and room["evaluations"] == 0
    assert main([*args, "--quiet"]) == 0
    assert "headroom: needs ×" in capsys.readouterr().out
