"""Ground truth: the classification rule, its additivity, and the scenarios' classes."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

from app.sim.engine import Replica
from app.sim.scenario import Scenario, available, from_tree, load
from app.sim.scheduler import Request
from app.sim.truth import Account, classify, merge, window_truth


def _acct(**kw: float) -> Account:
    base: dict[str, float] = {"t0": 0.0, "t1": 5.0, "duration_s": 5.0, "steps": 100}
    base.update(kw)
    return Account(**base)  # type: ignore[arg-type]


def test_no_request_and_no_step_is_idle() -> None:
    assert classify(_acct(steps=0)).cls == "idle"


def test_within_both_slos_is_healthy_even_with_a_short_queue() -> None:
    a = _acct(ttft_ok=50, itl_n=5000, itl_over=10, rs_slot=4.0, rs_decode=100.0)
    assert classify(a).cls == "healthy"


def test_any_preemption_is_kv_pressure() -> None:
    a = _acct(ttft_ok=50, itl_n=5000, preemptions=2, rs_kv=1.0)
    assert classify(a).cls == "kv_pressure"


@pytest.mark.parametrize(
    ("slot", "kv", "prefill", "expected"),
    [
        (30.0, 1.0, 5.0, "queue_bound"),
        (1.0, 30.0, 5.0, "kv_pressure"),
        (1.0, 0.0, 9.0, "prefill_bound"),
    ],
)
def test_ttft_over_slo_is_named_by_where_the_time_before_first_token_went(
    slot: float, kv: float, prefill: float, expected: str
) -> None:
    a = _acct(ttft_ok=40, ttft_over=10, rs_slot=slot, rs_kv=kv, rs_prefill=prefill, itl_n=100)
    assert classify(a).cls == expected


def test_itl_over_slo_is_decode_bound_unless_the_slow_gaps_are_preemption_stalls() -> None:
    assert classify(_acct(ttft_ok=50, itl_n=1000, itl_over=30)).cls == "decode_bound"
    stalls = _acct(ttft_ok=50, itl_n=1000, itl_over=30, itl_stall_over=20)
    assert classify(stalls).cls == "kv_pressure"


def test_ttft_cause_wins_over_slow_streaming() -> None:
    a = _acct(ttft_over=5, ttft_ok=5, rs_prefill=9.0, itl_n=1000, itl_over=500)
    assert classify(a).cls == "prefill_bound"


def test_p99_over_slo_means_more_than_one_percent_over() -> None:
    assert classify(_acct(ttft_ok=99, ttft_over=1, itl_n=100)).cls == "healthy"
    assert classify(_acct(ttft_ok=98, ttft_over=2, rs_slot=1.0, itl_n=100)).cls == "queue_bound"


def _run(sc: Scenario, seconds: float, seed: int = 0) -> list[Account]:
    accounts: list[Account] = []
    rep = Replica(sc, seed=seed, on_interval=lambda a, v, p: accounts.append(a))
    rep.advance_to(seconds)
    return accounts


def test_merging_intervals_adds_them_up() -> None:
    accts = _run(load("incident"), 120.0)
    total = merge(accts)
    assert (total.t0, total.t1) == (0.0, 5.0 * len(accts))
    assert total.arrivals == sum(a.arrivals for a in accts)
    assert total.rs_decode == pytest.approx(sum(a.rs_decode for a in accts))
    assert total.kv_usage_max == max(a.kv_usage_max for a in accts)


def test_every_request_gets_exactly_one_ttft_verdict() -> None:
    rep = Replica(load("queue_overload"), seed=1)
    accts: list[Account] = []
    rep.on_interval = lambda a, v, p: accts.append(a)
    requests: list[Request] = []
    arrival = rep.truth.arrival

    def spy(r: Request) -> None:
        requests.append(r)
        arrival(r)

    rep.truth.arrival = spy  # type: ignore[method-assign]
    rep.advance_to(300.0)
    end = accts[-1].t1
    ok = [r for r in requests if 0 <= r.first_token - r.arrival <= 2.0 and r.first_token < end]
    over = [r for r in requests if r not in ok and r.arrival + 2.0 <= end]
    assert sum(a.ttft_ok for a in accts) == len(ok)
    assert sum(a.ttft_over for a in accts) == len(over) > 0


def test_window_truth_reads_truth_rows() -> None:
    rows = []
    for a in _run(load("healthy"), 60.0):
        rows.append(
            {
                "t0": 1000.0 + a.t0,
                "t1": 1000.0 + a.t1,
                **{k: v for k, v in vars(a).items() if k not in ("t0", "t1")},
            }
        )
    assert window_truth(rows, 1000.0, 1060.0).cls == "healthy"


EXPECTED = {
    "healthy": "healthy",
    "prefill_heavy": "prefill_bound",
    "decode_heavy": "decode_bound",
    "queue_overload": "queue_bound",
    "kv_pressure": "kv_pressure",
    "prefill_interference": "decode_bound",
}


def _windows(accts: list[Account], warmup: float = 60.0) -> Counter[str]:
    """60 s windows stepping 15 s, as the evaluation compares them."""
    out: Counter[str] = Counter()
    first = int(warmup // 5)
    for k in range(first, len(accts) - 11, 3):
        out[classify(merge(accts[k : k + 12])).cls] += 1
    return out


# Scenarios that start healthy and then change one thing (tests/test_sim_causes.py).
CHANGES = {
    "hang",
    "hang_admits",
    "hang_after_long_step",
    "prefix_cache_collapse",
    "prompt_length_shift",
    "traffic_surge",
    "capacity_loss",
    "spec_decode_drop",
    "bandwidth_bound",
}


def test_every_scenario_is_documented_with_its_class() -> None:
    assert set(available()) == {*EXPECTED, "incident", *CHANGES}
    for name in CHANGES:
        assert load(name).expect == "healthy"
        assert load(name).phases[-1].cause is not None
    for name, cls in EXPECTED.items():
        assert load(name).expect == cls


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_scenario_shows_its_class_in_most_windows(name: str) -> None:
    sc = load(name)
    windows = _windows(_run(sc, 420.0, seed=5))
    cls, count = windows.most_common(1)[0]
    assert cls == EXPECTED[name], windows
    assert count >= 0.8 * sum(windows.values()), windows


def test_incident_goes_healthy_then_queue_bound_then_recovers() -> None:
    accts = _run(load("incident"), 900.0, seed=5)

    def window(t: float) -> str:
        k = int(t // 5)
        return classify(merge(accts[k : k + 12])).cls

    assert window(120.0) == "healthy"
    assert window(480.0) == "queue_bound"
    assert window(840.0) == "healthy"


def test_truth_shares_no_code_with_the_diagnosis() -> None:
    forbidden = ("app.diagnose", "app.windows", "app.scrape")
    for path in (Path(__file__).resolve().parents[1] / "app" / "sim").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith(forbidden), (path.name, node.module)
            if isinstance(node, ast.Import):
                for alias in node.names:
                    assert not alias.name.startswith(forbidden), (path.name, alias.name)


def test_no_traffic_is_idle() -> None:
    accts = _run(load("healthy", {"workload.rate": 0.0}), 30.0)
    assert [classify(a).cls for a in accts] == ["idle"] * 6


def test_a_phase_changes_engine_flags_at_its_time() -> None:
    sc = from_tree(
        {
            "name": "squeeze",
            "engine": {"max_num_seqs": 64},
            "workload": {"rate": 5.0, "classes": [{"prompt_tokens": 200, "output_tokens": 400}]},
            "phases": [{"at_s": 60, "name": "one-slot", "set": {"engine.max_num_seqs": 1}}],
        }
    )
    rep = Replica(sc, seed=1)
    rep.advance_to(59.0)
    assert rep.num_running > 1
    rep.advance_to(120.0)
    assert rep.num_running <= 1  # the earlier batch has finished; one slot is left
    assert rep.phase.name == "one-slot"
    assert rep.num_waiting > 0
