"""Markdown that reads as written: each value escaped for the place it goes (pure).

A summary is pasted into GitHub, Slack or a wiki, so it must read as plain prose:
``TTFT p99 7.28 s > 2.00 s``, ``(waiting avg 1,332)`` and ``queue_bound`` need nothing,
and HTML entities or backslashes before every punctuation mark would show as noise in
half of those places. Each context escapes only what would start markup there
(CommonMark, with GitHub's tables, strikethrough, autolinks and math):

* :func:`code` — an identifier that comes from outside (a model or target name, a
  source URL): a code span, whose content no renderer reads as markup, link or HTML.
* :func:`text` — prose, ours or quoting outside values (an alert's summary names its
  labels): only what starts markup where it stands.
* :func:`cell` — a table cell's content, already made of the two above: ``|`` and line
  breaks, the only things that end a cell.

Edge cases: a backtick inside :func:`code` gets a longer fence (and a space inside it
when the value starts or ends with a backtick); an empty value is ``""`` in a code span,
so a missing name still shows; line breaks become spaces everywhere (a value never
opens a block) and any other control character is shown escaped, ``\\x1b``, as the
logs show it (``app.logs.escape_controls``); a bare ``http://`` or ``www.`` in
:func:`text` is escaped so GitHub does not make it a link.
"""

from __future__ import annotations

import re

from app.logs import escape_controls

__all__ = ["cell", "code", "text"]

_ASCII_PUNCT = r"""!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~"""
# Anywhere in a line: a backslash that would escape what follows; emphasis, code and
# strikethrough runs; math; a link or image opener; an HTML tag, comment or autolink; an
# entity reference; a bare URL GitHub would link.
_INLINE = re.compile(
    rf"\\(?=[{_ASCII_PUNCT}])"
    r"|[`*~$\[]"
    r"|<(?=[A-Za-z/!?])"
    r"|&(?=#?[A-Za-z0-9]+;)"
    r"|(?<=[A-Za-z])://"
    r"|(?<![\w.])www\."
)
# At the start of a line only: a heading, a quote, a bullet, a thematic break or setext
# underline, an ordered item (its ``.`` or ``)`` is escaped, not the number).
_LINE_START = re.compile(r"^(?:#{1,6}(?=\s|$)|>|[-+](?=\s|$)|[-=][-=\s]*$)")
_ORDERED = re.compile(r"^(\d{1,9})(?=[.)](?:\s|$))")


def _flat(value: object) -> str:
    return escape_controls(" ".join(str(value).split()))


def _escape(m: re.Match[str]) -> str:
    s = m.group(0)
    if s == "://":
        return r"\://"
    if s == "www.":
        return r"www\."
    return "\\" + s


def _underscore(s: str) -> str:
    """``_`` escaped unless inside a word (``queue_bound`` is never emphasis)."""
    out = []
    for i, ch in enumerate(s):
        if ch == "_":
            inside = 0 < i < len(s) - 1 and s[i - 1].isalnum() and s[i + 1].isalnum()
            out.append("_" if inside else "\\_")
        else:
            out.append(ch)
    return "".join(out)


def text(value: object, *, line_start: bool = False) -> str:
    """Prose as Markdown inline text: ``>``, parentheses and ``snake_case`` left as they
    are; ``line_start`` when it begins a line (a leading ``#``, ``>``, ``-``, ``1.``…
    would open a block)."""
    s = _underscore(_INLINE.sub(_escape, _flat(value)))
    if line_start:
        s = "\\" + s if _LINE_START.match(s) else _ORDERED.sub(r"\1\\", s, count=1)
    return s


def code(value: object) -> str:
    """An outside identifier as a code span: nothing in it is markup."""
    s = _flat(value)
    if not s:
        return '`""`'
    fence = "`" * (max((len(r) for r in re.findall(r"`+", s)), default=0) + 1)
    pad = " " if s[0] == "`" or s[-1] == "`" else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def cell(markdown: str) -> str:
    """Markdown (already escaped for inline use) inside a table cell."""
    return _flat(markdown).replace("|", "\\|")
