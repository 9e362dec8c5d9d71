"""Condition text → syntax tree: a tokenizer and a recursive-descent parser.

The grammar and what each error names: :mod:`app.alerts.expr`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.alerts.expr.tree import (
    MAX_DEPTH,
    Arith,
    Compare,
    ExprError,
    ListLit,
    Literal,
    Logic,
    Name,
    Neg,
    Node,
    Not,
    children,
)

__all__ = ["Token", "parse", "tokenize"]

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


def _too_deep(node: Node) -> Node | None:
    """A node more than ``MAX_DEPTH`` levels below the root (a long ``+`` chain is
    left-deep), or None; walked with a list, not recursion, since the tree may be deep."""
    stack = [(node, 0)]
    while stack:
        n, depth = stack.pop()
        if depth > MAX_DEPTH:
            return n
        stack.extend((child, depth + 1) for child in children(n))
    return None
