"""Silences: label matchers with an expiry that keep matching alerts from notifying.

Matchers follow Alertmanager: ``{"name", "value", "isRegex", "isEqual"}`` (``=``, ``!=``,
``=~``, ``!~``; regexes are anchored at both ends; an absent label is the empty string),
or the same as text, ``alertname="PhasewatchKVCachePressure"``, ``target=~"llama-.*"``.
As in Alertmanager a silence needs at least one matcher that does not match the empty
string — a silence that matches everything is refused. A silenced alert still changes
state (the API shows it); only notifications wait. Deleting a silence expires it.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from app.store.sqlite import Store

__all__ = ["Matcher", "Silence", "SilenceStore", "parse_matcher", "silenced_by"]

_TEXT = re.compile(r'^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*$')


@dataclass(frozen=True, slots=True)
class Matcher:
    name: str
    value: str
    is_regex: bool = False
    is_equal: bool = True

    def matches(self, labels: Mapping[str, str]) -> bool:
        actual = labels.get(self.name, "")
        if self.is_regex:
            hit = re.fullmatch(self.value, actual) is not None
        else:
            hit = actual == self.value
        return hit if self.is_equal else not hit

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": self.value,
            "isRegex": self.is_regex,
            "isEqual": self.is_equal,
        }


def parse_matcher(item: object) -> Matcher:
    """A matcher from Alertmanager's JSON shape or ``name="value"`` text; ValueError else."""
    if isinstance(item, str):
        m = _TEXT.match(item)
        if m is None:
            raise ValueError(f'matcher {item!r}: expected name="value" (or !=, =~, !~)')
        name, op, raw = m.groups()
        value = raw.replace('\\"', '"').replace("\\\\", "\\")
        matcher = Matcher(name, value, is_regex="~" in op, is_equal=op in ("=", "=~"))
    elif isinstance(item, Mapping):
        name, value = item.get("name"), item.get("value")
        if not isinstance(name, str) or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
            raise ValueError(f"matcher {dict(item)!r}: 'name' must be a label name")
        if not isinstance(value, str):
            raise ValueError(f"matcher {dict(item)!r}: 'value' must be a string")
        matcher = Matcher(
            name, value, bool(item.get("isRegex", False)), bool(item.get("isEqual", True))
        )
    else:
        raise ValueError(f'matcher {item!r}: expected an object or name="value" text')
    if matcher.is_regex:
        try:
            re.compile(matcher.value)
        except re.error as exc:
            raise ValueError(f"matcher {matcher.name}: bad regex: {exc}") from None
    return matcher


@dataclass(frozen=True, slots=True)
class Silence:
    id: str
    matchers: tuple[Matcher, ...]
    starts_at: float
    ends_at: float
    created_by: str
    comment: str

    def active(self, now: float) -> bool:
        return self.starts_at <= now < self.ends_at

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(m.matches(labels) for m in self.matchers)

    def status(self, now: float) -> str:
        if now < self.starts_at:
            return "pending"
        return "active" if now < self.ends_at else "expired"

    def to_dict(self, now: float) -> dict[str, Any]:
        return {
            "id": self.id,
            "matchers": [m.to_dict() for m in self.matchers],
            "startsAt": self.starts_at,
            "endsAt": self.ends_at,
            "createdBy": self.created_by,
            "comment": self.comment,
            "status": {"state": self.status(now)},
        }


def new_silence(
    matchers: Iterable[Matcher],
    *,
    starts_at: float,
    ends_at: float,
    created_by: str,
    comment: str,
) -> Silence:
    """Validate and build a silence with a fresh id; ValueError names what is wrong."""
    ms = tuple(matchers)
    if not ms:
        raise ValueError("a silence needs at least one matcher")
    if all(m.matches({}) for m in ms):
        raise ValueError("at least one matcher must not match an empty label (it would mute all)")
    if not ends_at > starts_at:
        raise ValueError("endsAt must be after startsAt")
    return Silence(str(uuid.uuid4()), ms, starts_at, ends_at, created_by, comment)


def silenced_by(silences: Iterable[Silence], labels: Mapping[str, str], now: float) -> str | None:
    """The id of the first active silence matching ``labels``, or None."""
    for s in silences:
        if s.active(now) and s.matches(labels):
            return s.id
    return None


class SilenceStore:
    """Repository over the ``silences`` table."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def add(self, silence: Silence) -> None:
        with self.store.transaction() as conn:
            conn.execute(
                "INSERT INTO silences VALUES (?,?,?,?,?,?)",
                (
                    silence.id,
                    json.dumps([asdict(m) for m in silence.matchers]),
                    silence.starts_at,
                    silence.ends_at,
                    silence.created_by,
                    silence.comment,
                ),
            )

    def expire(self, silence_id: str, now: float) -> bool:
        """End a silence now; False when there is no such silence or it already ended."""
        with self.store.transaction() as conn:
            cur = conn.execute(
                "UPDATE silences SET ends_at = ? WHERE id = ? AND ends_at > ?",
                (now, silence_id, now),
            )
            return cur.rowcount > 0

    def get(self, silence_id: str) -> Silence | None:
        rows = self.store.fetchall(
            "SELECT id, matchers, starts_at, ends_at, created_by, comment FROM silences "
            "WHERE id = ?",
            (silence_id,),
        )
        return _silence(rows[0]) if rows else None

    def list(self, *, since: float | None = None) -> list[Silence]:
        """Silences ending after ``since`` (all when None), newest first."""
        rows = self.store.fetchall(
            "SELECT id, matchers, starts_at, ends_at, created_by, comment FROM silences "
            "WHERE ends_at > ? ORDER BY starts_at DESC",
            (float("-inf") if since is None else since,),
        )
        return [_silence(r) for r in rows]


def _silence(row: tuple[Any, ...]) -> Silence:
    matchers = tuple(Matcher(**m) for m in json.loads(row[1]))
    return Silence(row[0], matchers, row[2], row[3], row[4], row[5])
