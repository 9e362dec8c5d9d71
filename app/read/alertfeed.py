"""The alerts the UI shows: current state, history and silences, from the store.

Reads what the evaluation job saves (``app.alerts.history.AlertStore``,
``app.alerts.silences.SilenceStore``); a source without alerting (a recording) uses
:class:`NoAlerts`. Rows are plain records so the pages never touch the alert engine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from app.alerts.history import AlertStore
from app.alerts.silences import SilenceStore
from app.alerts.state import Transition
from app.store.sqlite import Store


@dataclass(frozen=True, slots=True)
class AlertRow:
    """One alert or one transition: ``state`` is pending, firing, resolved or inactive."""

    name: str
    state: str
    at: float
    target: str
    model_name: str | None
    severity: str
    summary: str
    labels: dict[str, str] = field(default_factory=dict)
    active_at: float | None = None
    fired_at: float | None = None
    resolved_at: float | None = None
    previous: str | None = None


def alert_summary(a: AlertRow) -> str:
    """What a row can truthfully say. A rule's summary is written for the notification
    of a firing alert, so a pending alert says it is pending and since when, and one
    that ended while pending says it never fired; other states keep the rule's summary
    (rendered with how long its condition had held, ``app.alerts.state``)."""
    if a.state == "pending":
        since = datetime.fromtimestamp(a.active_at or a.at, UTC).strftime("%Y-%m-%d %H:%M:%S")
        return f"pending since {since} UTC: its condition holds, not yet long enough to fire"
    if a.previous == "pending" and a.state in ("resolved", "inactive"):
        return "stopped while pending: it never fired"
    return a.summary


@dataclass(frozen=True, slots=True)
class SilenceRow:
    id: str
    matchers: str
    starts_at: float
    ends_at: float
    created_by: str
    comment: str
    status: str


class AlertFeed(Protocol):
    enabled: bool

    def current(self) -> list[AlertRow]: ...

    def history(self, start: float, end: float, target: str | None = None) -> list[AlertRow]: ...

    def silences(self, now: float) -> list[SilenceRow]: ...


class NoAlerts:
    """A source without alert evaluation (a recording, a Prometheus range)."""

    enabled = False

    def current(self) -> list[AlertRow]:
        return []

    def history(self, start: float, end: float, target: str | None = None) -> list[AlertRow]:
        return []

    def silences(self, now: float) -> list[SilenceRow]:
        return []


def _row(
    name: str,
    state: str,
    at: float,
    labels: dict[str, str],
    notes: dict[str, str],
    previous: str | None = None,
) -> AlertRow:
    return AlertRow(
        name=name,
        state=state,
        at=at,
        target=labels.get("target", ""),
        model_name=labels.get("model_name"),
        severity=labels.get("severity", ""),
        summary=notes.get("summary", ""),
        labels=dict(labels),
        previous=previous,
    )


class StoreAlerts:
    """The alert state, history and silences the service keeps in its store."""

    enabled = True

    def __init__(self, store: Callable[[], Store]) -> None:
        self._store = store

    def current(self) -> list[AlertRow]:
        out = []
        for a in AlertStore(self._store()).load().values():
            state = str(a.state)
            if state == "inactive" and a.resolved_at is not None:
                state = "resolved"
            at = a.resolved_at or a.fired_at or a.active_at
            row = _row(a.rule, state, at, a.labels, a.annotations)
            out.append(
                AlertRow(
                    **{
                        **{f: getattr(row, f) for f in row.__dataclass_fields__},
                        "active_at": a.active_at,
                        "fired_at": a.fired_at,
                        "resolved_at": a.resolved_at,
                    }
                )
            )
        return out

    def history(self, start: float, end: float, target: str | None = None) -> list[AlertRow]:
        rows = AlertStore(self._store()).history(start=start, end=end, target=target)
        return [
            _row(
                r["alertname"],
                r["state"],
                r["at"],
                r["labels"],
                r["annotations"],
                r.get("previous"),
            )
            for r in rows
        ]

    def silences(self, now: float) -> list[SilenceRow]:
        out = []
        for s in SilenceStore(self._store()).list(since=now - 86400.0):
            matchers = ", ".join(
                f'{m.name}{"=" if m.is_equal else "!="}{"~" if m.is_regex else ""}"{m.value}"'
                for m in s.matchers
            )
            out.append(
                SilenceRow(
                    s.id, matchers, s.starts_at, s.ends_at, s.created_by, s.comment, s.status(now)
                )
            )
        return out


class ReplayedAlerts:
    """Alerts the rules would have raised over a recording (``app.evaluate.replay``).

    ``history`` is the replayed transitions; ``current`` the state at the recording's
    end: each alert's last transition (pending, firing or resolved).
    """

    enabled = True

    def __init__(self, transitions: Sequence[Transition]) -> None:
        self._rows = [
            _row(t.alertname, t.state, t.at, t.labels, t.annotations, t.previous)
            for t in sorted(transitions, key=lambda t: t.at)
        ]
        last: dict[str, AlertRow] = {}
        for t, row in zip(sorted(transitions, key=lambda t: t.at), self._rows, strict=True):
            last[t.fingerprint] = row
        self._current = [
            r for r in last.values() if r.previous != "pending" or r.state != "resolved"
        ]

    def current(self) -> list[AlertRow]:
        return list(self._current)

    def history(self, start: float, end: float, target: str | None = None) -> list[AlertRow]:
        return [
            r for r in self._rows if start < r.at <= end and (target is None or r.target == target)
        ]

    def silences(self, now: float) -> list[SilenceRow]:
        return []
