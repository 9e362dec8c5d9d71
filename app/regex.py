"""Regular expressions that come from users, matched in linear time with RE2.

Python's ``re`` backtracks: ``(.*.*)*\\d`` against forty characters with no digit runs
for longer than anyone will wait, so a silence (or any filter) holding such a pattern
froze the process at every evaluation, after every restart. RE2 — the engine of Go's
``regexp``, hence of Prometheus and Alertmanager — runs in time linear in the text and
refuses what it cannot do that way: backreferences (``\\1``) and lookaround (``(?=…)``,
``(?<!…)``). Every pattern taken from the API, a configuration or rule file, or a URL is
compiled here and nowhere else; patterns written in our own code keep ``re``.

Edge cases:

- matching is anchored at both ends (``fullmatch``), as Alertmanager's ``=~`` is: ``a|b``
  matches ``a`` and ``b``, not ``ab``; the empty pattern matches only the empty string;
- a pattern RE2 refuses, or that needs more than RE2's default program memory (8 MiB),
  is a ValueError carrying RE2's reason; so is a pattern that is not valid Unicode
  (a lone surrogate);
- a text with a lone surrogate is matched as its bytes (``surrogatepass``): it never
  raises, and ``.`` does not match the invalid bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import re2

__all__ = ["AnchoredRegex", "compile_anchored"]

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would print every refused pattern on stderr


@dataclass(frozen=True, slots=True)
class AnchoredRegex:
    """A compiled RE2 pattern that matches whole texts only."""

    pattern: str
    _compiled: Any = field(repr=False, compare=False)

    def matches(self, text: str) -> bool:
        try:
            return self._compiled.fullmatch(text) is not None
        except UnicodeEncodeError:
            return self._compiled.fullmatch(text.encode("utf-8", "surrogatepass")) is not None


def compile_anchored(pattern: str) -> AnchoredRegex:
    """Compile a user's pattern with RE2; ValueError says why RE2 refused it."""
    try:
        compiled = re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "invalid pattern"
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise ValueError(str(reason)) from None
    except UnicodeEncodeError:
        raise ValueError("the pattern is not valid Unicode (a lone surrogate)") from None
    return AnchoredRegex(pattern, compiled)
