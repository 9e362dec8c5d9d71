"""Repository over ``alert_state`` and ``alert_history`` (and the outbox write that goes
with them): one evaluation's outcome is saved in one transaction, so after a crash the
state, the history and the notifications to send always agree."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from app.alerts.outbox import NewRow, Outbox
from app.alerts.state import Alert, Transition
from app.store.sqlite import Store

log = logging.getLogger(__name__)

__all__ = ["AlertStore"]


class AlertStore:
    def __init__(self, store: Store) -> None:
        self.store = store

    def load(self) -> dict[str, Alert]:
        """The alerts saved by the last evaluation (a restart resumes from here)."""
        out: dict[str, Alert] = {}
        for fp, payload in self.store.fetchall("SELECT fingerprint, payload FROM alert_state"):
            try:
                out[fp] = Alert.from_json(payload)
            except (ValueError, TypeError, KeyError) as exc:
                log.warning("alert state %s unreadable (%s); dropped", fp, type(exc).__name__)
        return out

    def save(
        self,
        alerts: Mapping[str, Alert],
        previous: Iterable[str],
        transitions: Sequence[Transition],
        notifications: Sequence[NewRow],
        now: float,
    ) -> None:
        """Replace the state, append the history, enqueue the notifications — atomically."""
        gone = [(fp,) for fp in previous if fp not in alerts]
        with self.store.transaction("alert_history") as conn:
            conn.executemany("DELETE FROM alert_state WHERE fingerprint = ?", gone)
            conn.executemany(
                "INSERT OR REPLACE INTO alert_state VALUES (?, ?)",
                [(fp, a.to_json()) for fp, a in alerts.items()],
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
    ) -> list[dict[str, Any]]:
        """Transitions with ``start < at <= end``, newest first."""
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
        out: list[dict[str, Any]] = []
        for fp, name, st, at, labels_text, notes_text in self.store.fetchall(sql, params):
            labels = json.loads(labels_text)
            if target is not None and labels.get("target") != target:
                continue
            notes = json.loads(notes_text)
            previous = notes.pop("_previous", None)
            out.append(
                {
                    "alertname": name,
                    "state": st,
                    "at": at,
                    "previous": previous,
                    "fingerprint": fp,
                    "labels": labels,
                    "annotations": notes,
                }
            )
            if len(out) >= limit:
                break
        return out
