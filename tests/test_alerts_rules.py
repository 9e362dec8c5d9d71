"""Rule files: the default pack, the schema, and errors that name the rule and place."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.alerts import expr as ex
from app.alerts.fields import WINDOW_FIELDS
from app.alerts.rules import (
    RuleError,
    combine,
    default_rules,
    load_rule_file,
    load_rules,
    parse_duration,
)
from app.windows.aggregate import window
from app.windows.flat import window_to_dict


def test_default_pack_has_every_promised_rule() -> None:
    rules = {r.name: r for r in default_rules()}
    assert set(rules) == {
        "PhasewatchTargetDown",
        "PhasewatchMetricsDisabled",
        "PhasewatchTTFTOverSLO",
        "PhasewatchITLOverSLO",
        "PhasewatchEngineStalled",
        "PhasewatchKVCachePressure",
        "PhasewatchKVTransferBound",
        "PhasewatchPreemptions",
        "PhasewatchQueueBuildup",
        "PhasewatchBottleneckPersisting",
        "PhasewatchSLOBurnFast",
        "PhasewatchSLOBurnMedium",
        "PhasewatchSLOBurnSlow",
    }
    assert rules["PhasewatchSLOBurnFast"].scope == "slo"
    assert rules["PhasewatchTargetDown"].scope == "target"
    assert rules["PhasewatchMetricsDisabled"].scope == "target"
    assert rules["PhasewatchKVCachePressure"].scope == "stream"
    assert rules["PhasewatchEngineStalled"].severity == "critical"
    for rule in rules.values():
        notes = dict(rule.annotations)
        assert "summary" in notes and "ui_url" in notes
        if rule.scope in ("stream", "slo"):
            assert {"diagnosis", "hints"} <= set(notes), rule.name


@pytest.mark.parametrize(
    ("judged", "fire_on_unproven", "fires"),
    [
        ("over", False, True),
        ("unproven", False, False),
        ("unproven", True, True),
        ("within", True, False),
    ],
)
def test_over_slo_rules_read_the_diagnosis_judgement(
    judged: str, fire_on_unproven: bool, fires: bool
) -> None:
    """An unproven breach (the p99 in a bucket around the SLO) fires the default over-SLO
    rules only with ``alerts.fire_on_unproven``, whatever the interpolated p99 says."""
    rules = {r.name: r for r in default_rules()}
    for name, field in (("PhasewatchTTFTOverSLO", "ttft_slo"), ("PhasewatchITLOverSLO", "itl_slo")):
        fields = {field: judged, "fire_on_unproven": fire_on_unproven, "ttft_p99": 2.37}
        assert ex.evaluate(rules[name].condition, fields).holds is fires, (name, judged)


def test_window_fields_match_the_windows_api() -> None:
    empty = window([], start=0.0, end=60.0, target="t", model_name="m")
    # ``probe`` (a probe's stream only) is read flattened: ``probe.<name>`` (PROBE_FIELDS).
    assert set(window_to_dict(empty)) - {"probe"} == set(WINDOW_FIELDS)
    assert window_to_dict(empty)["probe"] is None


def test_a_full_rule_loads_with_its_fields() -> None:
    (rule,) = load_rules(
        """
rules:
  - alert: SlowFirstToken
    expr: ttft_p99 > 1.5 * slo.ttft_p99
    for: 1m30s
    keep_firing_for: 45s
    severity: critical
    labels: {team: inference}
    annotations:
      summary: "TTFT {{ value | seconds }} on {{ labels.model_name }}"
"""
    )
    assert (rule.name, rule.for_s, rule.keep_firing_for_s, rule.severity) == (
        "SlowFirstToken",
        90.0,
        45.0,
        "critical",
    )
    assert rule.labels == (("team", "inference"),)
    assert rule.scope == "stream"


def test_prometheus_groups_and_aliases_are_accepted() -> None:
    rules = load_rules(
        """
groups:
  - name: a
    rules:
      - name: Down
        condition: target_up == 0
  - name: b
    rules:
      - alert: Disabled
        expr: metrics_disabled
"""
    )
    assert [r.name for r in rules] == ["Down", "Disabled"]
    assert all(r.scope == "target" for r in rules)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "rules:\n  - alert: A\n    expr: kv_mx >= 0.95\n",
            "r.yaml:3:11: rule 'A': expr: unknown field 'kv_mx' (did you mean 'kv_max'?)",
        ),
        (
            'rules:\n  - alert: B\n    expr: "kv_max >= 0.95 and and"\n',
            "r.yaml:3:31: rule 'B': expr: expected a value, found 'and'",
        ),
        (
            "rules:\n  - alert: C\n    expr: |\n      kv_max >= 0.95\n      and class == 3\n",
            "r.yaml:5:17: rule 'C': expr: '==' compares a string with a number",
        ),
        (
            "rules:\n  - alert: D\n    expr: kv_max > 1\n    for: 2x\n",
            "r.yaml:4:10: rule 'D': for: not a duration: '2x'",
        ),
        (
            "rules:\n  - alert: E\n    expr: kv_max > 1\n    fro: 2m\n",
            "r.yaml:4:5: rule 'E': unknown key 'fro'",
        ),
        ("rules:\n  - alert: F\n", "r.yaml:2:5: rule 'F': missing 'expr'"),
        (
            "rules:\n  - alert: G\n    expr: kv_max > 1\n    labels: {severity: page}\n",
            "rule 'G': labels: 'severity' is set by phasewatch (use the 'severity' key)",
        ),
        (
            "rules:\n  - alert: H\n    expr: kv_max > 1\n    severity: loud\n",
            "r.yaml:4:15: rule 'H': severity must be one of critical, warning, info",
        ),
        (
            "rules:\n  - alert: I\n    expr: kv_max > 1\n"
            "    annotations: {summary: 'at {{ kv_maxx }}'}\n",
            "rule 'I': annotations.summary: unknown field 'kv_maxx' (did you mean 'kv_max'?)",
        ),
        (
            "rules:\n  - alert: J\n    expr: kv_max > 1\n"
            "    annotations: {summary: '{{ kv_max | pct }}'}\n",
            "rule 'J': annotations.summary: unknown filter 'pct'",
        ),
        (
            "rules:\n  - alert: K\n    expr: target_up == 0\n"
            "    annotations: {summary: '{{ hints }}'}\n",
            "rule 'K': annotations.summary: unknown field 'hints' (only per-stream rules have it)",
        ),
        (
            "rules:\n  - alert: L\n    expr: kv_max > 1\n  - alert: L\n    expr: kv_max > 2\n",
            "r.yaml:4:5: rule 'L': a rule of that name is already at r.yaml:2:5",
        ),
        ("alerts: []\n", "expected exactly one of 'rules:' or 'groups:'"),
        ("rules: [\n", "r.yaml:2:1: not valid YAML"),
        ("rules:\n  - alert: 9x\n    expr: kv_max > 1\n", "rule '9x': the name must be"),
    ],
)
def test_a_wrong_rule_file_names_the_rule_and_the_position(text: str, expected: str) -> None:
    with pytest.raises(RuleError) as info:
        load_rules(text, "r.yaml")
    assert expected in str(info.value)


def test_an_empty_file_has_no_rules() -> None:
    assert load_rules("", "r.yaml") == []


def test_unreadable_file_is_a_rule_error(tmp_path: Path) -> None:
    with pytest.raises(RuleError, match="cannot read rule file"):
        load_rule_file(tmp_path / "absent.yaml")


def test_a_name_defined_in_the_pack_and_the_file_is_refused() -> None:
    mine = load_rules("rules:\n  - alert: PhasewatchTargetDown\n    expr: target_up == 0\n", "m")
    with pytest.raises(RuleError, match="also defined at"):
        combine(default_rules(), mine)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [(0, 0.0), (90, 90.0), ("90s", 90.0), ("2m", 120.0), ("1h30m", 5400.0), ("500ms", 0.5)],
)
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "2", "m", "2m3", "-1s", True, None, -5])
def test_bad_durations(text: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)
