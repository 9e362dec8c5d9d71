"""Static types of a condition: operands checked before a rule is accepted.

Types are "number", "string", "bool", "list", "null" and "any" (a value only known at
run time); ``type_of`` gives the type of each field name.
"""

from __future__ import annotations

from collections.abc import Callable

from app.alerts.expr.tree import (
    Arith,
    ExprError,
    ListLit,
    Literal,
    Logic,
    Name,
    Neg,
    Node,
    Not,
    Value,
)

__all__ = ["TypeOf", "check"]

TypeOf = Callable[[Name], str]


def check(node: Node, type_of: TypeOf, *, condition: bool = True) -> str:
    """Check operand types; return the node's type. ``type_of`` raises for unknown names.

    With ``condition`` the whole expression must be a boolean (a bare number is refused:
    write ``target_up == 0``, not ``target_up``).
    """
    kind = _check(node, type_of)
    if condition and kind not in ("bool", "any"):
        raise ExprError(
            f"a condition must be true or false, but this is a {kind}: compare it "
            "(for example 'x > 0' or 'x == \"value\"')",
            node.column,
        )
    return kind


def _literal_type(value: Value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, float | int):
        return "number"
    if isinstance(value, str):
        return "string"
    return "list"


def _compatible(a: str, b: str) -> bool:
    if "any" in (a, b) or "null" in (a, b) or a == b:
        return True
    return {a, b} == {"bool", "number"}


def _check(node: Node, type_of: TypeOf) -> str:
    if isinstance(node, Literal):
        return _literal_type(node.value)
    if isinstance(node, Name):
        return type_of(node)
    if isinstance(node, ListLit):
        for item in node.items:
            _check(item, type_of)
        return "list"
    if isinstance(node, Neg):
        _need(node.operand, type_of, ("number",), "'-'")
        return "number"
    if isinstance(node, Arith):
        _need(node.left, type_of, ("number",), f"'{node.op}'")
        _need(node.right, type_of, ("number",), f"'{node.op}'")
        return "number"
    if isinstance(node, Not):
        _need(node.operand, type_of, ("bool",), "'not'")
        return "bool"
    if isinstance(node, Logic):
        for item in node.items:
            _need(item, type_of, ("bool",), f"'{node.op}'")
        return "bool"
    left, right = _check(node.left, type_of), _check(node.right, type_of)
    if node.op in ("in", "not in"):
        if right not in ("list", "any"):
            raise ExprError(f"'{node.op}' needs a list on its right, got a {right}", node.column)
        return "bool"
    if node.op in ("<", "<=", ">", ">="):
        for side, kind in ((node.left, left), (node.right, right)):
            if kind not in ("number", "any"):
                raise ExprError(f"'{node.op}' compares numbers, got a {kind}", side.column)
        return "bool"
    if not _compatible(left, right):
        raise ExprError(f"'{node.op}' compares a {left} with a {right}", node.column)
    return "bool"


def _need(node: Node, type_of: TypeOf, kinds: tuple[str, ...], what: str) -> None:
    kind = _check(node, type_of)
    if kind not in (*kinds, "any"):
        raise ExprError(f"{what} needs a {' or '.join(kinds)}, got a {kind}", node.column)
