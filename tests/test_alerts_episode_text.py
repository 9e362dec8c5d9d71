"""An alert's text tells the condition that made it fire and how long it has held (issue
#44 item 2): no fixed "for 5 minutes" while pending after two, no class of the last
window presented as the class of the whole episode, and the resolution carries the text
of the condition as it last held."""

from __future__ import annotations

import re

from app.alerts.fields import Instance
from app.alerts.rules import default_rules, load_rules
from app.alerts.state import Alert, AlertState, evaluate
from app.alerts.template import render_value

PERSISTING = "PhasewatchBottleneckPersisting"


def stream(cls: str | None) -> Instance:
    fields = {
        "class": cls,
        "confidence": 0.9,
        "summary": f"{cls} window",
        "change": None,
        "hints": "- a hint",
        "ui_url": "http://ui/a",
        "labels.model_name": "m",
        "labels.target": "a",
        "target": "a",
        "model_name": "m",
    }
    return Instance("stream", "a", "m", {"target": "a", "model_name": "m"}, fields)


def run(classes: list[tuple[float, str | None]]) -> tuple[dict[str, Alert], list[object]]:
    """Every 15 s the stream's class; the persisting rule's alerts and transitions."""
    rules = [r for r in default_rules() if r.name == PERSISTING]
    alerts: dict[str, Alert] = {}
    transitions: list[object] = []
    for t, cls in classes:
        result = evaluate(rules, [stream(cls)], t, alerts)
        alerts = result.alerts
        transitions += result.transitions
    return alerts, transitions


def ticks(start: float, end: float, cls: str | None) -> list[tuple[float, str | None]]:
    return [(float(t), cls) for t in range(int(start), int(end), 15)]


def test_a_pending_alert_says_how_long_it_has_held_not_the_rules_for() -> None:
    alerts, _ = run(ticks(0, 135, "queue_bound"))  # the last evaluation at 120 s
    (alert,) = alerts.values()
    assert alert.state is AlertState.PENDING
    summary = alert.annotations["summary"]
    assert "5 minutes" not in summary and "5m" not in summary
    assert "for 2m 0s" in summary and "queue_bound 2m 0s" in summary


def test_a_class_that_changed_in_the_episode_is_told_with_how_long_each_held() -> None:
    steps = ticks(0, 315, "queue_bound") + [(315.0, "prefill_bound")]
    alerts, _ = run(steps)
    (alert,) = alerts.values()
    assert alert.state is AlertState.FIRING
    summary = alert.annotations["summary"]
    assert "has been prefill_bound" not in summary
    assert "for 5m 15s" in summary
    assert "queue_bound 5m 0s, prefill_bound 15s" in summary


def test_a_recovered_stream_resolves_after_keep_firing_with_the_text_it_had() -> None:
    steps = ticks(0, 330, "queue_bound") + ticks(330, 330 + 600, "healthy")
    alerts, transitions = run(steps)
    states = [t.state for t in transitions]  # type: ignore[attr-defined]
    assert states == ["pending", "firing", "resolved"]
    resolved = transitions[-1]
    # Kept firing for keep_firing_for (2 min) after the last bottleneck window, then resolved.
    assert resolved.at == 330 + 120  # type: ignore[attr-defined]
    assert "for 5m 15s: queue_bound 5m 15s" in resolved.annotations["summary"]  # type: ignore[attr-defined]
    assert all(a.state is not AlertState.FIRING for a in alerts.values())


def test_the_held_values_survive_a_restart() -> None:
    alerts, _ = run(ticks(0, 60, "queue_bound") + [(60.0, "kv_pressure")])
    (alert,) = alerts.values()
    back = Alert.from_json(alert.to_json())
    assert back == alert
    assert back.held == (("queue_bound", 45.0), ("kv_pressure", 15.0))


def test_no_default_rule_states_a_fixed_duration() -> None:
    for r in default_rules():
        for name, template in r.annotations:
            claim = re.search(r"for \d+ (minutes?|hours?|seconds?)", template.source)
            assert claim is None, f"{r.name}.{name}: {template.source!r}"


def test_templates_read_active_for_with_the_duration_filter() -> None:
    (r,) = load_rules(
        "rules:\n  - alert: A\n    expr: kv_max > 0.9\n    for: 1m\n"
        "    annotations: {summary: 'full for {{ active_for | duration }} ({{ held }})'}\n"
    )
    inst = Instance("stream", "a", "m", {"target": "a"}, {"kv_max": 0.95})
    alerts: dict[str, Alert] = {}
    for t in (0.0, 15.0, 30.0, 45.0, 60.0, 75.0):
        alerts = evaluate([r], [inst], t, alerts).alerts
    (alert,) = alerts.values()
    # A number's values are not tracked: ``held`` is n/a.
    assert alert.annotations["summary"] == "full for 1m 15s (n/a)"
    assert [render_value(v, "duration") for v in (0, 45, 315, 3720)] == [
        "0s",
        "45s",
        "5m 15s",
        "1h 2m",
    ]
