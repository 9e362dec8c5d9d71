"""Multi-window burn-rate alerts on a fake clock, and the chunked counts behind them.

Two replicas serve 5 and 20 requests every 5 s; from t = 3600 s to 4500 s every request
of replica ``b`` misses the 2 s TTFT objective, so the fleet's bad share is 0.8 against
a 1 % budget (target 0.99). Evaluations every 15 s at t ≡ 10 (mod 15), so that no
evaluation lands exactly on a threshold. With x = t − 3600 (hand-derived, docs/fleets.md):

* fast (1 h & 5 m > 14.4, for 2 m): 1 h burn = 0.8·x/3600 > 0.144 ⇔ x > 648 → pending
  at x = 655, firing two minutes later; resolved once the last five minutes hold under
  14.4 % bad: 0.8·(4800 − t)/300 < 0.144 ⇔ t > 4746 → 4750;
* medium (6 h & 30 m > 6, for 15 m): the 6 h window holds all data since 0:
  0.8·x/(3600 + x) > 0.06 ⇔ x > 291.9 → pending at x = 295; resolved when the 30 m
  window holds under 6 %: 0.8·(6300 − t)/1800 < 0.06 ⇔ t > 6165 → 6175;
* slow (1 d & 2 h > 3, for 1 h): 0.8·x/(3600 + x) > 0.03 ⇔ x > 140.3 → pending at 3745.
"""

from __future__ import annotations

import math
import random

import pytest

from app.alerts.fields import Instance
from app.alerts.rules import default_rules
from app.alerts.state import Alert, evaluate
from app.diagnose import DEFAULT_CONFIG
from app.evaluate.instances import SloInputs
from app.fleet.count_cache import CountCache
from app.fleet.deltas import MemorySource
from app.fleet.slo import SloCounts, SloSpec, delta_counts
from app.fleet.tracker import SloTracker
from app.model import HistogramDelta, IntervalDelta

BOUNDS = (0.5, 1.0, 2.0, 5.0)
ITL_BOUNDS = (0.05, 0.1, 0.2)
MODEL = "llama"
SPEC = SloSpec("chat", target=0.99, ttft=2.0, itl=0.1)


def _deltas(
    target: str, per_interval: int, bad: bool, until: float = 7500.0
) -> list[IntervalDelta]:
    out = []
    for k in range(1, int(until / 5) + 1):
        end = 5.0 * k
        slow = bad and 3600.0 < end <= 4500.0
        n = float(per_interval)
        out.append(
            IntervalDelta(
                target=target,
                model_name=MODEL,
                start=end - 5.0,
                end=end,
                histograms={
                    "ttft": HistogramDelta(BOUNDS, {4 if slow else 0: n}, n * 0.2, n),
                    "itl": HistogramDelta(ITL_BOUNDS, {0: 10 * n}, 0.3 * n, 10 * n),
                },
                counters={"finished:stop": n},
                gauges={"running": n, "waiting": 0.0, "kv_usage": 0.2},
            )
        )
    return out


@pytest.fixture(scope="module")
def source() -> MemorySource:
    return MemorySource(
        {("a", MODEL): _deltas("a", 5, False), ("b", MODEL): _deltas("b", 20, True)}
    )


def _instances(inputs: SloInputs, source: MemorySource, t: float) -> list[Instance]:
    return inputs.instances(t, source.streams(), {})


def test_burn_rate_alerts_fire_and_resolve_on_a_fake_clock(source: MemorySource) -> None:
    rules = [r for r in default_rules() if r.scope == "slo"]
    inputs = SloInputs(source, [SPEC], DEFAULT_CONFIG, ui_base_url="http://ui")
    prev: dict[str, Alert] = {}
    seen: list[tuple[str, str, float]] = []
    firing_fast = None
    t = 3610.0
    while t <= 7400.0:
        result = evaluate(rules, _instances(inputs, source, t), t, prev)
        prev = result.alerts
        for tr in result.transitions:
            seen.append((tr.alertname, tr.state, tr.at))
            if tr.alertname == "PhasewatchSLOBurnFast" and tr.state == "firing":
                firing_fast = tr
        t += 15.0
    assert seen == [
        ("PhasewatchSLOBurnSlow", "pending", 3745.0),
        ("PhasewatchSLOBurnMedium", "pending", 3895.0),
        ("PhasewatchSLOBurnFast", "pending", 4255.0),
        ("PhasewatchSLOBurnFast", "firing", 4375.0),
        ("PhasewatchSLOBurnFast", "resolved", 4750.0),
        ("PhasewatchSLOBurnMedium", "firing", 4795.0),
        ("PhasewatchSLOBurnMedium", "resolved", 6175.0),
        ("PhasewatchSLOBurnSlow", "firing", 7345.0),
    ]
    # The page carries the SLO, the fleet, the burn and what the last five minutes show.
    assert firing_fast is not None
    labels = firing_fast.labels
    assert labels["slo"] == "chat" and labels["model_name"] == MODEL and "target" not in labels
    assert labels["severity"] == "critical"
    assert firing_fast.value == pytest.approx(100 * 0.8 * 775 / 3600)
    notes = firing_fast.annotations
    assert "worst objective ttft" in notes["summary"]
    assert "Worst replica: b" in notes["description"]
    assert "b TTFT p99" in notes["imbalance"]
    assert notes["diagnosis"] and notes["hints"].startswith("- ")
    assert notes["ui_url"].startswith("http://ui/fleets/llama?at=")


def test_burn_rates_and_budget_by_hand(source: MemorySource) -> None:
    tracker = SloTracker(source, [SPEC])
    (status,) = tracker.evaluate(4380.0, source.streams(), {})
    # x = 780 s of 80 % bad traffic: 1 h → 0.8·780/3600 bad, 5 m → all 80 % bad.
    assert status.burn["1h"] == pytest.approx(100 * 0.8 * 780 / 3600)
    assert status.burn["5m"] == pytest.approx(80.0)
    assert status.burn_objective["5m"] == "ttft"
    # The period (30 d) starts at the first whole hour: here all data, from 0.
    assert status.budget_from == 0.0
    # 73 minutes of a 30-day period: nothing is "left" yet, the burn so far is told
    # (tests/test_budget_early.py).
    assert status.budget.remaining is None and status.budget.early
    assert status.budget.burn == pytest.approx((0.8 * 780 / 4380) / 0.01)
    assert status.budget.objective == "ttft"
    assert status.members == ("a", "b") and status.key.model_name == MODEL


def test_chunked_counts_equal_direct_counts(source: MemorySource) -> None:
    cache = CountCache(source, SPEC)
    stream = ("b", MODEL)
    rng = random.Random(7)
    for _ in range(60):
        a = rng.uniform(0.0, 7400.0)
        b = rng.uniform(a, 7500.0)
        closed = rng.uniform(a, 7500.0)
        got, since = cache.range(stream, a, b, closed_until=closed)
        want = delta_counts(source.intervals("b", MODEL, a, b), SPEC)
        assert since == a
        for name, t in want.tallies.items():
            assert got.tallies[name].good == pytest.approx(t.good, abs=1e-6)
            assert got.tallies[name].total == pytest.approx(t.total, abs=1e-6)
        assert got.finished == want.finished
    got, _ = cache.range(stream, 10.0, 7450.0, closed_until=7500.0)
    want = delta_counts(source.intervals("b", MODEL, 10.0, 7450.0), SPEC)
    assert got.tallies["ttft"].good == want.tallies["ttft"].good
    assert set(cache.hours[stream]) == {1}, "a whole hour is summed once and reused"


def test_a_fill_limit_loads_the_newest_chunks_first(source: MemorySource) -> None:
    cache = CountCache(source, SPEC)
    fill = [10]
    got, since = cache.range(("a", MODEL), 0.0, 7200.0, closed_until=7500.0, fill=fill)
    assert since == 7200.0 - 10 * 300.0
    want = delta_counts(source.intervals("a", MODEL, since, 7200.0), SPEC)
    assert got.tallies["ttft"].total == want.tallies["ttft"].total
    # the next call goes on where this one stopped
    got2, since2 = cache.range(("a", MODEL), 0.0, 7200.0, closed_until=7500.0, fill=[100])
    assert since2 == 0.0 and got2.tallies["ttft"].total == 5 * 7200 / 5
    assert isinstance(got2, SloCounts) and not math.isnan(got2.covered)


def test_the_first_count_in_the_background_holds_the_slo_alerts_as_they_are(
    source: MemorySource,
) -> None:
    """After a start, the first count runs beside the rounds (``background``): until it
    is done there is no SLO instance, and a firing burn alert is held, not resolved;
    without the hold, the absent instance would clear it."""
    import threading

    rules = [r for r in default_rules() if r.scope == "slo"]
    inputs = SloInputs(source, [SPEC], DEFAULT_CONFIG, ui_base_url="http://ui")
    prev: dict[str, Alert] = {}
    t = 3610.0
    while t <= 4400.0:  # the fast burn alert fires at 4375
        prev = evaluate(rules, _instances(inputs, source, t), t, prev).alerts
        t += 15.0
    firing = {a.rule for a in prev.values() if a.state == "firing"}
    assert firing == {"PhasewatchSLOBurnFast"}
    # A new process: its first count in the background, held at a gate by the test.
    gate = threading.Event()
    tracker = SloTracker(source, [SPEC])
    count = tracker.evaluate

    def slow(*args: object, **kwargs: object) -> object:
        assert gate.wait(30), "the test never opened the gate"
        return count(*args, **kwargs)  # type: ignore[arg-type]

    tracker.evaluate = slow  # type: ignore[method-assign, assignment]
    restarted = SloInputs(
        source, [SPEC], DEFAULT_CONFIG, ui_base_url="http://ui", tracker=tracker, background=True
    )
    try:
        assert restarted.instances(t, source.streams(), {}) is None  # the count under way
        held = evaluate(rules, [], t, prev, held_scopes=("slo",))
        assert held.transitions == [] and held.alerts == prev
        cleared = evaluate(rules, [], t, prev)
        assert ("PhasewatchSLOBurnFast", "resolved") in [
            (x.alertname, x.state) for x in cleared.transitions
        ]
    finally:
        gate.set()
    assert restarted.wait(30), "the first count never ended"
    done = restarted.instances(t, source.streams(), {})
    assert done is not None
    assert evaluate(rules, done, t, prev).alerts.keys() == prev.keys()  # the count, once done


def test_a_failed_first_count_is_logged_and_the_next_round_counts_again(
    source: MemorySource, caplog: pytest.LogCaptureFixture
) -> None:
    tracker = SloTracker(source, [SPEC])
    count = tracker.evaluate
    calls: list[int] = []

    def failing_once(*args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("store gone")
        return count(*args, **kwargs)  # type: ignore[arg-type]

    tracker.evaluate = failing_once  # type: ignore[method-assign, assignment]
    inputs = SloInputs(
        source, [SPEC], DEFAULT_CONFIG, ui_base_url="http://ui", tracker=tracker, background=True
    )
    assert inputs.instances(4400.0, source.streams(), {}) is None  # the first count
    assert inputs.wait(30)  # … failed
    assert inputs.instances(4400.0, source.streams(), {}) is None  # the next round's
    assert inputs.wait(30)
    done = inputs.instances(4400.0, source.streams(), {})
    assert done and len(calls) >= 2  # the failed one, then one that counted
    assert "counting the SLOs failed" in caplog.text
