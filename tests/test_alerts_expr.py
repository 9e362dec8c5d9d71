"""The rule condition language: parsing, errors with columns, null-safe evaluation."""

from __future__ import annotations

from typing import Any

import pytest

from app.alerts import expr as ex


def run(text: str, **fields: Any) -> ex.Result:
    return ex.evaluate(ex.parse(text), {k.replace("__", "."): v for k, v in fields.items()})


@pytest.mark.parametrize(
    ("text", "fields", "holds"),
    [
        ("ttft_p99 > slo.ttft_p99", {"ttft_p99": 2.5, "slo__ttft_p99": 2.0}, True),
        ("ttft_p99 > slo.ttft_p99", {"ttft_p99": 1.5, "slo__ttft_p99": 2.0}, False),
        ('class == "kv_pressure"', {"class": "kv_pressure"}, True),
        ("class == 'kv_pressure'", {"class": "healthy"}, False),
        ("kv_max >= 0.95", {"kv_max": 0.95}, True),
        ("target_up == 0", {"target_up": 0.0}, True),
        ("target_up == 0", {"target_up": False}, True),
        ("metrics_disabled", {"metrics_disabled": True}, True),
        ("not metrics_disabled", {"metrics_disabled": True}, False),
        ("a > 1 and b > 1 or c > 1", {"a": 0, "b": 0, "c": 2}, True),
        ("a > 1 and (b > 1 or c > 1)", {"a": 0, "b": 0, "c": 2}, False),
        ("ttft_p99 > 2 * slo.ttft_p99", {"ttft_p99": 3.0, "slo__ttft_p99": 2.0}, False),
        ("x - 1 >= -0.5", {"x": 0.5}, True),
        ("x / 2 == 1.5e0", {"x": 3}, True),
        ('class in ["queue_bound", "kv_pressure"]', {"class": "kv_pressure"}, True),
        ('class not in ["queue_bound", "kv_pressure"]', {"class": "healthy"}, True),
        ('"ttft" in missing', {"missing": ["ttft", "itl"]}, True),
        ("labels.cluster == 'eu-1'", {"labels__cluster": "eu-1"}, True),
        (r'summary == "a \"b\""', {"summary": 'a "b"'}, True),
    ],
)
def test_conditions_evaluate_like_their_reading(
    text: str, fields: dict[str, Any], holds: bool
) -> None:
    res = run(text, **fields)
    assert res.known
    assert res.holds is holds


@pytest.mark.parametrize(
    "text",
    [
        "ttft_p99 > 2",
        "ttft_p99 > 2 and kv_max < 0.5",
        "not (ttft_p99 > 2)",
        "ttft_p99 + 1 > 2",
        "kv_max > 0.5 or ttft_p99 > 2",
        "class in ['a']",
    ],
)
def test_missing_value_is_never_ok_but_cannot_evaluate(text: str) -> None:
    res = run(text, kv_max=0.1)
    assert not res.holds
    assert not res.known
    assert res.missing  # names the field that was null


def test_null_counts_as_missing_and_is_named() -> None:
    res = run("ttft_p99 > slo.ttft_p99", ttft_p99=None, slo__ttft_p99=2.0)
    assert (res.holds, res.known, res.missing) == (False, False, ["ttft_p99"])
    nan = run("ttft_p99 > 1", ttft_p99=float("nan"))
    assert not nan.known


def test_kleene_logic_lets_a_decisive_operand_win_over_unknown() -> None:
    assert run("kv_max > 0.5 or ttft_p99 > 2", kv_max=0.9).holds
    assert run("kv_max > 0.5 and ttft_p99 > 2", kv_max=0.1).known  # false and unknown = false
    assert not run("kv_max > 0.5 and ttft_p99 > 2", kv_max=0.1).holds


def test_explicit_null_tests_are_known() -> None:
    assert run("ttft_p99 == null").holds
    assert run("ttft_p99 != null", ttft_p99=1.0).holds
    assert run("ttft_p99 == null", ttft_p99=1.0).known


def test_division_by_zero_cannot_evaluate() -> None:
    res = run("a / b > 1", a=1.0, b=0.0)
    assert not res.known
    assert "division by zero" in res.problems[0]


@pytest.mark.parametrize(
    ("text", "column", "fragment"),
    [
        ("kv_max >= ", 11, "expected a value"),
        ("kv_max >= 0.9 and and", 19, "expected a value"),
        ("kv_max && x", 8, "use 'and'"),
        ("(kv_max > 1", 12, "expected ')'"),
        ("a < b < c", 7, "cannot be chained"),
        ("class == 'open", 10, "unterminated string"),
        ("kv_max > 1 kv_max", 12, "unexpected 'kv_max'"),
        ("", 1, "empty condition"),
        ("x == 'a\\q'", 8, "unknown escape"),
    ],
)
def test_syntax_errors_carry_the_column(text: str, column: int, fragment: str) -> None:
    with pytest.raises(ex.ExprError) as info:
        ex.parse(text)
    assert info.value.column == column
    assert fragment in info.value.message


def _types(name: ex.Name) -> str:
    table = {"kv_max": "number", "class": "string", "metrics_disabled": "bool", "missing": "list"}
    if name.path not in table:
        raise ex.ExprError(f"unknown field '{name.path}'", name.column)
    return table[name.path]


@pytest.mark.parametrize(
    ("text", "column", "fragment"),
    [
        ("class > 1", 1, "compares numbers"),
        ("class == 1", 7, "compares a string with a number"),
        ("kv_max", 1, "must be true or false"),
        ("kv_max + class > 1", 10, "needs a number"),
        ("not kv_max", 5, "needs a bool"),
        ("kv_max in 3", 8, "needs a list"),
        ("kv_mx > 1", 1, "unknown field"),
    ],
)
def test_type_errors_are_found_before_running(text: str, column: int, fragment: str) -> None:
    with pytest.raises(ex.ExprError) as info:
        ex.check(ex.parse(text), _types)
    assert info.value.column == column
    assert fragment in info.value.message


def test_the_default_value_is_the_first_comparisons_left_side() -> None:
    node = ex.parse("kv_max >= 0.95 and (preemptions_per_s > 0 or waiting_avg >= 1)")
    value = ex.first_comparison_operand(node)
    assert value is not None
    assert ex.value_of(value, {"kv_max": 0.97}) == 0.97


def test_no_python_eval_is_reachable() -> None:
    with pytest.raises(ex.ExprError):
        ex.parse("__import__('os').system('true')")
    res = run("x.__class__ == 'a'", x=1.0)
    assert not res.known  # just a missing dotted field
