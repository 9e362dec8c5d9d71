"""What a notification may show of a value a target wrote: one line, set apart.

A scraped value (a ``model_name`` label, anything from the page) is the target's text,
not phasewatch's. Shown in a Slack message, a webhook's annotations or a log line, it
must not add lines of its own (``"m\\nFAKE LOG LINE level=ERROR"``), nor format itself
(``*bold*``), nor look like phasewatch's own words. So, everywhere a person reads it:

* control characters (C0, DEL, C1, U+2028/U+2029) are shown escaped, ``\\n``, ``\\x1b``,
  ``\\u2028``, by the one definition the logs use (:func:`app.logs.escape_controls`);
* a target's value is set apart as a code span, `` `m` ``, its own backticks replaced by a
  look-alike (U+02CB) so that it cannot close the span; inside a code span Slack applies
  no formatting.

Text phasewatch composed (a diagnosis' hints, a rule's description) keeps its line
breaks; each of its lines is escaped like a value. Escaping is idempotent: text shown
once shows the same again. Structured values (labels in a JSON body) stay as they are.
"""

from __future__ import annotations

from collections.abc import Mapping

from app.logs import escape_controls

__all__ = ["BACKTICK_LOOKALIKE", "set_apart", "shown", "shown_annotations", "shown_lines"]

BACKTICK_LOOKALIKE = "\u02cb"  # MODIFIER LETTER GRAVE ACCENT


def shown(text: str) -> str:
    """``"a\\nb"`` → ``"a\\\\nb"``: on one line, every control character escaped."""
    return escape_controls(text)


def shown_lines(text: str) -> str:
    """Text phasewatch composed: its ``\\n`` line breaks kept, any other control
    character escaped (``\\r``, U+2028 too: some readers take them for line breaks)."""
    return "\n".join(shown(line) for line in text.split("\n"))


def set_apart(text: str) -> str:
    """A target's value as a code span on one line: ``"*m*\\n`x`"`` → ``"`*m*\\\\nˋxˋ`"``."""
    return "`" + shown(text).replace("`", BACKTICK_LOOKALIKE) + "`"


def shown_annotations(annotations: Mapping[str, str]) -> dict[str, str]:
    """Annotations (text for people) with :func:`shown_lines` applied to each."""
    return {k: shown_lines(v) for k, v in annotations.items()}
