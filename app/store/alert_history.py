"""Repository over ``alert_state`` and ``alert_history`` (and the outbox rows that go
with them): one evaluation's outcome is saved in one transaction, so after a crash the
state, the history and the notifications to send always agree.

An alert's state is kept as its owner encoded it (text); a transition's labels and
annotations as JSON, its previous state in the annotations under ``_previous``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.store.outbox import NewRow, Outbox
from app.store.sqlite import Store

__all__ = ["AlertTables", "HistoryEntry"]


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One stored transition (``previous`` is None in a row written without it)."""

    fingerprint: str
    alertname: str
    state: str
    at: float
    previous: str | None
    labels: dict[str, Any]
    annotations: dict[str, Any]


class AlertTables:
    """The ``alert_state`` and ``alert_history`` tables of a store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def states(self) -> list[tuple[str, str]]:
        """Every saved (fingerprint, state text)."""
        rows = self.store.fetchall("SELECT fingerprint, payload FROM alert_state")
        return [(fp, payload) for fp, payload in rows]

    def save(
        self,
        states: Mapping[str, str],
        ended: Iterable[str],
        transitions: Sequence[HistoryEntry],
        notifications: Sequence[NewRow],
        now: float,
    ) -> None:
        """Drop the ``ended`` states, write ``states`` (fingerprint to text), append the
        transitions and enqueue the notifications — atomically."""
        gone = [(fp,) for fp in ended]
        with self.store.transaction("alert_history") as conn:
            conn.executemany("DELETE FROM alert_state WHERE fingerprint = ?", gone)
            conn.executemany(
                "INSERT OR REPLACE INTO alert_state VALUES (?, ?)", list(states.items())
            )
            conn.executemany(
                "INSERT INTO alert_history(fingerprint, alertname, state, at, labels, "
                "annotations) VALUES (?,?,?,?,?,?)",
                [
                    (
                        t.fingerprint,
                        t.alertname,
                        t.state,
                        t.at,
                        json.dumps(t.labels, sort_keys=True),
                        json.dumps({**t.annotations, "_previous": t.previous}),
                    )
                    for t in transitions
                ],
            )
            Outbox.write(conn, notifications, now)

    def history(
        self,
        *,
        start: float,
        end: float,
        alertname: str | None = None,
        target: str | None = None,
        state: str | None = None,
        limit: int = 1000,
    ) -> list[HistoryEntry]:
        """Transitions with ``start < at <= end``, newest first, at most ``limit``;
        ``target`` is the transition's ``target`` label."""
        sql = (
            "SELECT fingerprint, alertname, state, at, labels, annotations FROM alert_history "
            "WHERE at > ? AND at <= ?"
        )
        params: list[object] = [start, end]
        if alertname is not None:
            sql += " AND alertname = ?"
            params.append(alertname)
        if state is not None:
            sql += " AND state = ?"
            params.append(state)
        sql += " ORDER BY at DESC, id DESC"
        out: list[HistoryEntry] = []
        for fp, name, st, at, labels_text, notes_text in self.store.fetchall(sql, params):
            labels = json.loads(labels_text)
            if target is not None and labels.get("target") != target:
                continue
            notes = json.loads(notes_text)
            previous = notes.pop("_previous", None)
            out.append(HistoryEntry(fp, name, st, at, previous, labels, notes))
            if len(out) >= limit:
                break
        return out
