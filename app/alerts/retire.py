"""Alerts of targets that were removed: resolved at once, saying why. Pure, time passed in.

A target that leaves the list (``file_sd``, ``http_sd``, a reload) is no longer scraped,
so nothing more can be said of it: its alerts must not stay firing for
``keep_firing_for``, nor hang on a target nobody watches. :func:`retire` resolves each
firing alert whose ``target`` label names a removed target at ``now`` with the
annotation ``resolution: target removed`` (receivers hear "resolved" with it, once, as
for any resolved alert), and drops its pending ones (never notified). The other alerts
keep their state. SLO and fleet alerts carry no ``target`` label and are not touched.

If the target comes back and its condition holds again, a new episode starts from
pending, as after any resolution.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from app.alerts.state import Alert, AlertState, Transition

__all__ = ["REMOVED", "RESOLUTION", "retire"]

RESOLUTION = "resolution"
REMOVED = "target removed"


def retire(
    alerts: Mapping[str, Alert], gone: Callable[[str], bool], now: float
) -> tuple[dict[str, Alert], list[Transition]]:
    """``alerts`` with those of removed targets (``gone(target)``) resolved or dropped,
    and the transitions that says."""
    out: dict[str, Alert] = {}
    transitions: list[Transition] = []
    for fp, alert in alerts.items():
        target = alert.labels.get("target")
        if alert.state == AlertState.INACTIVE or not target or not gone(target):
            out[fp] = alert
            continue
        notes = {**alert.annotations, RESOLUTION: REMOVED}
        previous = str(alert.state)
        resolved = replace(
            alert,
            state=AlertState.INACTIVE,
            annotations=notes,
            resolved_at=now,
            keep_firing_since=None,
            last_eval=now,
        )
        if alert.state == AlertState.FIRING:
            out[fp] = resolved
        transitions.append(
            Transition(
                fp, alert.rule, "resolved", now, previous, dict(alert.labels), notes, alert.value
            )
        )
    return out, transitions
