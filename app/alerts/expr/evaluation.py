"""Evaluating a condition against the fields of one evaluation, in three-valued logic.

A missing field is *unknown*, never 0 and never "ok" (the rules: :mod:`app.alerts.expr`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from app.alerts.expr.tree import (
    Arith,
    Compare,
    ListLit,
    Literal,
    Logic,
    Name,
    Neg,
    Node,
    Not,
    Value,
)

__all__ = ["UNKNOWN", "Result", "evaluate", "value_of"]


@dataclass
class Result:
    """The outcome of a condition: ``holds`` only when it is known to be true.

    ``known`` is False when a missing field or an impossible operation (division by
    zero, a type mismatch at run time) left the answer unknown; ``missing`` names the
    fields that were absent or null, ``problems`` anything else that went wrong.
    """

    holds: bool
    known: bool
    missing: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


class _Unknown:
    """Three-valued logic's third value."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "unknown"


UNKNOWN: Any = _Unknown()


class _Eval:
    def __init__(self, fields: Mapping[str, Any]) -> None:
        self.fields = fields
        self.missing: list[str] = []
        self.problems: list[str] = []

    def lookup(self, path: str) -> Any:
        value = self.fields.get(path)
        if isinstance(value, float) and math.isnan(value):
            value = None
        return value

    def unknown(self, problem: str) -> Any:
        if problem not in self.problems:
            self.problems.append(problem)
        return UNKNOWN

    def value(self, node: Node) -> Any:
        """A node's value: a number, string, bool, list, None (absent) or UNKNOWN."""
        if isinstance(node, Literal):
            return node.value
        if isinstance(node, Name):
            return self.lookup(node.path)
        if isinstance(node, ListLit):
            return [self.value(item) for item in node.items]
        if isinstance(node, Neg):
            v = self.value(node.operand)
            num = self.number(node.operand, v)
            return UNKNOWN if num is UNKNOWN else -num
        if isinstance(node, Arith):
            return self.arith(node)
        if isinstance(node, Compare):
            return self.compare(node)
        if isinstance(node, Not):
            v = self.truth(node.operand)
            return UNKNOWN if v is UNKNOWN else not v
        return self.logic(node)

    def absent(self, node: Node, v: Any) -> bool:
        """Note a missing field; True when the value is absent or unknown."""
        if v is None and isinstance(node, Name):
            if node.path not in self.missing:
                self.missing.append(node.path)
            return True
        return v is None or v is UNKNOWN

    def number(self, node: Node, v: Any) -> Any:
        if self.absent(node, v):
            return UNKNOWN
        if isinstance(v, bool):
            return float(v)
        if isinstance(v, int | float):
            return float(v)
        return self.unknown(f"{_text(node)} is not a number")

    def arith(self, node: Arith) -> Any:
        a = self.number(node.left, self.value(node.left))
        b = self.number(node.right, self.value(node.right))
        if a is UNKNOWN or b is UNKNOWN:
            return UNKNOWN
        if node.op == "+":
            return a + b
        if node.op == "-":
            return a - b
        if node.op == "*":
            return a * b
        if b == 0:
            return self.unknown(f"division by zero at column {node.column}")
        return a / b

    def compare(self, node: Compare) -> Any:
        lv, rv = self.value(node.left), self.value(node.right)
        if node.op in ("==", "!=") and (_is_null(node.left) or _is_null(node.right)):
            other = rv if _is_null(node.left) else lv
            present = other is not None and other is not UNKNOWN
            return (not present) if node.op == "==" else present
        if node.op in ("in", "not in"):
            if self.absent(node.left, lv) or rv is UNKNOWN:
                return UNKNOWN
            if not isinstance(rv, list):
                if self.absent(node.right, rv):
                    return UNKNOWN
                return self.unknown(f"{_text(node.right)} is not a list")
            found = any(_equal(lv, item) is True for item in rv)
            return found if node.op == "in" else not found
        left_absent = self.absent(node.left, lv)
        right_absent = self.absent(node.right, rv)
        if left_absent or right_absent:
            return UNKNOWN
        if node.op in ("==", "!="):
            eq = _equal(lv, rv)
            if eq is None:
                return self.unknown(f"cannot compare {_text(node.left)} with {_text(node.right)}")
            return eq if node.op == "==" else not eq
        a = self.number(node.left, lv)
        b = self.number(node.right, rv)
        if a is UNKNOWN or b is UNKNOWN:
            return UNKNOWN
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[node.op]

    def truth(self, node: Node) -> Any:
        v = self.value(node)
        if self.absent(node, v):
            return UNKNOWN
        if isinstance(v, bool):
            return v
        return self.unknown(f"{_text(node)} is not true or false")

    def logic(self, node: Logic) -> Any:
        # Kleene: a deciding value wins over unknown (false for and, true for or).
        decisive = node.op == "or"
        saw_unknown = False
        for item in node.items:
            v = self.truth(item)
            if v is UNKNOWN:
                saw_unknown = True
            elif v is decisive:
                return decisive
        return UNKNOWN if saw_unknown else not decisive


def _is_null(node: Node) -> bool:
    return isinstance(node, Literal) and node.value is None


def _equal(a: Any, b: Any) -> bool | None:
    """Equality across compatible types (bools equal 1/0); None when incomparable."""
    if isinstance(a, str) or isinstance(b, str):
        return a == b if isinstance(a, str) and isinstance(b, str) else None
    if isinstance(a, list) or isinstance(b, list):
        return a == b if isinstance(a, list) and isinstance(b, list) else None
    if isinstance(a, bool | int | float) and isinstance(b, bool | int | float):
        return float(a) == float(b)
    return None


def _text(node: Node) -> str:
    if isinstance(node, Name):
        return node.path
    if isinstance(node, Literal):
        return repr(node.value)
    return f"the expression at column {node.column}"


def evaluate(node: Node, fields: Mapping[str, Any]) -> Result:
    """Evaluate a condition against a mapping of dotted field names to values."""
    ev = _Eval(fields)
    v = ev.truth(node)
    if v is UNKNOWN:
        return Result(False, False, ev.missing, ev.problems)
    return Result(bool(v), True, ev.missing, ev.problems)


def value_of(node: Node, fields: Mapping[str, Any]) -> Value:
    """The value of an expression (None when unknown): a rule's ``{{ value }}``."""
    v = _Eval(fields).value(node)
    if v is UNKNOWN:
        return None
    if isinstance(v, int) and not isinstance(v, bool):
        return float(v)
    return cast(Value, v)
