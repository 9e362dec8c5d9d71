"""Alertmanager, API v2: the current state of many alerts in one ``POST /api/v2/alerts``.

Also the alert as Alertmanager spells it (:func:`rfc3339` times, ``startsAt``,
``generatorURL``), which its webhook payload (:mod:`.webhook`) repeats.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar

from app.alerts.receivers.http import JsonReceiver
from app.alerts.shown import shown_annotations
from app.alerts.state import Alert

__all__ = ["Alertmanager", "alertmanager_alert", "generator_url", "rfc3339", "starts_at"]


def rfc3339(ts: float) -> str:
    """Unix seconds → ``2026-11-29T08:00:00.000Z``."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def generator_url(alert: Alert) -> str:
    return alert.annotations.get("ui_url", "")


def starts_at(alert: Alert) -> float:
    return alert.fired_at if alert.fired_at is not None else alert.active_at


def alertmanager_alert(alert: Alert, state: str) -> dict[str, Any]:
    """One element of ``POST /api/v2/alerts``. Firing alerts carry no ``endsAt`` (the
    Alertmanager resolves them after its ``resolve_timeout`` if we stop re-sending);
    resolved ones carry the time they resolved. Annotations are shown safely
    (:func:`app.alerts.shown.shown_annotations`); labels go as they are."""
    body: dict[str, Any] = {
        "labels": dict(alert.labels),
        "annotations": shown_annotations(alert.annotations),
        "startsAt": rfc3339(starts_at(alert)),
        "generatorURL": generator_url(alert),
    }
    if state == "resolved" and alert.resolved_at is not None:
        body["endsAt"] = rfc3339(alert.resolved_at)
    return body


@dataclass(frozen=True, slots=True)
class Alertmanager(JsonReceiver):
    """An Alertmanager base URL; ``/api/v2/alerts`` is appended. It takes updates: the
    newest state of each alert, re-sent while firing, many alerts in one post."""

    kind: ClassVar[str] = "alertmanager"
    batches: ClassVar[bool] = True

    @property
    def post_url(self) -> str:
        return self.url.rstrip("/") + "/api/v2/alerts"

    def payload(self, alert: Alert, state: str, *, external_url: str) -> Any:
        return alertmanager_alert(alert, state)

    def batch(self, bodies: Sequence[Any]) -> Any:
        """A JSON array of the alerts."""
        return list(bodies)
