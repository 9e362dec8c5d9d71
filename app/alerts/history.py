"""The alerts' side of ``alert_state`` and ``alert_history`` (and the outbox write that
goes with them): one evaluation's outcome is saved in one transaction, so after a crash
the state, the history and the notifications to send always agree. The tables and their
SQL are the store's (:mod:`app.store.alert_history`)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from app.alerts.state import Alert, Transition
from app.store.alert_history import AlertTables, HistoryEntry
from app.store.outbox import NewRow
from app.store.sqlite import Store

log = logging.getLogger(__name__)

__all__ = ["AlertStore"]


class AlertStore:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.tables = AlertTables(store)

    def load(self) -> dict[str, Alert]:
        """The alerts saved by the last evaluation (a restart resumes from here)."""
        out: dict[str, Alert] = {}
        for fp, payload in self.tables.states():
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
        self.tables.save(
            {fp: a.to_json() for fp, a in alerts.items()},
            [fp for fp in previous if fp not in alerts],
            [
                HistoryEntry(
                    t.fingerprint, t.alertname, t.state, t.at, t.previous, t.labels, t.annotations
                )
                for t in transitions
            ],
            notifications,
            now,
        )

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
        entries = self.tables.history(
            start=start, end=end, alertname=alertname, target=target, state=state, limit=limit
        )
        return [
            {
                "alertname": e.alertname,
                "state": e.state,
                "at": e.at,
                "previous": e.previous,
                "fingerprint": e.fingerprint,
                "labels": e.labels,
                "annotations": e.annotations,
            }
            for e in entries
        ]
