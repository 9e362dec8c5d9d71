"""Notifiers: Alertmanager API v2, a generic webhook (Alertmanager's payload), Slack.

Bodies are built when a notification is written to the outbox (so what is retried is
exactly what was decided) and posted by the sender. A post returns ``(retry, error)``
as Alertmanager's ``notify/`` does: ``(False, None)`` delivered; 5xx, 429, timeouts and
connection errors are worth retrying; other 4xx (and redirects, which are not followed)
are not — the receiver refused the body and will refuse it again. ``error`` is a
:class:`DeliveryError`: its ``kind`` (:class:`DeliveryErrorKind`) for health pages and
its ``message`` for logs and the outbox row.

Receiver URLs can carry secrets (a Slack webhook is its own key): they never appear in
an error message or a log line; receivers are named by kind and a hash of the URL.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import httpx

from app.alerts.state import Alert
from app.config import ReceiversConfig

__all__ = [
    "ALERTMANAGER",
    "SLACK",
    "WEBHOOK",
    "DeliveryError",
    "DeliveryErrorKind",
    "Receiver",
    "alertmanager_alert",
    "post_json",
    "receivers_from_config",
    "rfc3339",
    "slack_escape",
    "slack_message",
    "webhook_payload",
]

ALERTMANAGER = "alertmanager"
WEBHOOK = "webhook"
SLACK = "slack"
RECEIVER_NAME = "phasewatch"


@dataclass(frozen=True, slots=True)
class Receiver:
    """One configured destination. ``id`` is safe to log and store; ``url`` is not."""

    id: str
    kind: str
    url: str = field(repr=False)

    @property
    def post_url(self) -> str:
        if self.kind == ALERTMANAGER:
            return self.url.rstrip("/") + "/api/v2/alerts"
        return self.url

    @property
    def batches(self) -> bool:
        """Alertmanager takes the current state of many alerts in one post."""
        return self.kind == ALERTMANAGER


def receiver_id(kind: str, url: str) -> str:
    """``kind-<hash>``: stable across restarts and list reorderings, reveals nothing."""
    return f"{kind}-{hashlib.sha256(url.encode()).hexdigest()[:12]}"


def receivers_from_config(cfg: ReceiversConfig) -> list[Receiver]:
    out: list[Receiver] = []
    kinds = ((ALERTMANAGER, cfg.alertmanager), (WEBHOOK, cfg.webhook), (SLACK, cfg.slack))
    for kind, urls in kinds:
        for url in urls:
            rid = receiver_id(kind, url)
            if all(r.id != rid for r in out):
                out.append(Receiver(rid, kind, url))
    return out


def rfc3339(ts: float) -> str:
    """Unix seconds → ``2026-11-29T08:00:00.000Z``."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _generator_url(alert: Alert) -> str:
    return alert.annotations.get("ui_url", "")


def _starts_at(alert: Alert) -> float:
    return alert.fired_at if alert.fired_at is not None else alert.active_at


def alertmanager_alert(alert: Alert, state: str) -> dict[str, Any]:
    """One element of ``POST /api/v2/alerts``. Firing alerts carry no ``endsAt`` (the
    Alertmanager resolves them after its ``resolve_timeout`` if we stop re-sending);
    resolved ones carry the time they resolved."""
    body: dict[str, Any] = {
        "labels": dict(alert.labels),
        "annotations": dict(alert.annotations),
        "startsAt": rfc3339(_starts_at(alert)),
        "generatorURL": _generator_url(alert),
    }
    if state == "resolved" and alert.resolved_at is not None:
        body["endsAt"] = rfc3339(alert.resolved_at)
    return body


def _webhook_alert(alert: Alert, state: str) -> dict[str, Any]:
    ends = alert.resolved_at if state == "resolved" else None
    return {
        "status": state,
        "labels": dict(alert.labels),
        "annotations": dict(alert.annotations),
        "startsAt": rfc3339(_starts_at(alert)),
        "endsAt": rfc3339(ends) if ends is not None else "0001-01-01T00:00:00Z",
        "generatorURL": _generator_url(alert),
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
        "commonAnnotations": dict(alert.annotations),
        "externalURL": external_url,
        "alerts": [_webhook_alert(alert, state)],
    }


_SLACK_COLOUR = {"critical": "danger", "warning": "warning", "info": "#439FE0"}
_SLACK_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def slack_escape(text: str) -> str:
    """Text as Slack shows it literally: ``& < >`` as ``&amp; &lt; &gt;`` (Slack's
    formatting rules), so a scraped value cannot post ``<!channel>`` or a link."""
    return text.translate(_SLACK_ESCAPES)


def _slack_link(url: str, label: str) -> str:
    # A ``|`` or ``>`` in the URL would end it early; Slack decodes ``&amp;`` in links.
    return f"<{slack_escape(url).replace('|', '%7C')}|{slack_escape(label)}>"


def slack_message(alert: Alert, state: str) -> dict[str, Any]:
    """A Slack incoming-webhook message: a headline, the diagnosis, hints and a link.

    Every text is escaped (:func:`slack_escape`): labels, ``model_name`` and the
    annotations carry scraped values. The only markup is ours: the bold headline and
    the link to the UI.
    """
    labels = alert.labels
    where = labels.get("target", "")
    if labels.get("model_name"):
        where += f" / {labels['model_name']}"
    notes = alert.annotations
    head = slack_escape(f"[{state.upper()}] {alert.rule} — {where}")
    lines = [f"*{head}*", slack_escape(notes.get("summary", ""))]
    if state == "firing":
        if notes.get("diagnosis"):
            lines.append(slack_escape(f"Diagnosis: {notes['diagnosis']}"))
        if notes.get("hints"):
            lines.append(slack_escape("What to change:\n" + notes["hints"]))
    else:
        lines.append(f"Resolved at {rfc3339(alert.resolved_at or alert.last_eval)}")
    if notes.get("ui_url"):
        lines.append(_slack_link(notes["ui_url"], "Open in phasewatch"))
    text = "\n".join(line for line in lines if line)
    colour = "good" if state == "resolved" else _SLACK_COLOUR.get(labels.get("severity", ""), "")
    return {"text": text, "attachments": [{"color": colour, "fallback": head}]}


def event_body(receiver: Receiver, alert: Alert, state: str, *, external_url: str) -> Any:
    """The stored body of one notification for one receiver."""
    if receiver.kind == ALERTMANAGER:
        return alertmanager_alert(alert, state)
    if receiver.kind == SLACK:
        return slack_message(alert, state)
    return webhook_payload(alert, state, external_url=external_url)


def batch_body(receiver: Receiver, bodies: Sequence[Any]) -> Any:
    """What is posted for rows sent together (Alertmanager: a JSON array)."""
    return list(bodies) if receiver.batches else bodies[0]


class DeliveryErrorKind(StrEnum):
    """Why a post failed, for health pages."""

    TIMEOUT = "timeout"
    CONNECT = "connect"  # refused, unreachable
    TRANSPORT = "transport"  # the connection broke mid-answer
    HTTP_5XX = "http_5xx"
    HTTP_429 = "http_429"
    HTTP_4XX = "http_4xx"  # and redirects, which are not followed


# Worth another try: the receiver may answer later. The others refused the body itself.
_RETRYABLE = frozenset(
    {
        DeliveryErrorKind.TIMEOUT,
        DeliveryErrorKind.CONNECT,
        DeliveryErrorKind.TRANSPORT,
        DeliveryErrorKind.HTTP_5XX,
        DeliveryErrorKind.HTTP_429,
    }
)


@dataclass(frozen=True, slots=True)
class DeliveryError:
    """A failed post: its ``kind``, the HTTP ``status`` when the receiver answered, and a
    ``message`` safe to log and store (never the URL: it can carry a secret)."""

    kind: DeliveryErrorKind
    message: str
    status: int | None = None

    @property
    def retry(self) -> bool:
        return self.kind in _RETRYABLE

    def __str__(self) -> str:
        return self.message

    @classmethod
    def from_status(cls, status: int, detail: str = "") -> DeliveryError:
        """The error of a non-2xx answer (``detail``: the start of its body)."""
        if status >= 500:
            kind = DeliveryErrorKind.HTTP_5XX
        elif status == 429:
            kind = DeliveryErrorKind.HTTP_429
        else:
            kind = DeliveryErrorKind.HTTP_4XX
        message = f"HTTP {status}: {detail}" if detail else f"HTTP {status}"
        return cls(kind, message, status)


async def post_json(
    client: httpx.AsyncClient,
    url: str,
    body: Any,
    *,
    timeout: float,
    headers: Mapping[str, str] | None = None,
) -> tuple[bool, DeliveryError | None]:
    """POST ``body`` as JSON; return ``(retry, error)`` — ``(False, None)`` on success."""
    try:
        resp = await client.post(
            url, json=body, timeout=timeout, headers=dict(headers or {}), follow_redirects=False
        )
    except httpx.TimeoutException:
        error = DeliveryError(DeliveryErrorKind.TIMEOUT, "timeout")
        return error.retry, error
    except httpx.TransportError as exc:
        # The message of a connection error never holds the URL; its class says enough.
        kind = (
            DeliveryErrorKind.CONNECT
            if isinstance(exc, httpx.ConnectError)
            else DeliveryErrorKind.TRANSPORT
        )
        error = DeliveryError(kind, type(exc).__name__)
        return error.retry, error
    if resp.is_success:
        return False, None
    error = DeliveryError.from_status(resp.status_code, resp.text[:200].replace("\n", " "))
    return error.retry, error
