"""The incident model (app.twin.incident): a growing queue told apart from a steady one,
and its answers judged against the simulator's replay of each (app.sim.scale_out)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from app.model import Derived, GaugeStats, Quantile, Window
from app.read.whatif import from_scrapes
from app.sim.scale_out import record_until, scale_out
from app.sim.scenario import from_tree, read_tree
from app.sources.recording import read_scrapes
from app.twin.headroom import growing_headroom
from app.twin.incident import incident_of

SLO = 2.0


def tile(
    k: int,
    *,
    arrivals: float,
    completions: float,
    waiting: tuple[float, float],
    running: float = 32.0,
    ttft_p99: float = 0.3,
) -> Window:
    """A 30-second tile ``k`` with its rates and its waiting gauge's first and last."""
    w0, w1 = waiting
    return Window(
        "t",
        "m",
        30.0 * k,
        30.0 * (k + 1),
        {"ttft": {"p99": Quantile(ttft_p99)}},
        {},
        {},
        {},
        {},
        {
            "waiting": GaugeStats((w0 + w1) / 2, max(w0, w1), w1, w0),
            "running": GaugeStats(running, running, running, running),
        },
        {},
        30.0,
        6,
        derived=Derived(
            completion_rate=completions, arrival_rate=arrivals, waiting_avg=(w0 + w1) / 2
        ),
    )


def surge(before: int = 4, during: int = 6, lam: float = 16.0, mu: float = 11.0) -> list[Window]:
    tiles = [tile(k, arrivals=5.0, completions=5.0, waiting=(0, 0)) for k in range(before)]
    q = 0.0
    for k in range(before, before + during):
        nq = q + (lam - mu) * 30
        tiles.append(tile(k, arrivals=lam, completions=mu, waiting=(q, nq), running=32.0))
        q = nq
    return tiles


def test_a_queue_that_grows_is_told_with_its_rates_backlog_and_replicas_needed() -> None:
    inc = incident_of(surge(), SLO)
    assert inc.growing
    assert inc.arrival_rate is not None and inc.completion_rate is not None
    assert inc.arrival_rate.mid == pytest.approx(16.0)
    assert inc.completion_rate.low < 11.0 < inc.completion_rate.high
    assert inc.backlog == pytest.approx(5 * 30 * 6)
    assert inc.replicas_needed == 2  # 2 × 11 > 16
    assert inc.floor_ttft == pytest.approx(0.3)  # the quiet tiles' TTFT p99
    d = inc.to_dict()
    assert d["regime"] == "growing" and d["replicas_needed"] == 2
    assert d["arrival_rate"][0] <= d["arrival_rate"][1] <= d["arrival_rate"][2]


def test_a_steady_queue_or_none_is_steady() -> None:
    flat = [tile(k, arrivals=10.0, completions=10.0, waiting=(50, 50)) for k in range(8)]
    assert incident_of(flat, SLO).regime == "steady"
    idle = [tile(k, arrivals=3.0, completions=3.0, waiting=(0, 0)) for k in range(8)]
    assert incident_of(idle, SLO).regime == "steady"
    draining = [
        tile(k, arrivals=8.0, completions=11.0, waiting=(900 - 90 * k, 810 - 90 * k))
        for k in range(8)
    ]
    assert incident_of(draining, SLO).regime == "steady"


def test_the_fluid_answer_drains_at_mu_minus_lambda_over_n() -> None:
    inc = incident_of(surge(), SLO)
    one = inc.drain(1)
    assert one.drain_s is None and one.under_slo_after_s is None
    assert one.still_grows_by == pytest.approx(5.0, rel=0.05)
    assert "never drains" in one.text(inc.backlog, SLO)
    two = inc.drain(2)
    mu = inc.completion_rate.mid if inc.completion_rate else 0.0
    assert two.drain_s == pytest.approx(inc.backlog / (mu - 8.0))
    # TTFT under the SLO once the backlog ahead, admitted at μ, waits less than SLO − floor.
    assert two.under_slo_after_s == pytest.approx((inc.backlog - (SLO - 0.3) * mu) / (mu - 8.0))
    assert two.still_grows_by == 0
    lo, hi = two.drain_range
    assert lo is not None and hi is not None and lo < two.drain_s < hi
    three = inc.drain(3)
    assert three.drain_s is not None and three.drain_s < two.drain_s


def test_a_growing_queue_headroom_is_the_capacity_it_needs_now() -> None:
    inc = incident_of(surge(), SLO)
    room = growing_headroom(inc, SLO, 0.1)
    assert room is not None
    assert room.capacity_now() == pytest.approx(16.0 / 11.0, rel=0.05)
    text = room.text()
    assert text.startswith("needs ×1.5 capacity now") and "2 replicas end the growth" in text
    assert "the queue breaks first" in text  # the phase agrees with a queue-bound class


def _surge_tree(mult: float, load: float) -> dict[str, Any]:
    t = copy.deepcopy(read_tree("incident"))
    t["workload"]["load"] = load
    t["phases"] = [
        {"at_s": 60.0, "name": "spike", "expect": "queue_bound",
         "set": {"workload.rate_multiplier": mult}},
    ]  # fmt: skip
    t["duration_s"] = 900.0
    t.pop("loop_s", None)
    return t


def test_on_the_simulator_the_answer_matches_its_replay_of_the_change(tmp_path: Path) -> None:
    """A ×4 surge recorded 2 minutes into it: the model's replicas needed is the smallest
    count whose replay ends the growth, and its time back under the SLO with two replicas
    is within 30 % of the replay's (the full table: bench/incident.py)."""
    sc = from_tree(_surge_tree(4.0, 0.4))
    at = 180.0
    record_until(sc, 3, at, tmp_path / "rec")
    inc = incident_of(from_scrapes(read_scrapes(tmp_path / "rec")).tiles, SLO)
    assert inc.growing and inc.replicas_needed == 2
    one = scale_out(sc, 3, at, 1, horizon=240.0, slo_ttft=SLO)
    two = scale_out(sc, 3, at, 2, horizon=360.0, slo_ttft=SLO)
    assert not one.ended and two.ended
    predicted = inc.drain(2).under_slo_after_s
    assert predicted is not None and two.under_slo_s is not None
    assert abs(predicted - two.under_slo_s) <= 0.3 * max(two.under_slo_s, 30.0)


def test_the_backlog_is_the_latest_page_s_even_past_the_last_tile() -> None:
    """A whatif span's tiles start at its first page; when the span is not a whole number
    of tiles the latest page can fall past the last tile (on a real vLLM, by 0.002 s).
    The backlog — the state the answer starts from — is that page's, not the tile's."""
    tiles = surge()
    end = tiles[-1].end
    latest = tile(0, arrivals=16.0, completions=11.0, waiting=(0, 930.0), running=31.0)
    latest = Window(
        "t", "m", 0.0, end + 0.002, latest.quantiles, {}, {}, {}, {}, latest.gauges, {},
        end + 0.002, 10, derived=latest.derived,
    )  # fmt: skip
    inc = incident_of(tiles, SLO, latest)
    assert inc.backlog == 930.0 and inc.running == 31.0
    assert incident_of(tiles, SLO).backlog == pytest.approx(5 * 30 * 6)
    same_end = Window(
        "t", "m", 0.0, end, latest.quantiles, {}, {}, {}, {}, latest.gauges, {}, end, 10,
        derived=latest.derived,
    )  # fmt: skip
    assert incident_of(tiles, SLO, same_end).backlog == pytest.approx(5 * 30 * 6)
