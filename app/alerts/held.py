"""What an alert's condition held with over its episode (``Alert.held``): each text value
and the seconds it held, first seen first, and that as text for the annotations
(``app.alerts.state``)."""

from __future__ import annotations

from collections.abc import Sequence

from app.alerts import expr as ex
from app.alerts.template import render_value

__all__ = ["add_held", "held_text"]


def held_text(held: Sequence[tuple[str, float]]) -> str | None:
    """``queue_bound 4m 45s, prefill_bound 15s``; None when nothing was recorded."""
    if not held:
        return None
    return ", ".join(f"{v} {render_value(s, 'duration')}" for v, s in held)


def add_held(
    prev: tuple[tuple[str, float], ...], value: ex.Value, seconds: float
) -> tuple[tuple[str, float], ...]:
    """``prev`` with ``seconds`` more for a text ``value`` (numbers are not tracked)."""
    if not isinstance(value, str):
        return prev
    out = list(prev)
    for i, (v, s) in enumerate(out):
        if v == value:
            out[i] = (v, s + seconds)
            return tuple(out)
    return (*out, (value, seconds))
