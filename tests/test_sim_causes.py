"""Scenarios that change one thing after a healthy baseline, and the truth of what changed:
``sub_cause`` and ``headline_change`` come from the scenario's own knobs and the engine's
own accounting, never from its metrics."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.model import DERIVED_SIGNALS
from app.sim.engine import Replica
from app.sim.errors import SimConfigError
from app.sim.exposition import TextWriter, replica_families
from app.sim.scenario import Phase, Scenario, from_tree, load, read_tree
from app.sim.truth import (
    HEADLINE_CHANGES,
    SUB_CAUSES,
    Account,
    Cause,
    Verdict,
    classify,
    merge,
    window_truth,
)
from app.sim.truth import row as truth_row

CHANGE_AT = 180.0  # the shipped scenarios change at 900 s; tests keep runs short
RAMP = 150.0  # time the physics needs after the change (a batch building up)
END = 480.0


def shortened(name: str, **overrides: Any) -> Scenario:
    """The shipped scenario with its change moved to ``CHANGE_AT``."""
    tree = copy.deepcopy(read_tree(name))
    for phase in tree["phases"]:
        phase["at_s"] = CHANGE_AT
    tree["duration_s"] = END
    return from_tree(tree, overrides)


def run(sc: Scenario, seconds: float = END, seed: int = 3) -> list[tuple[Account, Phase]]:
    out: list[tuple[Account, Phase]] = []
    rep = Replica(sc, seed=seed, on_interval=lambda a, v, p: out.append((a, p)))
    rep.advance_to(seconds)
    return out


def windows(intervals: list[tuple[Account, Phase]], start: float, end: float) -> list[Verdict]:
    """60 s windows every 15 s inside [start, end), each judged with its phase's cause."""
    out = []
    k = int(start // 5)
    while (k + 12) * 5 <= end:
        chunk = intervals[k : k + 12]
        out.append(classify(merge(a for a, _ in chunk), chunk[-1][1].cause))
        k += 3
    return out


def test_declared_names_are_the_window_names_the_diagnosis_compares() -> None:
    assert set(HEADLINE_CHANGES) <= set(DERIVED_SIGNALS)
    assert len(set(SUB_CAUSES)) == len(SUB_CAUSES)


@pytest.mark.parametrize(
    ("name", "cls", "sub", "headline"),
    [
        ("prefix_cache_collapse", "prefill_bound", "prefix_cache_miss", "prefix_cache_hit_rate"),
        ("prompt_length_shift", "prefill_bound", "long_prompts", "prompt_tokens_mean"),
        ("traffic_surge", "queue_bound", "arrival_surge", "arrival_rate"),
        ("capacity_loss", "queue_bound", "capacity_loss", "completion_rate"),
        ("spec_decode_drop", "decode_bound", "spec_decode_regression", "spec_decode_acceptance"),
        ("bandwidth_bound", "decode_bound", "bandwidth_bound", "output_tokens_mean"),
        ("hang", "stalled", None, "steps_per_s"),
    ],
)
def test_a_healthy_baseline_then_the_declared_class_sub_cause_and_change(
    name: str, cls: str, sub: str | None, headline: str
) -> None:
    assert load(name).phases[-1].cause == Cause(cls, sub, headline)
    assert load(name).phases[-1].at_s >= 900.0  # 15 minutes of baseline as shipped
    intervals = run(shortened(name))
    before = windows(intervals, 60.0, CHANGE_AT)
    assert [v.cls for v in before].count("healthy") >= 0.8 * len(before), before
    assert all(v.headline_change is None for v in before)
    after = windows(intervals, CHANGE_AT + RAMP, END)
    assert after
    hits = [v for v in after if v.cls == cls]
    assert len(hits) >= 0.8 * len(after), [v.cls for v in after]
    assert all(v.sub_cause == sub and v.headline_change == headline for v in hits)


def test_bandwidth_bound_is_also_what_the_slow_steps_say() -> None:
    # Without the declared cause, the accounting names the same sub-cause: the slow gaps
    # end in pure decode steps, not in steps that carried prompt chunks.
    intervals = run(shortened("bandwidth_bound"))
    after = [
        classify(merge(a for a, _ in intervals[k : k + 12]))
        for k in range(int((CHANGE_AT + RAMP) // 5), len(intervals) - 11, 3)
    ]
    decode = [v for v in after if v.cls == "decode_bound"]
    assert decode and all(v.sub_cause == "bandwidth_bound" for v in decode)


def test_prefill_interference_is_named_from_where_the_slow_gaps_ended() -> None:
    mixed = Account(0.0, 5.0, duration_s=5.0, steps=100, ttft_ok=50)
    mixed.itl_n, mixed.itl_over, mixed.itl_over_mixed = 1000, 40, 30
    assert classify(mixed).sub_cause == "prefill_interference"
    mixed.itl_over_mixed = 10
    assert classify(mixed).sub_cause == "bandwidth_bound"


def test_a_hung_engine_freezes_its_page_and_the_truth_says_stalled() -> None:
    sc = shortened("hang")
    rep = Replica(sc, seed=1)
    writer = TextWriter(replica_families(rep), created_ts=0.0)
    rep.advance_to(CHANGE_AT + 10.0)  # the step in flight has ended
    frozen = writer.render()
    running = rep.num_running
    rep.advance_to(END)
    assert writer.render() == frozen  # still served, nothing moves
    assert running > 0 and rep.num_running == running
    assert len(rep.inbox) > 0  # arrivals wait in front of the engine


def test_a_hang_with_nobody_in_the_system_is_idle() -> None:
    sc = shortened("hang", **{"workload.rate": 0.0})
    verdicts = windows(run(sc), CHANGE_AT, END)
    assert {v.cls for v in verdicts} == {"idle"}


def test_spec_decode_counters_follow_the_acceptance_knob() -> None:
    sc = shortened("spec_decode_drop")
    rep = Replica(sc, seed=2)
    rep.advance_to(CHANGE_AT)
    m = rep.metrics
    k = sc.base.speculative.num_speculative_tokens
    p = sc.base.speculative.accept_prob
    expected = sum(p**i for i in range(1, k + 1)) / k
    assert m.spec_draft_tokens == k * m.spec_drafts > 0
    assert m.spec_accepted_tokens / m.spec_draft_tokens == pytest.approx(expected, abs=0.03)
    assert m.spec_accepted_per_pos[0] >= m.spec_accepted_per_pos[-1]
    assert sum(m.spec_accepted_per_pos) == m.spec_accepted_tokens
    page = TextWriter(replica_families(rep), created_ts=0.0).render().decode()
    assert page.index("vllm:spec_decode_num_drafts_total") < page.index("vllm:num_requests_running")
    family = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
    model = sc.base.served_model_name
    for pos in range(k):
        assert f'{family}{{engine="0",model_name="{model}",position="{pos}"}}' in page


def test_pages_without_speculative_decoding_have_no_spec_families() -> None:
    rep = Replica(load("healthy"), seed=0)
    page = TextWriter(replica_families(rep), created_ts=0.0).render().decode()
    assert "spec_decode" not in page


def test_prefix_reuse_drops_the_hit_rate_but_not_the_prompt_length() -> None:
    def stats(reuse: float) -> tuple[float, float]:
        rep = Replica(load("prefix_cache_collapse", {"workload.prefix_reuse": reuse}), seed=4)
        rep.advance_to(400.0)
        m = rep.metrics
        return m.prefix_hits / m.prefix_queries, m.req_prompt_tokens.sum / m.req_prompt_tokens.count

    full, busted = stats(1.0), stats(0.06)
    assert full[0] > 0.8 and busted[0] < 0.15
    assert busted[1] == pytest.approx(full[1], rel=0.1)


def test_a_prompt_whose_last_chunk_is_one_token_gets_its_first_token() -> None:
    rep = Replica(load("healthy", {"workload.rate": 0.0, "engine.max_num_batched_tokens": 512}))
    r = rep.submit(prompt_len=1025, output_len=5)  # chunks 512 + 512 + 1
    rep.advance_to(5.0)
    assert r.first_token >= 0 and r.done
    assert rep.metrics.ttft.count == 1 and rep.metrics.prompt_tokens == 1025


def test_window_truth_takes_the_cause_from_the_rows() -> None:
    cause = Cause("queue_bound", "arrival_surge", "arrival_rate")
    busy = Account(0.0, 5.0, duration_s=5.0, steps=100, ttft_ok=10, ttft_over=5, rs_slot=50.0)
    rows = [truth_row(busy, classify(busy, cause), 1000.0, "surge", "queue_bound", cause)]
    got = window_truth(rows, 1000.0, 1005.0)
    assert (got.cls, got.sub_cause, got.headline_change) == (
        "queue_bound",
        "arrival_surge",
        "arrival_rate",
    )
    assert rows[0]["sub_cause"] == "arrival_surge" and rows[0]["cause"]["class"] == "queue_bound"
    calm = Account(0.0, 5.0, duration_s=5.0, steps=100, ttft_ok=10)
    healthy = classify(calm, cause)
    assert (healthy.cls, healthy.sub_cause, healthy.headline_change) == ("healthy", None, None)


@pytest.mark.parametrize(
    ("cause", "message"),
    [
        ({"sub_cause": "gremlins", "headline_change": "arrival_rate"}, "sub_cause"),
        ({"sub_cause": None, "headline_change": "vibes"}, "headline_change"),
        ({"headline_change": "arrival_rate", "extra": 1}, "cause takes"),
    ],
)
def test_a_bad_cause_is_refused(cause: dict[str, Any], message: str) -> None:
    tree = read_tree("traffic_surge")
    tree["phases"][0]["cause"] = cause
    with pytest.raises(SimConfigError, match=message):
        from_tree(tree)


def test_a_cause_needs_the_class_it_shows_and_spec_decoding_is_fixed_at_start() -> None:
    tree = read_tree("traffic_surge")
    del tree["phases"][0]["expect"]
    with pytest.raises(SimConfigError, match="expect"):
        from_tree(tree)
    tree = read_tree("spec_decode_drop")
    tree["phases"][0]["set"]["speculative.num_speculative_tokens"] = 2
    with pytest.raises(SimConfigError, match="num_speculative_tokens"):
        from_tree(tree)
