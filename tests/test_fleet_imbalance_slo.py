"""A latency outlier is a finding only where the difference matters (issue #44 item 4):
the replica's p99 a fair share of its SLO, or the replica near its limit — in a P/D pool
as in any fleet. Two healthy prefill replicas whose TTFT p99s differ 2.4× far inside a
2 s SLO are not imbalanced, and no one is told to drain one."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.diagnose import DiagnosisConfig
from app.evaluate.fleet_replay import replay_fleet_recording
from app.fleet.imbalance import find_imbalance
from app.model import HistogramDelta, IntervalDelta, Window
from app.sim.pd_record import record_pd
from app.windows.aggregate import window

BOUNDS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
SLO = DiagnosisConfig(slo_ttft_p99=2.0)


def replica(target: str, ttft_bucket: int, *, waiting: float = 0.0, kv: float = 0.3) -> Window:
    deltas = [
        IntervalDelta(
            target=target,
            model_name="m",
            start=5.0 * k - 5.0,
            end=5.0 * k,
            histograms={"ttft": HistogramDelta(BOUNDS, {ttft_bucket: 20.0}, 0.0, 20.0)},
            counters={"finished:stop": 20.0},
            gauges={"running": 4.0, "waiting": waiting, "kv_usage": kv},
        )
        for k in range(1, 13)
    ]
    return window(deltas, start=0.0, end=60.0, target=target, model_name="m")


def kinds(found: object) -> set[tuple[str, str]]:
    return {(o.replica, o.kind) for o in found.outliers}  # type: ignore[attr-defined]


def test_a_difference_far_inside_the_slo_is_no_finding() -> None:
    # p99 ≈ 0.5 s against the peer's ≈ 0.1 s: 5× its peer, a quarter of the 2 s SLO.
    fleet = [replica("a", 0), replica("b", 2)]
    assert kinds(find_imbalance(fleet)) == {("b", "ttft")}  # no SLOs known: as before
    assert find_imbalance(fleet, config=SLO).outliers == ()


def test_a_difference_that_reaches_half_the_slo_is_a_finding() -> None:
    fleet = [replica("a", 0), replica("b", 4)]  # p99 ≈ 2.5 s: over the SLO
    found = find_imbalance(fleet, config=SLO)
    assert kinds(found) == {("b", "ttft")}
    share = next(e for e in found.outliers[0].evidence if e.signal == "ttft_slo_share")
    assert share.value >= 0.5 and share.holds


def test_a_replica_near_its_limit_is_a_finding_inside_its_slo() -> None:
    # Its KV pool 95 % full: near its limit, so its slower first tokens matter.
    found = find_imbalance([replica("a", 0), replica("b", 2, kv=0.95)], config=SLO)
    (latency,) = [o for o in found.outliers if o.kind == "ttft"]
    assert latency.replica == "b" and "kv_avg" in {e.signal for e in latency.evidence}
    # A queue: the queue finding says it is loaded, and the latency finding stands.
    found = find_imbalance([replica("a", 0), replica("b", 2, waiting=3.0)], config=SLO)
    assert kinds(found) >= {("b", "ttft"), ("b", "queue")}


@pytest.mark.parametrize("seed", [7, 3])
def test_a_healthy_simulated_pd_fleet_flags_no_replica(tmp_path: Path, seed: int) -> None:
    folder = record_pd("pd_healthy", tmp_path / "pd", duration=600, seed=seed)
    replay = replay_fleet_recording(folder, length=60.0, step=15.0)
    flagged = [
        (v.fleet.window.end, o.replica, o.summary)
        for v in replay.views
        for o in v.imbalance.outliers
    ]
    assert len(replay.views) > 30
    assert flagged == []
