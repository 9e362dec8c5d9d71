"""The syntax tree of a condition: its nodes, its errors and limits, and walks over it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

__all__ = [
    "MAX_DEPTH",
    "Arith",
    "Compare",
    "ExprError",
    "ListLit",
    "Literal",
    "Logic",
    "Name",
    "Neg",
    "Node",
    "Not",
    "Value",
    "children",
    "first_comparison_operand",
    "names",
]

Value: TypeAlias = float | str | bool | list[Any] | None
# A parenthesised level costs the parser 8 Python frames; 64 levels stay well inside
# the default limit of 1,000 wherever the rules are loaded.
MAX_DEPTH = 64


class ExprError(ValueError):
    """A condition that cannot be parsed or checked; ``column`` is 1-based."""

    def __init__(self, message: str, column: int) -> None:
        super().__init__(f"column {column}: {message}")
        self.message = message
        self.column = column


@dataclass(frozen=True, slots=True)
class Literal:
    value: Value
    column: int


@dataclass(frozen=True, slots=True)
class Name:
    path: str
    column: int


@dataclass(frozen=True, slots=True)
class ListLit:
    items: tuple[Node, ...]
    column: int


@dataclass(frozen=True, slots=True)
class Neg:
    operand: Node
    column: int


@dataclass(frozen=True, slots=True)
class Arith:
    op: str
    left: Node
    right: Node
    column: int


@dataclass(frozen=True, slots=True)
class Compare:
    op: str  # ==, !=, <, <=, >, >=, in, not in
    left: Node
    right: Node
    column: int


@dataclass(frozen=True, slots=True)
class Not:
    operand: Node
    column: int


@dataclass(frozen=True, slots=True)
class Logic:
    op: str  # and, or
    items: tuple[Node, ...]
    column: int


Node: TypeAlias = Literal | Name | ListLit | Neg | Arith | Compare | Not | Logic


def children(node: Node) -> tuple[Node, ...]:
    """The operands of a node, in source order."""
    if isinstance(node, ListLit | Logic):
        return node.items
    if isinstance(node, Neg | Not):
        return (node.operand,)
    if isinstance(node, Arith | Compare):
        return (node.left, node.right)
    return ()


def names(node: Node) -> list[Name]:
    """Every field name the expression reads, in source order."""
    out: list[Name] = []

    def walk(n: Node) -> None:
        if isinstance(n, Name):
            out.append(n)
        elif isinstance(n, ListLit):
            for item in n.items:
                walk(item)
        elif isinstance(n, Neg | Not):
            walk(n.operand)
        elif isinstance(n, Arith | Compare):
            walk(n.left)
            walk(n.right)
        elif isinstance(n, Logic):
            for item in n.items:
                walk(item)

    walk(node)
    return out


def first_comparison_operand(node: Node) -> Node | None:
    """The left operand of the first comparison, source order: a rule's default ``value``."""
    if isinstance(node, Compare):
        return node.left
    if isinstance(node, Not):
        return first_comparison_operand(node.operand)
    if isinstance(node, Logic):
        for item in node.items:
            found = first_comparison_operand(item)
            if found is not None:
                return found
    if isinstance(node, Name):
        return node
    return None
