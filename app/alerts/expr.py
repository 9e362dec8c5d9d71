"""The rule condition language: a tokenizer, a recursive-descent parser and an evaluator.

Small and safe on purpose — no Python ``eval``. A condition reads the fields of one
evaluation (window numbers, the diagnosis, target health, SLOs, labels)::

    ttft_p99 > slo.ttft_p99 and ttft_count >= 20
    class == "kv_pressure" or (kv_max >= 0.95 and preemptions_per_s > 0)
    class in ["queue_bound", "kv_pressure"]
    target_up == 0
    not metrics_disabled

Grammar, loosest binding first::

    or      := and ("or" and)*
    and     := not ("and" not)*
    not     := "not" not | compare
    compare := sum [("==" | "!=" | "<" | "<=" | ">" | ">=" | "in" | "not in") sum]
    sum     := product (("+" | "-") product)*
    product := unary (("*" | "/") unary)*
    unary   := "-" unary | atom
    atom    := number | string | true | false | null | name | "(" or ")" | "[" list "]"

Names are dotted (``slo.ttft_p99``, ``labels.cluster``); strings use single or double
quotes with backslash escapes. Comparisons do not chain (``a < b < c`` is an error).

**Missing values.** A field that is absent or null is *unknown*, never 0 and never "ok".
A comparison or arithmetic with an unknown operand is unknown; ``and``/``or``/``not``
follow three-valued (Kleene) logic, so ``true or unknown`` is true but
``false or unknown`` and ``not unknown`` stay unknown. A condition that ends unknown
does not hold *and* is reported as "cannot evaluate" with the fields that were missing.
``x == null`` and ``x != null`` are the explicit presence tests (always known).

Booleans compare equal to the numbers 1 and 0 (``target_up == 0`` works whether
``target_up`` is a number or a bool). Division by zero is unknown.

Every error carries the 1-based ``column`` of the offending token.

**Depth.** At most ``MAX_DEPTH`` levels of nesting — brackets, ``not``, unary ``-``, and
the operands of one chain of ``+ - * /`` — so that parsing, checking and evaluating
(all recursive) stay far from Python's stack limit; deeper is an error at the column
where the limit is crossed. ``and``/``or`` chains are flat and may be any length.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias, cast

__all__ = [
    "Compare",
    "MAX_DEPTH",
    "ExprError",
    "Node",
    "Result",
    "evaluate",
    "first_comparison_operand",
    "names",
    "parse",
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


# --- tokens -------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<number>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
  | (?P<op>==|!=|<=|>=|<|>|\(|\)|\[|\]|,|\+|-|\*|/)
    """,
    re.VERBOSE,
)
_KEYWORDS = {"and", "or", "not", "in", "true", "false", "null"}
_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'"}


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # number, string, name, keyword, op, end
    text: str
    column: int


def tokenize(text: str) -> list[Token]:
    """Split a condition into tokens; an unknown character is an error at its column."""
    out: list[Token] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            ch = text[pos]
            hint = " (use 'and', 'or', 'not')" if ch in "&|!=" else ""
            if ch in "\"'":
                raise ExprError("unterminated string", pos + 1)
            raise ExprError(f"unexpected character {ch!r}{hint}", pos + 1)
        kind = m.lastgroup or ""
        if kind != "space":
            value = m.group()
            if kind == "name" and value in _KEYWORDS:
                kind = "keyword"
            out.append(Token(kind, value, pos + 1))
        pos = m.end()
    out.append(Token("end", "", len(text) + 1))
    return out


# --- syntax tree --------------------------------------------------------------------------


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

_COMPARE_OPS = {"==", "!=", "<", "<=", ">", ">="}


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = tokenize(text)
        self.i = 0
        self.depth = 0

    def deeper(self, tok: Token) -> None:
        """Enter one nesting level at ``tok``; an error past ``MAX_DEPTH``."""
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ExprError(f"nested deeper than {MAX_DEPTH} levels", tok.column)

    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def take(self) -> Token:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def at(self, kind: str, text: str | None = None) -> bool:
        return self.tok.kind == kind and (text is None or self.tok.text == text)

    def expect(self, kind: str, text: str, what: str) -> Token:
        if not self.at(kind, text):
            raise ExprError(f"expected {what}, found {_describe(self.tok)}", self.tok.column)
        return self.take()

    def parse(self) -> Node:
        if self.at("end"):
            raise ExprError("empty condition", 1)
        node = self.or_()
        if not self.at("end"):
            raise ExprError(f"unexpected {_describe(self.tok)}", self.tok.column)
        return node

    def or_(self) -> Node:
        first = self.and_()
        items = [first]
        while self.at("keyword", "or"):
            self.take()
            items.append(self.and_())
        return first if len(items) == 1 else Logic("or", tuple(items), _column(first))

    def and_(self) -> Node:
        first = self.not_()
        items = [first]
        while self.at("keyword", "and"):
            self.take()
            items.append(self.not_())
        return first if len(items) == 1 else Logic("and", tuple(items), _column(first))

    def not_(self) -> Node:
        if self.at("keyword", "not"):
            tok = self.take()
            self.deeper(tok)
            node = Not(self.not_(), tok.column)
            self.depth -= 1
            return node
        return self.compare()

    def compare(self) -> Node:
        left = self.sum_()
        op = self._compare_op()
        if op is None:
            return left
        tok, text = op
        right = self.sum_()
        node = Compare(text, left, right, tok.column)
        if self._compare_op() is not None:
            column = self.tokens[self.i - 1].column
            raise ExprError("comparisons cannot be chained: join them with 'and'", column)
        return node

    def _compare_op(self) -> tuple[Token, str] | None:
        if self.tok.kind == "op" and self.tok.text in _COMPARE_OPS:
            tok = self.take()
            return tok, tok.text
        if self.at("keyword", "in"):
            tok = self.take()
            return tok, "in"
        if self.at("keyword", "not") and self.tokens[self.i + 1].text == "in":
            tok = self.take()
            self.take()
            return tok, "not in"
        return None

    def sum_(self) -> Node:
        node = self.product()
        while self.tok.kind == "op" and self.tok.text in ("+", "-"):
            tok = self.take()
            node = Arith(tok.text, node, self.product(), tok.column)
        return node

    def product(self) -> Node:
        node = self.unary()
        while self.tok.kind == "op" and self.tok.text in ("*", "/"):
            tok = self.take()
            node = Arith(tok.text, node, self.unary(), tok.column)
        return node

    def unary(self) -> Node:
        if self.at("op", "-"):
            tok = self.take()
            self.deeper(tok)
            node = Neg(self.unary(), tok.column)
            self.depth -= 1
            return node
        return self.atom()

    def atom(self) -> Node:
        tok = self.tok
        if tok.kind == "number":
            self.take()
            return Literal(float(tok.text), tok.column)
        if tok.kind == "string":
            self.take()
            return Literal(_unquote(tok), tok.column)
        if tok.kind == "keyword" and tok.text in ("true", "false", "null"):
            self.take()
            return Literal({"true": True, "false": False, "null": None}[tok.text], tok.column)
        if tok.kind == "name":
            self.take()
            return Name(tok.text, tok.column)
        if self.at("op", "("):
            self.deeper(self.take())
            node = self.or_()
            self.expect("op", ")", "')'")
            self.depth -= 1
            return node
        if self.at("op", "["):
            self.deeper(self.take())
            items: list[Node] = []
            if not self.at("op", "]"):
                items.append(self.or_())
                while self.at("op", ","):
                    self.take()
                    items.append(self.or_())
            self.expect("op", "]", "',' or ']'")
            self.depth -= 1
            return ListLit(tuple(items), tok.column)
        raise ExprError(f"expected a value, found {_describe(tok)}", tok.column)


def _describe(tok: Token) -> str:
    return "end of condition" if tok.kind == "end" else repr(tok.text)


def _unquote(tok: Token) -> str:
    body = tok.text[1:-1]
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\":
            nxt = body[i + 1]
            if nxt not in _ESCAPES:
                raise ExprError(f"unknown escape '\\{nxt}' in string", tok.column + i + 1)
            out.append(_ESCAPES[nxt])
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _column(node: Node) -> int:
    return node.column


def parse(text: str) -> Node:
    """Parse a condition into its syntax tree; :class:`ExprError` names the column."""
    node = _Parser(text).parse()
    deep = _too_deep(node)
    if deep is not None:
        raise ExprError(f"nested deeper than {MAX_DEPTH} levels", deep.column)
    return node


def _children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, ListLit | Logic):
        return node.items
    if isinstance(node, Neg | Not):
        return (node.operand,)
    if isinstance(node, Arith | Compare):
        return (node.left, node.right)
    return ()


def _too_deep(node: Node) -> Node | None:
    """A node more than ``MAX_DEPTH`` levels below the root (a long ``+`` chain is
    left-deep), or None; walked with a list, not recursion, since the tree may be deep."""
    stack = [(node, 0)]
    while stack:
        n, depth = stack.pop()
        if depth > MAX_DEPTH:
            return n
        stack.extend((child, depth + 1) for child in _children(n))
    return None


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


# --- static types -------------------------------------------------------------------------
# "number", "string", "bool", "list", "null" and "any" (a value only known at run time).
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


# --- evaluation ---------------------------------------------------------------------------


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
