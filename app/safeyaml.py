"""YAML for configuration and rule files: safe types, bounded nesting, one-line errors.

* Safe types only (PyYAML's ``SafeLoader``): a ``!!python/object`` tag is an error, not
  an object.
* At most ``MAX_DEPTH`` levels of nesting. PyYAML composes and constructs nodes
  recursively, so a file nested thousands deep would exhaust Python's stack; deeper
  than this is an error at the node that goes one level too far. No file phasewatch
  reads needs more than a handful of levels.
* At most ``MAX_ALIASES`` alias uses (``*name``): composed nodes are shared, but
  whatever walks the data afterwards (validation, secrets collection) visits every
  path, so a "billion laughs" file of nested aliases would cost exponential time there.
* Every error is one line, ``SOURCE:LINE:COLUMN: what`` (1-based), from the mark PyYAML
  gives (the problem's, else the context's; ``1:1`` when it gives none).
"""

from __future__ import annotations

from typing import Any, cast

import yaml
from yaml.composer import ComposerError
from yaml.error import Mark

__all__ = ["MAX_ALIASES", "MAX_DEPTH", "Loader", "YamlError", "error_from", "load"]

MAX_DEPTH = 100
MAX_ALIASES = 100


class YamlError(ValueError):
    """A YAML text that cannot be read; ``str()`` is ``SOURCE:LINE:COLUMN: message``."""

    def __init__(self, source: str, line: int, column: int, message: str) -> None:
        super().__init__(f"{source}:{line}:{column}: {message}")
        self.source = source
        self.line = line
        self.column = column
        self.message = message


class Loader(yaml.SafeLoader):
    """``SafeLoader`` that refuses nesting deeper than :data:`MAX_DEPTH`."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._aliases = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self._depth >= MAX_DEPTH:
            event = self.peek_event()  # type: ignore[no-untyped-call]
            mark = cast(Mark, event.start_mark)
            raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", mark)
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                mark = cast(Mark, self.peek_event().start_mark)  # type: ignore[no-untyped-call]
                raise ComposerError(None, None, f"more than {MAX_ALIASES} aliases", mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _what(text: str) -> str:
    return "not valid YAML: " + " ".join(text.split())


def error_from(exc: yaml.YAMLError, source: str) -> YamlError:
    """PyYAML's (multi-line) error as one :class:`YamlError` naming the position."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        what = " ".join(p for p in (exc.context, exc.problem) if p) or str(exc)
        if mark is not None:
            return YamlError(source, mark.line + 1, mark.column + 1, _what(what))
        return YamlError(source, 1, 1, _what(what))
    return YamlError(source, 1, 1, _what(str(exc)))


def load(text: str, source: str) -> Any:
    """The single document in ``text`` as Python data; :class:`YamlError` if it is not
    valid, safe, or shallow enough."""
    loader = Loader(text)
    try:
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        raise error_from(exc, source) from None
    finally:
        loader.dispose()
