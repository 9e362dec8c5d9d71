"""Hostile rule and config files: one ``FILE:LINE:COL`` line and exit 2, never a traceback
(nesting thousands deep, 20,000 ``not``s, ``!!python/object`` tags)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.alerts import expr as ex
from app.alerts.rules import load_rules
from app.cli import main

DEPTH = 5000


def _rule(expr: str) -> str:
    return f"rules:\n  - alert: X\n    expr: '{expr}'\n"


HOSTILE_RULES = {
    "yaml_nested_5000_deep": "rules:\n  " + "- " * DEPTH + "x\n",
    "yaml_flow_nested_5000_deep": "rules: " + "{a: " * DEPTH + "1" + "}" * DEPTH + "\n",
    "python_object_tag": "rules:\n  - alert: X\n    expr: !!python/object:os.system x\n",
    "python_apply_tag_at_top": "rules: !!python/object/apply:os.system [echo]\n",
    "not_20000_times": _rule("not " * 20_000 + "kv_max > 1"),
    "parentheses_5000_deep": _rule("(" * DEPTH + "kv_max" + ")" * DEPTH + " > 1"),
    "minus_5000_times": _rule("-" * DEPTH + "kv_max > 1"),
    "sum_of_20000_terms": _rule(" + ".join(["kv_max"] * 20_000) + " > 1"),
    "lists_5000_deep": _rule("class in " + "[" * DEPTH + "]" * DEPTH),
}


def _one_error_line(err: str, prefix: str) -> str:
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err[:500]
    assert re.match(rf"^{re.escape(prefix)}:\d+:\d+: ", lines[0]), lines[0][:300]
    return lines[0]


@pytest.mark.parametrize("text", HOSTILE_RULES.values(), ids=HOSTILE_RULES.keys())
def test_rules_check_refuses_a_hostile_file_with_one_positioned_line(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(text)
    assert main(["rules", "check", str(path)]) == 2
    _one_error_line(capsys.readouterr().err, str(path))


@pytest.mark.parametrize("key", ["yaml_nested_5000_deep", "python_object_tag", "not_20000_times"])
def test_serve_refuses_a_hostile_rules_file_before_starting(
    key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(HOSTILE_RULES[key])
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "targets: [{name: a, url: 'http://127.0.0.1:1/metrics'}]\n"
        f"storage: {{path: '{tmp_path / 'pw.db'}'}}\n"
        f"alerts: {{rules_file: '{rules}'}}\n"
    )
    assert main(["serve", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1
    assert err.startswith(f"config error in {cfg}: alerts")
    assert re.search(rf"{re.escape(str(rules))}:\d+:\d+: ", err)


HOSTILE_CONFIGS = {
    "yaml_nested_5000_deep": "slo:\n  " + "- " * DEPTH + "x\n",
    "python_object_tag": "log: !!python/object/apply:os.system [echo]\n",
    "syntax_error": "targets: [\n",
    # "billion laughs": nine aliases a level, fifteen levels (9**15 paths to walk)
    "alias_bomb": "a: &a [x, x, x, x, x, x, x, x, x]\n"
    + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(15)
    ),
}


@pytest.mark.parametrize("text", HOSTILE_CONFIGS.values(), ids=HOSTILE_CONFIGS.keys())
@pytest.mark.parametrize("command", ["config check", "serve --config"])
def test_a_hostile_config_file_is_one_positioned_line_and_exit_2(
    text: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    assert main([*command.split(), str(path)]) == 2
    line = _one_error_line(capsys.readouterr().err, f"config error in {path}")
    assert ": not valid YAML: " in line


def test_the_python_tag_error_points_at_the_tag() -> None:
    with pytest.raises(ValueError, match=r"^r\.yaml:3:11: not valid YAML: .*python/object"):
        load_rules(HOSTILE_RULES["python_object_tag"], "r.yaml")


def test_conditions_nest_up_to_the_limit_and_no_deeper() -> None:
    n = ex.MAX_DEPTH
    assert load_rules(_rule("(" * n + "kv_max" + ")" * n + " > 1"), "r.yaml")
    assert load_rules(_rule("not " * (n - 1) + "kv_max > 1"), "r.yaml")  # + the comparison
    assert load_rules(_rule(" + ".join(["kv_max"] * n) + " > 1"), "r.yaml")
    with pytest.raises(ValueError, match="nested deeper than"):
        load_rules(_rule(" + ".join(["kv_max"] * (n + 1)) + " > 1"), "r.yaml")
    with pytest.raises(ex.ExprError) as info:
        ex.parse("not " * (n + 1) + "x")
    assert info.value.column == 4 * n + 1  # the first 'not' past the limit
    assert "nested deeper than" in info.value.message


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://h:99999/metrics", "Port out of range"),
        ("http://h:[::1/metrics", "not a usable URL"),
    ],
)
def test_a_target_url_the_client_cannot_use_is_a_config_error(
    url: str, why: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused at start-up, not raised out of every scrape round."""
    path = tmp_path / "c.yaml"
    path.write_text(f"targets: [{{name: a, url: '{url}'}}]\n")
    assert main(["config", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1
    assert err.startswith(f"config error in {path}: targets.0.url: ") and why in err
