"""Fleet windows: summed buckets give the fleet's percentiles (``histogram_quantile(q,
sum by (le) (...))``), gauges add up or take the max, and the outlier replica is named."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from app.fleet.aggregate import FleetKey, fleet_key, fleet_window, group_streams
from app.fleet.imbalance import ImbalanceThresholds, find_imbalance
from app.model import GaugeStats, HistogramDelta, IntervalDelta, Window
from app.windows.aggregate import window
from app.windows.quantile import histogram_quantile

BOUNDS = (0.1, 0.25, 0.5, 1.0, 2.5)
MODEL = "llama"


def delta(
    target: str,
    end: float,
    ttft: dict[int, float],
    *,
    running: float = 4.0,
    waiting: float = 0.0,
    kv: float = 0.3,
    bounds: tuple[float, ...] = BOUNDS,
    itl: dict[int, float] | None = None,
) -> IntervalDelta:
    hists = {"ttft": HistogramDelta(bounds, ttft, 0.0, sum(ttft.values()))}
    if itl is not None:
        hists["itl"] = HistogramDelta(BOUNDS, itl, 0.0, sum(itl.values()))
    return IntervalDelta(
        target=target,
        model_name=MODEL,
        start=end - 5.0,
        end=end,
        histograms=hists,
        counters={"finished:stop": sum(ttft.values())},
        gauges={"running": running, "waiting": waiting, "kv_usage": kv},
    )


def member(
    target: str, deltas: list[IntervalDelta], start: float = 0.0, end: float = 60.0
) -> Window:
    return window(deltas, start=start, end=end, target=target, model_name=MODEL)


def test_fleet_percentiles_come_from_summed_buckets_not_averaged_percentiles() -> None:
    # a: 90 fast requests; b: 10 slow ones. Across the fleet the p99 is slow, p50 fast.
    a = member("a", [delta("a", 5.0 * k, {0: 9.0}) for k in range(1, 11)])
    b = member("b", [delta("b", 5.0 * k + 2.5, {4: 1.0}) for k in range(1, 11)])
    fw = fleet_window(FleetKey(MODEL), [a, b], start=0.0, end=60.0)
    # PromQL: histogram_quantile(q, sum by (le) (increase(ttft_bucket[60s]))) by hand.
    cumulative = [90.0, 90.0, 90.0, 90.0, 100.0, 100.0]
    for label, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        expected = histogram_quantile(q, BOUNDS, cumulative)
        assert fw.window.quantiles["ttft"][label] == expected
    assert fw.window.quantiles["ttft"]["p99"].value == pytest.approx(1.0 + 1.5 * 9 / 10)
    mean_of_p99s = (a.quantiles["ttft"]["p99"].value + b.quantiles["ttft"]["p99"].value) / 2  # type: ignore[operator]
    assert mean_of_p99s != pytest.approx(fw.window.quantiles["ttft"]["p99"].value)
    assert fw.window.observations["ttft"] == 100.0
    assert fw.window.increases["finished:stop"] == 100.0


def test_gauges_add_up_kv_takes_the_mean_and_the_max() -> None:
    a = member(
        "a", [delta("a", 5.0 * k, {0: 1.0}, running=10, waiting=2, kv=0.9) for k in range(1, 5)]
    )
    b = member(
        "b", [delta("b", 5.0 * k, {0: 1.0}, running=4, waiting=0, kv=0.3) for k in range(1, 5)]
    )
    fw = fleet_window(FleetKey(MODEL), [a, b], start=0.0, end=60.0)
    assert fw.window.gauges["running"] == GaugeStats(14.0, 14.0, 14.0, 14.0)
    assert fw.window.gauges["waiting"].avg == 2.0
    # derived from the fleet's own sums: 8 requests over 20 s covered, queue unchanged
    assert fw.window.derived.completion_rate == pytest.approx(8 / 20)
    assert fw.window.derived.arrival_rate == pytest.approx(8 / 20)
    assert fw.window.derived.running_avg == 14.0
    assert fw.kv_mean == pytest.approx(0.6) and fw.kv_max == 0.9
    assert fw.window.covered == 20.0 and fw.window.intervals == 8


def test_a_replica_with_other_buckets_is_left_out_and_named() -> None:
    a = member("a", [delta("a", 5.0 * k, {0: 5.0}) for k in range(1, 5)])
    b = member("b", [delta("b", 5.0 * k, {0: 5.0}) for k in range(1, 5)])
    odd = member("odd", [delta("odd", 5.0, {0: 1.0}, bounds=(0.2, 2.0))])
    fw = fleet_window(FleetKey(MODEL), [a, b, odd], start=0.0, end=60.0)
    assert fw.window.observations["ttft"] == 40.0
    assert any("odd" in n and "ttft" in n for n in fw.notes)


def test_a_replica_without_data_is_absent_not_zero() -> None:
    a = member("a", [delta("a", 5.0 * k, {0: 5.0}, running=6) for k in range(1, 5)])
    down = member("down", [])
    fw = fleet_window(FleetKey(MODEL), [a, down], start=0.0, end=60.0)
    assert fw.absent == ("down",)
    assert [w.target for w in fw.replicas] == ["a"]
    assert fw.window.gauges["running"].avg == 6.0
    assert "ttft" not in fw.window.missing


def test_streams_group_by_model_and_labels() -> None:
    labels = {"a": {"cluster": "eu"}, "b": {"cluster": "us"}, "c": {"cluster": "eu"}}
    streams = [("a", "m"), ("b", "m"), ("c", "m"), ("a", "n")]
    assert group_streams(streams, labels) == {FleetKey("m"): ["a", "b", "c"], FleetKey("n"): ["a"]}
    grouped = group_streams(streams, labels, ["cluster"])
    assert grouped[fleet_key("m", {"cluster": "eu"}, ["cluster"])] == ["a", "c"]
    assert fleet_key("m", {"cluster": "eu"}, ["cluster"]).name == "m{cluster=eu}"


# -- imbalance ---------------------------------------------------------------------------


def replica(
    target: str,
    *,
    running: float = 10.0,
    waiting: float = 0.0,
    kv: float = 0.3,
    ttft_bucket: int = 0,
    itl_bucket: int = 0,
    n: float = 20.0,
) -> Window:
    deltas = [
        delta(
            target,
            5.0 * k,
            {ttft_bucket: n},
            running=running,
            waiting=waiting,
            kv=kv,
            itl={itl_bucket: n},
        )
        for k in range(1, 13)
    ]
    return member(target, deltas)


def kinds(found: object) -> set[tuple[str, str]]:
    return {(o.replica, o.kind) for o in found.outliers}  # type: ignore[attr-defined]


def test_a_balanced_fleet_has_no_outlier() -> None:
    fleet = [replica("a", running=10), replica("b", running=12), replica("c", running=9)]
    found = find_imbalance(fleet)
    assert found.outliers == () and found.summary is None
    assert found.fair_share == pytest.approx(1 / 3)


def test_the_overloaded_replica_and_its_queue_while_peers_idle() -> None:
    fleet = [
        replica("a", running=8),
        replica("b", running=9),
        replica("hot", running=30, waiting=12, kv=0.95),
    ]
    found = find_imbalance(fleet)
    assert kinds(found) == {("hot", "load"), ("hot", "queue"), ("hot", "kv_spread")}
    queue = next(o for o in found.outliers if o.kind == "queue")
    assert "a, b have none" in queue.summary
    assert found.hints[0].id == "lb_least_request"
    assert {h.id for h in found.hints} >= {"sticky_sessions", "prefix_routing"}
    load = next(o for o in found.outliers if o.kind == "load")
    share = next(e for e in load.evidence if e.signal == "running_share")
    assert share.value == pytest.approx(30 / 47) and share.threshold == pytest.approx(1 / 3)


def test_a_slow_replica_at_equal_load_points_at_itself() -> None:
    # ttft bucket 3 is (0.5, 1]: p99 ≈ 1.0 against peers' ≈ 0.1
    fleet = [replica("a"), replica("b"), replica("slow", ttft_bucket=3, itl_bucket=2)]
    found = find_imbalance(fleet)
    assert kinds(found) == {("slow", "ttft"), ("slow", "itl")}
    assert found.outliers[0].hints[0].id == "slow_replica"


def test_few_observations_or_a_lone_replica_flag_nothing() -> None:
    few = [replica("a"), replica("slow", ttft_bucket=3, n=2.0)]
    assert find_imbalance(few).outliers == ()
    assert find_imbalance([replica("only", running=50, waiting=9)]).outliers == ()


def test_thresholds_are_configurable() -> None:
    fleet = [replica("a", running=10), replica("b", running=14)]
    assert find_imbalance(fleet).outliers == ()
    loose = ImbalanceThresholds(load_ratio=1.3, load_min_delta=1.0)
    assert kinds(find_imbalance(fleet, loose)) == {("b", "load")}


def test_fleet_code_shares_nothing_with_the_simulator() -> None:
    root = Path(__file__).resolve().parents[1] / "app"
    for folder, forbidden in (("fleet", "app.sim"), ("sim", "app.fleet")):
        for path in (root / folder).glob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module:
                    assert not node.module.startswith(forbidden), (path.name, node.module)
                if isinstance(node, ast.Import):
                    for alias in node.names:
                        assert not alias.name.startswith(forbidden), (path.name, alias.name)
