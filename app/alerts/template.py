"""Annotation templates: ``{{ name }}`` and ``{{ name | filter }}``, nothing more.

``name`` is ``value`` (the rule's value), ``labels.<label>`` (the alert's labels) or
any rule field (``ttft_p99``, ``summary``, ``hints``, ``ui_url``…). Filters format
numbers for people: ``seconds`` (``470 ms``, ``2.47 s``), ``percent`` (``96%``),
``number`` (three significant digits), ``duration`` (``45s``, ``5m 15s``, ``1h 2m``: how
long a condition has held, ``active_for``). An unknown or null value renders ``n/a``.
Templates are parsed when the rules load, so a typo fails there, not at 3 a.m.

A value rendered is shown safely (:mod:`app.alerts.shown`): a value a target wrote
(``model_name``, ``labels.model_name``: scraped from its page) is set apart as a code
span on one line, `` `llama` ``; any other value keeps its line breaks (a diagnosis' hints
are lines) with every other control character escaped. The template's own text is the
rule author's, as written. Each receiver escapes the rest for its own format (Slack's
``& < >`` in :func:`app.alerts.receivers.slack.slack_escape`; JSON by JSON encoding).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from app.alerts.shown import set_apart, shown_lines

__all__ = ["FILTERS", "TARGET_WRITTEN", "Template", "TemplateError", "parse_template"]

_PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*$")
# The names whose values a target wrote (scraped from its page): set apart when shown.
TARGET_WRITTEN = frozenset({"model_name", "labels.model_name"})


class TemplateError(ValueError):
    """A template that cannot be parsed; ``column`` is 1-based within the template."""

    def __init__(self, message: str, column: int) -> None:
        super().__init__(f"column {column}: {message}")
        self.message = message
        self.column = column


def _number(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"


def _seconds(v: float) -> str:
    return f"{v * 1000:.0f} ms" if abs(v) < 1 else f"{v:.2f} s"


def _percent(v: float) -> str:
    return f"{v:.0%}"


def _duration(v: float) -> str:
    s = max(0, round(v))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60}s"
    return f"{s // 3600}h {s % 3600 // 60}m"


FILTERS: dict[str, Callable[[float], str]] = {
    "duration": _duration,
    "number": _number,
    "seconds": _seconds,
    "percent": _percent,
}


def render_value(value: Any, flt: str | None = None) -> str:
    """One value as text: numbers through the filter, lists joined, null as ``n/a``."""
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return FILTERS[flt or "number"](float(value))
    if isinstance(value, list):
        return ", ".join(render_value(v) for v in value) or "none"
    return str(value)


@dataclass(frozen=True, slots=True)
class Template:
    """A parsed template: literal text and ``(name, filter)`` placeholders in turn."""

    source: str
    parts: tuple[str | tuple[str, str | None], ...]

    @property
    def names(self) -> list[tuple[str, int]]:
        """The names it reads, with their 1-based column in the source."""
        out = []
        for m in _PLACEHOLDER.finditer(self.source):
            out.append((m.group(1).split("|")[0].strip(), m.start() + 1))
        return out

    def render(self, context: Mapping[str, Any]) -> str:
        out: list[str] = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
            else:
                name, flt = part
                value = context.get(name)
                text = render_value(value, flt)
                written = value is not None and name in TARGET_WRITTEN
                out.append(set_apart(text) if written else shown_lines(text))
        return "".join(out)


def parse_template(source: str) -> Template:
    """Parse ``source``; :class:`TemplateError` names the column of a bad placeholder."""
    parts: list[str | tuple[str, str | None]] = []
    pos = 0
    for m in _PLACEHOLDER.finditer(source):
        if m.start() > pos:
            parts.append(source[pos : m.start()])
        inner = m.group(1)
        name, _, flt = inner.partition("|")
        name, flt = name.strip(), flt.strip()
        if not _NAME.match(name):
            raise TemplateError(f"{{{{{inner}}}}} needs a field name", m.start() + 1)
        if "|" in inner and flt not in FILTERS:
            raise TemplateError(
                f"unknown filter {flt!r} (known: {', '.join(sorted(FILTERS))})", m.start() + 1
            )
        parts.append((name, flt or None))
        pos = m.end()
    rest = source[pos:]
    if "{{" in rest or "}}" in rest:
        col = pos + 1 + (rest.find("{{") if "{{" in rest else rest.find("}}"))
        raise TemplateError("unbalanced '{{' or '}}'", col)
    if rest:
        parts.append(rest)
    return Template(source, tuple(parts))
