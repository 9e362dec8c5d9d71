"""Headroom: the twin's breaking traffic against the simulator's own, found by sweeping."""

from __future__ import annotations

import copy
import json
import math
import statistics
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.model import Quantile
from app.read.whatif import from_scrapes
from app.sim.record import record
from app.sim.scenario import from_tree, read_tree
from app.sources.recording import read_scrapes
from app.twin.fit import fit
from app.twin.headroom import Limit, headroom, limit_of
from app.twin.whatif import Figures, calibrate, measured

SLO_TTFT, SLO_ITL = 2.0, 0.1


def _tree(name: str) -> dict[str, Any]:
    """A scenario's base phase at the absolute rate its load stands for."""
    tree = read_tree(name)
    tree.pop("phases", None)
    tree["name"] = name
    rate = from_tree(tree).base.workload.rate
    tree["workload"].pop("load", None)
    tree["workload"]["rate"] = rate
    return tree


def _sim_breaks(tree: dict[str, Any], k: float, root: Path) -> bool:
    """Whether the simulator itself, at traffic × k, has a p99 over its SLO (the median
    of three seeded runs of 300 s)."""
    scaled = copy.deepcopy(tree)
    scaled["workload"]["rate"] *= k
    ttft, itl = [], []
    for seed in (50, 51, 52):
        rec = record(from_tree(scaled), root / f"k{k:.4f}-{seed}", duration=300, seed=seed)
        f = measured(from_scrapes(read_scrapes(rec)).whole)
        ttft.append(f.value("ttft_p99") or 0.0)
        itl.append(f.value("itl_p99") or 0.0)
    return statistics.median(ttft) > SLO_TTFT or statistics.median(itl) > SLO_ITL


def _sim_breaking_point(tree: dict[str, Any], root: Path, start: float) -> float:
    """The sweep: from ``start`` halve or double until the SLO's side changes, then bisect
    to 5 %; the geometric middle of the last bracket."""
    good, bad = (None, start) if _sim_breaks(tree, start, root) else (start, None)
    while good is None or bad is None:
        k = (bad / 2) if good is None else (good * 2)  # type: ignore[operator]
        if _sim_breaks(tree, k, root):
            bad = k
        else:
            good = k
    while bad / good > 1.05:
        mid = math.sqrt(good * bad)
        if _sim_breaks(tree, mid, root):
            bad = mid
        else:
            good = mid
    return math.sqrt(good * bad)


def test_headroom_is_within_20_percent_of_the_simulators_breaking_point(tmp_path: Path) -> None:
    """Long answers over long contexts: ITL p99 is over its SLO today (decode-bound);
    the twin says how far the traffic must fall (within 20 % of where the simulator
    itself breaks), and that decode breaks first (bench/headroom.py: other scenarios)."""
    tree = _tree("decode_heavy")
    rec = record(from_tree(tree), tmp_path / "a", duration=300, seed=7)
    span = from_scrapes(read_scrapes(rec))
    room = headroom(calibrate(fit(span), span.whole), SLO_TTFT, SLO_ITL)
    truth = _sim_breaking_point(tree, tmp_path, 1.0)
    assert room.breaks_at is not None
    twin_point = math.sqrt(room.rate_scale * room.breaks_at)
    assert abs(twin_point / truth - 1) <= 0.20, (twin_point, truth)
    assert room.breaks == ("itl_p99",) and room.limit is Limit.DECODE
    assert room.text().startswith("over its SLO at today's traffic: ITL p99 breaks 100 ms")


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
    assert main([*args, "--quiet"]) == 0
    assert "headroom: over its SLO at today's traffic: TTFT p99 breaks 2 s" in (
        capsys.readouterr().out
    )
