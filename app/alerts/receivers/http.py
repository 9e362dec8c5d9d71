"""Posting a JSON body to a receiver, and what a failed post means.

A post returns a :class:`DeliveryResult` ``(retry, error)`` as Alertmanager's
``notify/`` does: ``(False, None)`` delivered; 5xx, 429, timeouts and connection errors
are worth retrying; other 4xx (and redirects, which are not followed) are not — the
receiver refused the body and will refuse it again. ``error`` is a
:class:`DeliveryError`: its ``kind`` (:class:`DeliveryErrorKind`) for health pages and
its ``message`` for logs and the outbox row.

Receiver URLs can carry secrets (a Slack webhook is its own key): they never appear in
an error message, a log line or a ``repr``; receivers are named by kind and a hash of
the URL (:func:`receiver_id`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, NamedTuple

import httpx

__all__ = [
    "DeliveryError",
    "DeliveryErrorKind",
    "DeliveryResult",
    "JsonReceiver",
    "post_json",
    "receiver_id",
]


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


class DeliveryResult(NamedTuple):
    """``(retry, error)``: ``(False, None)`` when delivered."""

    retry: bool
    error: DeliveryError | None


DELIVERED = DeliveryResult(False, None)


def _failed(error: DeliveryError) -> DeliveryResult:
    return DeliveryResult(error.retry, error)


async def post_json(
    client: httpx.AsyncClient,
    url: str,
    body: Any,
    *,
    timeout: float,
    headers: Mapping[str, str] | None = None,
) -> DeliveryResult:
    """POST ``body`` as JSON; ``(retry, error)`` — ``(False, None)`` on success."""
    try:
        resp = await client.post(
            url, json=body, timeout=timeout, headers=dict(headers or {}), follow_redirects=False
        )
    except httpx.TimeoutException:
        return _failed(DeliveryError(DeliveryErrorKind.TIMEOUT, "timeout"))
    except httpx.TransportError as exc:
        # The message of a connection error never holds the URL; its class says enough.
        kind = (
            DeliveryErrorKind.CONNECT
            if isinstance(exc, httpx.ConnectError)
            else DeliveryErrorKind.TRANSPORT
        )
        return _failed(DeliveryError(kind, type(exc).__name__))
    if resp.is_success:
        return DELIVERED
    return _failed(DeliveryError.from_status(resp.status_code, resp.text[:200].replace("\n", " ")))


def receiver_id(kind: str, url: str) -> str:
    """``kind-<hash>``: stable across restarts and list reorderings, reveals nothing."""
    return f"{kind}-{hashlib.sha256(url.encode()).hexdigest()[:12]}"


@dataclass(frozen=True, slots=True)
class JsonReceiver:
    """A receiver that POSTs one JSON body to its URL; the kinds subclass it.

    A subclass sets ``kind`` (its section under ``alerts.receivers``), ``batches`` and
    :meth:`payload`, and :meth:`batch` or :attr:`post_url` where they differ. ``id``
    defaults to :func:`receiver_id`; ``url`` stays out of the ``repr``.
    """

    kind: ClassVar[str] = ""
    batches: ClassVar[bool] = False

    url: str = field(repr=False)
    id: str = ""

    def __post_init__(self) -> None:
        if not self.id:
            object.__setattr__(self, "id", receiver_id(self.kind, self.url))

    @property
    def post_url(self) -> str:
        return self.url

    def batch(self, bodies: Sequence[Any]) -> Any:
        """What is posted for rows sent together: one event body is posted alone."""
        return bodies[0]

    async def send(self, client: httpx.AsyncClient, body: Any, *, timeout: float) -> DeliveryResult:
        return await post_json(client, self.post_url, body, timeout=timeout)
