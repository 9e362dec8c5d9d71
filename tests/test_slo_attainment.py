"""SLO attainment from bucket counts (exact on a bucket edge, interpolated and flagged
inside a bucket), burn rates, budgets, goodput ranges and error/abort shares."""

from __future__ import annotations

import random

import pytest

from app.fleet.slo import (
    SloCounts,
    SloSpec,
    Tally,
    attainment,
    budget,
    burn_rate,
    delta_counts,
    good_below,
    goodput,
    window_counts,
)
from app.model import HistogramDelta, IntervalDelta
from app.windows.aggregate import window

BOUNDS = (0.5, 1.0, 2.5, 5.0)
# non-cumulative: 10 in (0, .5], 20 in (.5, 1], 30 in (1, 2.5], 5 in (2.5, 5], 5 in +Inf
HIST = HistogramDelta(BOUNDS, {0: 10.0, 1: 20.0, 2: 30.0, 3: 5.0, 4: 5.0}, 0.0, 70.0)


def test_a_bound_on_a_bucket_edge_is_exact() -> None:
    assert good_below(HIST, 1.0) == Tally(30.0, 70.0, 30.0, 30.0, False, False)
    # le="1.0" vs an objective of 1 (float formatting of the bound does not matter)
    assert good_below(HIST, 1.0000000000001).interpolated is False


def test_a_bound_inside_a_bucket_is_interpolated_and_bracketed() -> None:
    t = good_below(HIST, 2.0)  # (1, 2.5] holds 30: 2/3 of its width below 2 s
    assert t.good == pytest.approx(30.0 + 30.0 * (1.0 / 1.5))
    assert (t.good_min, t.good_max, t.interpolated) == (30.0, 60.0, True)
    first = good_below(HIST, 0.25)  # the first bucket starts at 0
    assert first.good == pytest.approx(5.0) and (first.good_min, first.good_max) == (0.0, 10.0)


def test_a_bound_beyond_the_top_bucket_counts_inf_as_misses() -> None:
    t = good_below(HIST, 10.0)
    assert (t.good, t.good_max, t.beyond_top, t.interpolated) == (65.0, 70.0, True, False)


def test_no_observations_is_no_ratio_not_one() -> None:
    empty = good_below(HistogramDelta(BOUNDS, {}, 0.0, 0.0), 2.0)
    assert empty.total == 0 and empty.ratio is None
    assert burn_rate(SloCounts(), 0.99) == (None, None)
    assert budget(SloCounts(), 0.99).remaining is None


def _delta(
    ttft: dict[int, float], itl: dict[int, float], reasons: dict[str, float], end: float
) -> IntervalDelta:
    return IntervalDelta(
        target="t",
        model_name="m",
        start=end - 5.0,
        end=end,
        histograms={
            "ttft": HistogramDelta(BOUNDS, ttft, 0.0, sum(ttft.values())),
            "itl": HistogramDelta((0.05, 0.1, 0.2), itl, 0.0, sum(itl.values())),
            "tpot": HistogramDelta((0.05, 0.1, 0.2), itl, 0.0, sum(itl.values())),
        },
        counters={f"finished:{r}": v for r, v in reasons.items()},
        gauges={},
    )


def test_counts_add_up_across_intervals_and_replicas() -> None:
    rng = random.Random(3)
    spec = SloSpec("s", ttft=2.0, itl=0.1, tpot=0.1)
    deltas = [
        _delta(
            {i: float(rng.randint(0, 9)) for i in range(5)},
            {i: float(rng.randint(0, 50)) for i in range(4)},
            {"stop": 9.0, "error": float(rng.randint(0, 1)), "abort": 1.0},
            5.0 * (k + 1),
        )
        for k in range(40)
    ]
    whole = window_counts(window(deltas, start=0.0, end=200.0, target="t", model_name="m"), spec)
    parts = SloCounts()
    for k in range(0, 40, 7):
        parts = parts + delta_counts(deltas[k : k + 7], spec)
    for name, t in whole.tallies.items():
        assert parts.tallies[name].good == pytest.approx(t.good, rel=1e-12)
        assert parts.tallies[name].total == t.total
    assert parts.finished == whole.finished and parts.covered == whole.covered
    assert set(whole.tallies) == {"ttft", "itl", "tpot", "errors"}


def test_errors_and_aborts_from_finished_reason() -> None:
    spec = SloSpec("s", ttft=None, itl=None, bad_reasons=("error",))
    counts = delta_counts([_delta({}, {}, {"stop": 90.0, "error": 6.0, "abort": 4.0}, 5.0)], spec)
    assert counts.share("error") == pytest.approx(0.06)
    assert counts.share("abort") == pytest.approx(0.04)
    assert attainment(counts) == {"errors": pytest.approx(0.94)}
    strict = SloSpec("s", ttft=None, itl=None, bad_reasons=("error", "abort"))
    strict_counts = delta_counts(
        [_delta({}, {}, {"stop": 90.0, "error": 6.0, "abort": 4.0}, 5.0)], strict
    )
    assert attainment(strict_counts) == {"errors": pytest.approx(0.9)}


def test_burn_rate_is_the_fastest_objective_and_budget_the_smallest_left() -> None:
    counts = SloCounts(
        tallies={
            "ttft": Tally(950.0, 1000.0, 950.0, 950.0),  # 5 % bad: 5× a 1 % budget
            "itl": Tally(99_800.0, 100_000.0, 99_800.0, 99_800.0),  # 0.2 % bad
        }
    )
    rate, objective = burn_rate(counts, 0.99)
    assert rate == pytest.approx(5.0) and objective == "ttft"
    left = budget(counts, 0.99)
    assert left.remaining == pytest.approx(-4.0) and left.objective == "ttft"
    assert left.per_objective["itl"] == pytest.approx(0.8)


def test_the_budget_is_not_judged_below_its_minimum_of_events() -> None:
    # 85 s into a demo: 300 requests, 9 of them slow — "overspent (-200 %)" would say
    # nothing about a 30-day budget; it reads n/a with the events it has.
    few = SloCounts(
        tallies={
            "ttft": Tally(291.0, 300.0, 291.0, 291.0),
            "itl": Tally(40_000.0, 40_000.0, 40_000.0, 40_000.0),
        }
    )
    left = budget(few, 0.99, min_events=1000)
    assert left.remaining is None and left.objective is None and not left.judged
    assert left.events == 300.0 and left.min_events == 1000  # the fewest of any objective
    assert left.per_objective == {"itl": None, "ttft": None}
    assert left.to_dict()["events"] == 300.0
    assert budget(few, 0.99).remaining == pytest.approx(-2.0)  # no minimum: judged
    enough = SloCounts(tallies={"ttft": Tally(1190.0, 1200.0, 1190.0, 1190.0)})
    judged = budget(enough, 0.99, min_events=1000)
    assert judged.judged and judged.remaining == pytest.approx(1 - 10 / 12)
    # An objective without events does not hold the others back.
    idle_tpot = SloCounts(tallies={**enough.tallies, "tpot": Tally()})
    assert budget(idle_tpot, 0.99, min_events=1000).remaining == judged.remaining


def test_the_minimum_of_events_comes_from_the_slo_section() -> None:
    from app.config import Settings
    from app.fleet.specs import slo_specs

    assert {s.min_events for s in slo_specs(Settings())} == {1000.0}
    chat = {"name": "chat", "ttft": 2.0}
    custom = Settings(slo={"min_events_for_budget": 50}, slos=[chat])  # type: ignore[arg-type]
    assert [s.min_events for s in slo_specs(custom)] == [50.0]


def test_goodput_is_a_range_with_the_union_bound_as_estimate() -> None:
    spec = SloSpec("s", ttft=2.0, itl=0.1)
    counts = SloCounts(
        tallies={"ttft": Tally(90.0, 100.0, 80.0, 95.0, interpolated=True)},
        goodput_tpot=Tally(96.0, 100.0, 96.0, 96.0),
        finished=100.0,
        by_reason={"stop": 98.0, "error": 2.0},
    )
    g = goodput(counts, spec, 10.0)
    assert g.good == pytest.approx(100 - 10 - 4 - 2)
    assert g.good_min == pytest.approx(100 - 20 - 4 - 2)
    assert g.good_max == pytest.approx(100 - 5)
    assert g.per_s == pytest.approx(8.4)
    assert "TPOT judged against the ITL objective" in g.notes
    assert "a bound inside a bucket: interpolated" in g.notes
    assert goodput(SloCounts(), spec, 10.0).per_s is None
