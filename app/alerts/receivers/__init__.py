"""Receivers: one module per kind behind the :class:`Notifier` protocol.

* :mod:`.alertmanager` — Alertmanager API v2, the newest state of many alerts per post;
* :mod:`.webhook` — a generic webhook with Alertmanager's webhook payload;
* :mod:`.slack` — a Slack incoming webhook, escaped;
* :mod:`.http` — what they share: posting JSON and the typed (retry, error) result.

Bodies are built when a notification is written to the outbox (:meth:`Notifier.payload`,
so what is retried is exactly what was decided) and posted by the outbox's sender
(:meth:`Notifier.batch`, :meth:`Notifier.send`), which knows no kind.

Adding a kind: a module here with a class that has ``kind``, ``batches``, ``payload``
(and a constructor taking the URL), one line in :data:`KINDS`, and its list of URLs in
``app.config.ReceiversConfig`` under the same name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import httpx

from app.alerts.receivers.alertmanager import Alertmanager
from app.alerts.receivers.http import DeliveryError, DeliveryErrorKind, DeliveryResult
from app.alerts.receivers.slack import Slack
from app.alerts.receivers.webhook import Webhook
from app.alerts.state import Alert
from app.config import ReceiversConfig

__all__ = [
    "KINDS",
    "DeliveryError",
    "DeliveryErrorKind",
    "DeliveryResult",
    "Notifier",
    "receivers_from_config",
]


class Notifier(Protocol):
    """One configured destination. ``id`` is safe to log and store; its URL is not."""

    @property
    def id(self) -> str:
        """``kind-<hash of the URL>``: names the receiver in outbox rows, logs, health."""
        ...

    @property
    def kind(self) -> str:
        """Its section under ``alerts.receivers``; the label of its metrics."""
        ...

    @property
    def batches(self) -> bool:
        """True: it takes updates (the newest state of each alert, many per post).
        False: it takes events (firing, resolved), one per post, in order per alert."""
        ...

    def payload(self, alert: Alert, state: str, *, external_url: str) -> Any:
        """The JSON body of one notification, stored in the outbox row."""
        ...

    def batch(self, bodies: Sequence[Any]) -> Any:
        """What is posted for the stored bodies sent together (one, unless ``batches``)."""
        ...

    async def send(self, client: httpx.AsyncClient, body: Any, *, timeout: float) -> DeliveryResult:
        """Post ``body``; ``(retry, error)`` — 5xx, 429 and timeouts retry, other 4xx not."""
        ...


# A section of ``alerts.receivers`` → the kind that its URLs are built as, in the order
# receivers are listed.
KINDS: Mapping[str, Callable[[str], Notifier]] = {
    Alertmanager.kind: Alertmanager,
    Webhook.kind: Webhook,
    Slack.kind: Slack,
}


def receivers_from_config(cfg: ReceiversConfig) -> list[Notifier]:
    """One notifier per configured URL, by kind; a URL listed twice is one receiver."""
    out: list[Notifier] = []
    for section, build in KINDS.items():
        urls: list[str] = getattr(cfg, section)
        for url in urls:
            receiver = build(url)
            if all(r.id != receiver.id for r in out):
                out.append(receiver)
    return out
