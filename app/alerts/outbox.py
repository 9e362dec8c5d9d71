"""The durable outbox: notifications are rows in the store before anything is sent.

The evaluation job writes a row per receiver and notice in the same transaction as the
alert state, so a crash either loses both or keeps both; the sender (its own job, and
once at start-up) posts due rows and marks them. At least once: a row is marked only
after its receiver said 2xx, so a crash between the two sends it again — receivers
deduplicate by fingerprint as Alertmanager does. ``UNIQUE(receiver, dedup_key)`` keeps a
notice from being written twice.

Retries: 5xx, 429, timeouts and connection errors back off exponentially
(``retry_initial · 2^(attempts-1)``, capped at ``retry_max``); other 4xx are final
(``rejected``). Rows older than ``give_up_after`` are ``expired``. While a receiver is
failing, the sender leaves it alone until the failed row's next attempt.

Order: an event receiver (webhook, Slack) gets the rows of one alert in id order — a
"resolved" never overtakes its "firing". An update receiver (Alertmanager) gets only
the newest row of each alert, many alerts in one post; older rows are ``superseded``.
The sender knows no kind: a receiver says which it is (``batches``), what is posted for
rows sent together (``batch``) and how it is posted (``send``) — :mod:`app.alerts.receivers`.

The table and its SQL are the store's (:mod:`app.store.outbox`); this module sends.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import httpx

from app.alerts.receivers import DeliveryError, DeliveryErrorKind, DeliveryResult, Notifier
from app.store.outbox import NewRow, Outbox, OutboxRow

log = logging.getLogger(__name__)

__all__ = ["NewRow", "Outbox", "OutboxRow", "ReceiverHealth", "Sender", "backoff"]

BATCH_LIMIT = 500


@dataclass(frozen=True, slots=True)
class ReceiverHealth:
    """What the sender last heard from one receiver (this process only)."""

    last_attempt: float | None = None
    last_success: float | None = None
    last_error: str | None = None
    last_error_kind: DeliveryErrorKind | None = None
    last_error_at: float | None = None
    failures: int = 0  # in a row

    @property
    def ok(self) -> bool:
        return self.last_error_at is None or (
            self.last_success is not None and self.last_success >= self.last_error_at
        )


def backoff(attempts: int, initial: float, maximum: float) -> float:
    """Delay before the next try after ``attempts`` failures: 1, 2, 4, … × initial, capped."""
    return float(min(maximum, initial * 2 ** max(0, attempts - 1)))


class Sender:
    """Posts due outbox rows to their receivers; one :meth:`run_once` per tick."""

    def __init__(
        self,
        outbox: Outbox,
        receivers: Sequence[Notifier],
        client: httpx.AsyncClient,
        *,
        timeout: float = 10.0,
        retry_initial: float = 1.0,
        retry_max: float = 300.0,
        give_up_after: float = 86400.0,
        clock: Callable[[], float] = time.time,
        on_result: Callable[[Notifier, str], None] | None = None,
    ) -> None:
        self.outbox = outbox
        self.receivers = {r.id: r for r in receivers}
        self.client = client
        self.timeout = timeout
        self.retry_initial = retry_initial
        self.retry_max = retry_max
        self.give_up_after = give_up_after
        self.clock = clock
        self.on_result = on_result
        self.blocked_until: dict[str, float] = {}
        self.health: dict[str, ReceiverHealth] = {r.id: ReceiverHealth() for r in receivers}
        self._unknown_warned: set[str] = set()

    async def run_once(self, now: float | None = None) -> int:
        """Send what is due; return how many rows were delivered."""
        now = self.clock() if now is None else now
        rows = await asyncio.to_thread(self.outbox.undelivered)
        by_receiver: dict[str, list[OutboxRow]] = {}
        expired: list[int] = []
        for row in rows:
            if now - row.created > self.give_up_after:
                expired.append(row.id)
            else:
                by_receiver.setdefault(row.receiver, []).append(row)
        if expired:
            log.warning("outbox: %d notification(s) expired undelivered", len(expired))
            await asyncio.to_thread(self.outbox.finish, expired, now, "expired", "gave up")
        jobs = []
        for rid, pending in by_receiver.items():
            receiver = self.receivers.get(rid)
            if receiver is None:
                if rid not in self._unknown_warned:
                    self._unknown_warned.add(rid)
                    log.warning("outbox: %d row(s) for %s, no longer configured", len(pending), rid)
                continue
            if self.blocked_until.get(rid, 0.0) > now:
                continue
            if receiver.batches:
                jobs.append(self._send_updates(receiver, pending, now))
            else:
                jobs.append(self._send_events(receiver, pending, now))
        sent = await asyncio.gather(*jobs)
        return sum(sent)

    async def _post(self, receiver: Notifier, body: Any) -> DeliveryResult:
        retry, error = await receiver.send(self.client, body, timeout=self.timeout)
        now = self.clock()
        was = self.health.get(receiver.id, ReceiverHealth())
        if error is None:
            self.health[receiver.id] = replace(was, last_attempt=now, last_success=now, failures=0)
        else:
            self.health[receiver.id] = replace(
                was,
                last_attempt=now,
                last_error=error.message,
                last_error_kind=error.kind,
                last_error_at=now,
                failures=was.failures + 1,
            )
        if self.on_result is not None:
            self.on_result(receiver, "sent" if error is None else "retry" if retry else "rejected")
        return DeliveryResult(retry, error)

    async def _failed(
        self,
        receiver: Notifier,
        rows: Sequence[OutboxRow],
        now: float,
        retry: bool,
        error: DeliveryError,
    ) -> None:
        ids = [r.id for r in rows]
        if retry:
            attempts = max(r.attempts for r in rows) + 1
            due = now + backoff(attempts, self.retry_initial, self.retry_max)
            self.blocked_until[receiver.id] = due
            log.warning(
                "outbox: %s failed (%s), attempt %d; next try in %.0f s",
                receiver.id,
                error,
                attempts,
                due - now,
            )
            await asyncio.to_thread(self.outbox.retry, ids, due, error.message)
        else:
            log.error("outbox: %s rejected a notification (%s); not retried", receiver.id, error)
            await asyncio.to_thread(self.outbox.finish, ids, now, "rejected", error.message)

    async def _send_events(self, receiver: Notifier, rows: Sequence[OutboxRow], now: float) -> int:
        sent = 0
        blocked: set[str] = set()  # alerts whose earlier row is still undelivered
        for row in rows:
            if row.fingerprint in blocked:
                continue
            if row.next_attempt > now:
                blocked.add(row.fingerprint)
                continue
            retry, error = await self._post(receiver, json.loads(row.payload))
            if error is None:
                await asyncio.to_thread(self.outbox.finish, [row.id], self.clock(), "sent")
                sent += 1
                continue
            await self._failed(receiver, [row], now, retry, error)
            if retry:
                return sent
        self.blocked_until.pop(receiver.id, None)
        return sent

    async def _send_updates(self, receiver: Notifier, rows: Sequence[OutboxRow], now: float) -> int:
        newest: dict[str, OutboxRow] = {}
        for row in rows:
            newest[row.fingerprint] = row
        if not any(r.next_attempt <= now for r in newest.values()):
            return 0
        latest = sorted(newest.values(), key=lambda r: r.id)[:BATCH_LIMIT]
        chosen = {r.id for r in latest}
        fps = {r.fingerprint for r in latest}
        older = [r.id for r in rows if r.fingerprint in fps and r.id not in chosen]
        body = receiver.batch([json.loads(r.payload) for r in latest])
        retry, error = await self._post(receiver, body)
        if error is not None:
            await self._failed(receiver, latest, now, retry, error)
            return 0
        done = self.clock()
        await asyncio.to_thread(self.outbox.finish, sorted(chosen), done, "sent")
        if older:
            await asyncio.to_thread(self.outbox.finish, older, done, "superseded")
        self.blocked_until.pop(receiver.id, None)
        return len(chosen)
