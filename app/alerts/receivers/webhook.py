"""A generic webhook: Alertmanager's webhook body (version 4), one alert per post.

Labels are data and go as they are (JSON encodes them); annotations are text for
people, shown on their lines with control characters escaped (:mod:`app.alerts.shown`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from app.alerts.receivers.alertmanager import generator_url, rfc3339, starts_at
from app.alerts.receivers.http import JsonReceiver
from app.alerts.shown import shown_annotations
from app.alerts.state import Alert

__all__ = ["RECEIVER_NAME", "Webhook", "webhook_payload"]

# The ``receiver`` Alertmanager would name in the body: the route's receiver.
RECEIVER_NAME = "phasewatch"


def _webhook_alert(alert: Alert, state: str) -> dict[str, Any]:
    ends = alert.resolved_at if state == "resolved" else None
    return {
        "status": state,
        "labels": dict(alert.labels),
        "annotations": shown_annotations(alert.annotations),
        "startsAt": rfc3339(starts_at(alert)),
        "endsAt": rfc3339(ends) if ends is not None else "0001-01-01T00:00:00Z",
        "generatorURL": generator_url(alert),
        "fingerprint": alert.fingerprint,
    }


def webhook_payload(alert: Alert, state: str, *, external_url: str) -> dict[str, Any]:
    """Alertmanager's webhook body (version 4) for one alert in one state."""
    labels = dict(alert.labels)
    group = {"alertname": alert.rule}
    group_key = f'{{}}:{{alertname="{alert.rule}",fingerprint="{alert.fingerprint}"}}'
    return {
        "version": "4",
        "groupKey": group_key,
        "truncatedAlerts": 0,
        "status": state,
        "receiver": RECEIVER_NAME,
        "groupLabels": group,
        "commonLabels": labels,
        "commonAnnotations": shown_annotations(alert.annotations),
        "externalURL": external_url,
        "alerts": [_webhook_alert(alert, state)],
    }


@dataclass(frozen=True, slots=True)
class Webhook(JsonReceiver):
    """A URL that takes events (firing, resolved) in order, one alert per post."""

    kind: ClassVar[str] = "webhook"

    def payload(self, alert: Alert, state: str, *, external_url: str) -> Any:
        return webhook_payload(alert, state, external_url=external_url)
