"""The alert state machine, stepped through time with scenario tables (as Prometheus'
rule unit tests do): at each time the input value, the alert's state afterwards, and the
transitions that evaluation emitted."""

from __future__ import annotations

from typing import Any

import pytest

from app.alerts.fields import Instance
from app.alerts.rules import Rule, load_rules
from app.alerts.state import (
    Alert,
    AlertState,
    evaluate,
    fingerprint,
    plan_notifications,
)


def rule(expr: str = "kv_max >= 0.95", for_: str = "0s", keep: str = "0s", **extra: str) -> Rule:
    lines = [
        "rules:",
        "  - alert: KV",
        f"    expr: {expr}",
        f"    for: {for_}",
        f"    keep_firing_for: {keep}",
        "    annotations: {summary: 'KV at {{ value | percent }} on {{ labels.model_name }}'}",
    ]
    lines += [f"    {k}: {v}" for k, v in extra.items()]
    (r,) = load_rules("\n".join(lines) + "\n")
    return r


def stream(kv: float | None, model: str = "llama") -> Instance:
    return Instance(
        "stream",
        "a",
        model,
        {"target": "a", "model_name": model, "cluster": "eu"},
        {"kv_max": kv, "labels.model_name": model},
    )


Step = tuple[float, float | None, str | None, list[str]]


def run_table(r: Rule, steps: list[Step], retention: float = 900.0) -> dict[str, Alert]:
    """Each step: (time, kv_max or None for missing, state after or None, transitions)."""
    alerts: dict[str, Alert] = {}
    for t, kv, expected_state, expected in steps:
        result = evaluate([r], [stream(kv)], t, alerts, resolved_retention=retention)
        alerts = result.alerts
        got = [tr.state for tr in result.transitions]
        assert got == expected, f"t={t}: transitions {got} != {expected}"
        states = [str(a.state) for a in alerts.values()]
        assert states == ([] if expected_state is None else [expected_state]), f"t={t}"
    return alerts


SCENARIOS: dict[str, tuple[dict[str, str], list[Step]]] = {
    "for 0 fires at once and resolves at once": (
        {},
        [
            (0, 0.5, None, []),
            (15, 0.97, "firing", ["firing"]),
            (30, 0.97, "firing", []),
            (45, 0.5, "inactive", ["resolved"]),
        ],
    ),
    "pending until for has elapsed": (
        {"for_": "1m"},
        [
            (0, 0.97, "pending", ["pending"]),
            (15, 0.97, "pending", []),
            (45, 0.97, "pending", []),
            (60, 0.97, "firing", ["firing"]),
            (75, 0.97, "firing", []),
        ],
    ),
    "a pending alert that clears is dropped, never fired": (
        {"for_": "1m"},
        [
            (0, 0.97, "pending", ["pending"]),
            (15, 0.5, None, ["resolved"]),
            (30, 0.97, "pending", ["pending"]),
            (90, 0.97, "firing", ["firing"]),
        ],
    ),
    "keep_firing_for holds a flapping alert": (
        {"keep": "30s"},
        [
            (0, 0.97, "firing", ["firing"]),
            (15, 0.5, "firing", []),
            (30, 0.97, "firing", []),
            (45, 0.5, "firing", []),
            (60, 0.5, "firing", []),
            (75, 0.5, "inactive", ["resolved"]),
        ],
    ),
    "missing data counts as not holding (Prometheus: the series is gone)": (
        {"for_": "30s"},
        [
            (0, 0.97, "pending", ["pending"]),
            (15, None, None, ["resolved"]),
            (30, 0.97, "pending", ["pending"]),
            (60, 0.97, "firing", ["firing"]),
            (75, None, "inactive", ["resolved"]),
        ],
    ),
    "a new episode after resolution starts from pending": (
        {"for_": "15s"},
        [
            (0, 0.97, "pending", ["pending"]),
            (15, 0.97, "firing", ["firing"]),
            (30, 0.5, "inactive", ["resolved"]),
            (45, 0.97, "pending", ["pending"]),
            (60, 0.97, "firing", ["firing"]),
        ],
    ),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_state_machine_scenarios(name: str) -> None:
    kwargs, steps = SCENARIOS[name]
    run_table(rule(**kwargs), steps)


def test_resolved_alerts_are_kept_for_the_retention_then_forgotten() -> None:
    run_table(
        rule(),
        [
            (0, 0.97, "firing", ["firing"]),
            (15, 0.5, "inactive", ["resolved"]),
            (100, 0.5, "inactive", []),
            (114, 0.5, "inactive", []),
            (115, 0.5, None, []),
        ],
        retention=100.0,
    )


def test_timestamps_follow_the_episode() -> None:
    alerts = run_table(
        rule(for_="30s"),
        [(0, 0.97, "pending", ["pending"]), (30, 0.97, "firing", ["firing"])],
    )
    (a,) = alerts.values()
    assert (a.active_at, a.fired_at, a.resolved_at) == (0, 30, None)
    result = evaluate([rule(for_="30s")], [stream(0.5)], 45, alerts)
    (a,) = result.alerts.values()
    assert (a.active_at, a.fired_at, a.resolved_at, a.state) == (0, 30, 45, AlertState.INACTIVE)


def test_one_alert_per_label_set() -> None:
    r = rule()
    result = evaluate(
        [r], [stream(0.97, "llama"), stream(0.97, "mistral"), stream(0.1, "q")], 0, {}
    )
    assert len(result.alerts) == 2
    labels = sorted(a.labels["model_name"] for a in result.alerts.values())
    assert labels == ["llama", "mistral"]
    (one,) = [a for a in result.alerts.values() if a.labels["model_name"] == "llama"]
    assert one.labels == {
        "alertname": "KV",
        "severity": "warning",
        "target": "a",
        "model_name": "llama",
        "cluster": "eu",
    }
    assert one.annotations == {"summary": "KV at 97% on `llama`"}  # set apart: scraped
    assert one.value == 0.97


def test_fingerprint_is_alertmanagers() -> None:
    # model.LabelSet{"alertname": "test"}.Fingerprint() in prometheus/common.
    assert fingerprint({}) == "cbf29ce484222325"
    assert fingerprint({"b": "2", "a": "1"}) == fingerprint({"a": "1", "b": "2"})
    assert fingerprint({"a": "1"}) != fingerprint({"a": "2"})


def test_alert_of_a_vanished_instance_or_rule_resolves() -> None:
    r = rule()
    first = evaluate([r], [stream(0.97)], 0, {})
    gone = evaluate([r], [], 15, first.alerts)
    assert [t.state for t in gone.transitions] == ["resolved"]
    removed = evaluate([], [stream(0.97)], 15, first.alerts)
    assert [t.state for t in removed.transitions] == ["resolved"]


def test_target_rules_need_no_stream() -> None:
    (down,) = load_rules("rules:\n  - alert: Down\n    expr: target_up == 0\n")
    target = Instance("target", "a", None, {"target": "a"}, {"target_up": 0.0})
    result = evaluate([down], [target], 0, {})
    (a,) = result.alerts.values()
    assert a.state == AlertState.FIRING
    assert "model_name" not in a.labels


def test_cannot_evaluate_is_reported_not_hidden() -> None:
    result = evaluate([rule()], [stream(None)], 0, {})
    (res,) = result.results
    assert (res.holds, res.health, res.missing) == (False, "cannot_evaluate", ("kv_max",))


def test_state_survives_json_round_trip() -> None:
    alerts = run_table(rule(for_="15s"), [(0, 0.97, "pending", ["pending"])])
    restored = {fp: Alert.from_json(a.to_json()) for fp, a in alerts.items()}
    assert restored == alerts
    # A restart that restores the state continues the episode: no second "pending".
    result = evaluate([rule(for_="15s")], [stream(0.97)], 15, restored)
    assert [t.state for t in result.transitions] == ["firing"]


# --- notifications -------------------------------------------------------------------------


def notices(alerts: dict[str, Alert], now: float, **kw: Any) -> tuple[dict[str, Alert], list]:  # type: ignore[type-arg]
    return plan_notifications(alerts, now, resend_interval=60.0, **kw)


def test_events_once_per_state_updates_every_resend_interval() -> None:
    r = rule()
    alerts: dict[str, Alert] = {}
    sent: list[tuple[float, str, str]] = []
    for t, kv in [(0, 0.97), (15, 0.97), (60, 0.97), (75, 0.5), (90, 0.5), (140, 0.5)]:
        alerts = evaluate([r], [stream(kv)], t, alerts).alerts
        alerts, ns = notices(alerts, t)
        sent += [(t, n.kind, n.state) for n in ns]
    assert sent == [
        (0, "event", "firing"),
        (0, "update", "firing"),
        (60, "update", "firing"),
        (75, "event", "resolved"),
        (75, "update", "resolved"),
        (140, "update", "resolved"),
    ]


def test_dedup_keys_are_stable_for_one_episode() -> None:
    alerts = evaluate([rule()], [stream(0.97)], 0, {}).alerts
    _, first = notices(alerts, 0)
    _, again = notices(alerts, 0)  # state not saved: the same decision again
    assert [n.dedup_key for n in first] == [n.dedup_key for n in again]


def test_silence_mutes_firing_until_it_ends_and_resolved_only_follows_a_firing() -> None:
    r = rule()
    alerts = evaluate([r], [stream(0.97)], 0, {}).alerts
    alerts, ns = notices(alerts, 0, silenced=lambda labels: "s1")
    assert ns == []
    alerts = evaluate([r], [stream(0.97)], 15, alerts).alerts
    alerts, ns = notices(alerts, 15)
    assert [(n.kind, n.state) for n in ns] == [("event", "firing"), ("update", "firing")]
    # Silenced again, then resolved: receivers that heard "firing" hear "resolved".
    alerts = evaluate([r], [stream(0.5)], 30, alerts).alerts
    alerts, ns = notices(alerts, 30, silenced=lambda labels: "s1")
    assert [(n.kind, n.state) for n in ns] == [("event", "resolved"), ("update", "resolved")]


def test_silenced_episode_that_resolves_is_never_announced() -> None:
    r = rule()
    alerts = evaluate([r], [stream(0.97)], 0, {}).alerts
    alerts, _ = notices(alerts, 0, silenced=lambda labels: "s1")
    alerts = evaluate([r], [stream(0.5)], 15, alerts).alerts
    _, ns = notices(alerts, 15)
    assert ns == []
