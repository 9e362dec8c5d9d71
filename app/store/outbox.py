"""Repository over the ``outbox`` table: notifications waiting to be sent, and how each
one ended.

A row is written per receiver and notice (:meth:`Outbox.write`, inside the caller's
transaction when it goes with the alert state); ``UNIQUE(receiver, dedup_key)`` keeps a
notice from being written twice. The sender (:mod:`app.alerts.outbox`) reads the rows
not yet done with and marks them sent, retried, rejected, superseded or expired.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from app.store.sqlite import Store

__all__ = ["NewRow", "Outbox", "OutboxRow"]


@dataclass(frozen=True, slots=True)
class OutboxRow:
    id: int
    receiver: str
    dedup_key: str
    fingerprint: str
    kind: str
    payload: str
    created: float
    next_attempt: float
    attempts: int
    last_error: str | None


@dataclass(frozen=True, slots=True)
class NewRow:
    """A row to write: ``body`` is JSON-serialisable."""

    receiver: str
    dedup_key: str
    fingerprint: str
    kind: str
    body: Any


_COLUMNS = (
    "id, receiver, dedup_key, fingerprint, kind, payload, created, next_attempt, attempts, "
    "last_error"
)


class Outbox:
    """Repository over the ``outbox`` table."""

    def __init__(self, store: Store) -> None:
        self.store = store

    @staticmethod
    def write(conn: sqlite3.Connection, rows: Iterable[NewRow], now: float) -> None:
        """Insert rows inside the caller's transaction; a duplicate notice is ignored."""
        conn.executemany(
            "INSERT OR IGNORE INTO outbox(receiver, dedup_key, fingerprint, kind, payload, "
            "created, next_attempt) VALUES (?,?,?,?,?,?,?)",
            [
                (r.receiver, r.dedup_key, r.fingerprint, r.kind, json.dumps(r.body), now, now)
                for r in rows
            ],
        )

    def add(self, rows: Iterable[NewRow], now: float) -> None:
        with self.store.transaction("outbox") as conn:
            self.write(conn, rows, now)

    def undelivered(self, receiver: str | None = None) -> list[OutboxRow]:
        """Rows not yet done with, oldest first."""
        sql = f"SELECT {_COLUMNS} FROM outbox WHERE delivered IS NULL"
        params: tuple[object, ...] = ()
        if receiver is not None:
            sql += " AND receiver = ?"
            params = (receiver,)
        return [OutboxRow(*r) for r in self.store.fetchall(sql + " ORDER BY id", params)]

    def finish(
        self, ids: Sequence[int], now: float, outcome: str, error: str | None = None
    ) -> None:
        """Mark rows done: ``sent``, ``rejected`` (4xx), ``superseded`` or ``expired``."""
        tried = 1 if outcome in ("sent", "rejected") else 0
        with self.store.transaction("outbox") as conn:
            conn.executemany(
                "UPDATE outbox SET delivered = ?, outcome = ?, attempts = attempts + ?, "
                "last_error = COALESCE(?, last_error) WHERE id = ?",
                [(now, outcome, tried, error, i) for i in ids],
            )

    def retry(self, ids: Sequence[int], next_attempt: float, error: str) -> None:
        with self.store.transaction("outbox") as conn:
            conn.executemany(
                "UPDATE outbox SET attempts = attempts + 1, next_attempt = ?, last_error = ? "
                "WHERE id = ?",
                [(next_attempt, error, i) for i in ids],
            )

    def backlog(self) -> tuple[int, float | None]:
        """Undelivered rows and the creation time of the oldest one."""
        ((n, oldest),) = self.store.fetchall(
            "SELECT COUNT(*), MIN(created) FROM outbox WHERE delivered IS NULL"
        )
        return int(n), None if oldest is None else float(oldest)

    def counts(self) -> dict[str, dict[str, int]]:
        """Rows per receiver and outcome (``pending`` for undelivered)."""
        rows = self.store.fetchall(
            "SELECT receiver, COALESCE(outcome, 'pending'), COUNT(*) FROM outbox "
            "GROUP BY receiver, COALESCE(outcome, 'pending')"
        )
        out: dict[str, dict[str, int]] = {}
        for receiver, outcome, n in rows:
            out.setdefault(receiver, {})[outcome] = int(n)
        return out
