"""Silences: label matchers with an expiry that keep matching alerts from notifying.

Matchers follow Alertmanager: ``{"name", "value", "isRegex", "isEqual"}`` (``=``, ``!=``,
``=~``, ``!~``; regexes are anchored at both ends; an absent label is the empty string),
or the same as text, ``alertname="PhasewatchKVCachePressure"``, ``target=~"llama-.*"``.
As in Alertmanager a silence needs at least one matcher that does not match the empty
string — a silence that matches everything is refused. A silenced alert still changes
state (the API shows it); only notifications wait. Deleting a silence expires it.

Regexes are RE2 (``app.regex``), as in Alertmanager: linear-time matching, so no
pattern can stall an evaluation; no backreferences or lookaround. A stored silence that
could not be created today — a regex RE2 refuses (written by an older version), no
matchers, matchers that would mute all, unreadable JSON (written straight into the
database) — still loads: it is *invalid*, listed with its ``error``, silencing nothing,
deletable.

Limits (these keep a silence a few kilobytes and its times finite): at most
``MAX_MATCHERS`` matchers, names of ``MAX_NAME_CHARS`` and values of ``MAX_VALUE_CHARS``
characters; ``startsAt`` no more than a day in the past; ``endsAt`` after now and within
ten years. Two more, as Alertmanager's ``--silences.max-silence-size-bytes`` and
``--silences.max-silences``, are settings: a silence's size (:func:`silence_bytes`, its
matchers, ``createdBy`` and comment as stored) and how many silences not yet ended
(active, pending or invalid; expired ones do not count) the store takes
(:meth:`SilenceStore.add`). Together they bound what every evaluation reads and what
a listing can hold.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from app.regex import AnchoredRegex, compile_anchored
from app.store.silences import SilenceRow, SilenceTable
from app.store.sqlite import Store

__all__ = [
    "MAX_MATCHERS",
    "MAX_NAME_CHARS",
    "MAX_VALUE_CHARS",
    "Matcher",
    "Silence",
    "SilenceStore",
    "new_silence",
    "parse_matcher",
    "silence_bytes",
    "silenced_by",
]

MAX_MATCHERS = 64
MAX_NAME_CHARS = 128
MAX_VALUE_CHARS = 1024
MAX_PAST_S = 86400.0  # startsAt at most a day back
MAX_AHEAD_S = 10 * 365.25 * 86400.0  # startsAt and endsAt at most ten years ahead
_LAST_TS = 253402300799.0  # 9999-12-31 23:59:59 UTC: the last time a datetime can show

_TEXT = re.compile(r'^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*$')


@dataclass(frozen=True, slots=True)
class Matcher:
    """One label matcher; a regex one holds its compiled RE2 pattern, or why RE2 refused it."""

    name: str
    value: str
    is_regex: bool = False
    is_equal: bool = True
    regex: AnchoredRegex | None = field(default=None, init=False, repr=False, compare=False)
    error: str | None = field(default=None, init=False, compare=False)

    def __post_init__(self) -> None:
        if self.is_regex:
            try:
                object.__setattr__(self, "regex", compile_anchored(self.value))
            except ValueError as exc:
                object.__setattr__(self, "error", f"matcher {self.name}: bad regex: {exc}")

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy the matcher; an invalid matcher matches nothing."""
        if self.error is not None:
            return False
        actual = labels.get(self.name, "")
        hit = self.regex.matches(actual) if self.regex is not None else actual == self.value
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
    if len(matcher.name) > MAX_NAME_CHARS:
        raise ValueError(f"matcher name longer than {MAX_NAME_CHARS} characters")
    if len(matcher.value) > MAX_VALUE_CHARS:
        raise ValueError(f"matcher {matcher.name}: value longer than {MAX_VALUE_CHARS} characters")
    if matcher.error is not None:
        raise ValueError(matcher.error)
    return matcher


@dataclass(frozen=True, slots=True)
class Silence:
    id: str
    matchers: tuple[Matcher, ...]
    starts_at: float
    ends_at: float
    created_by: str
    comment: str
    error: str | None = None  # why a stored silence is invalid; it then silences nothing

    def active(self, now: float) -> bool:
        return self.starts_at <= now < self.ends_at

    def matches(self, labels: Mapping[str, str]) -> bool:
        return self.error is None and all(m.matches(labels) for m in self.matchers)

    def status(self, now: float) -> str:
        """pending, active or expired; ``invalid`` (until it ends) when it cannot apply."""
        if now >= self.ends_at:
            return "expired"
        if self.error is not None:
            return "invalid"
        return "pending" if now < self.starts_at else "active"

    def to_dict(self, now: float) -> dict[str, Any]:
        return {
            "id": self.id,
            "matchers": [m.to_dict() for m in self.matchers],
            "startsAt": self.starts_at,
            "endsAt": self.ends_at,
            "createdBy": self.created_by,
            "comment": self.comment,
            "status": {"state": self.status(now)},
            "error": self.error,
        }


def new_silence(
    matchers: Iterable[Matcher],
    *,
    starts_at: float,
    ends_at: float,
    created_by: str,
    comment: str,
    now: float,
    max_bytes: int | None = None,
) -> Silence:
    """Validate and build a silence with a fresh id; ValueError names what is wrong.

    Times are finite, ``endsAt`` after both ``now`` and ``startsAt``, ``startsAt`` no more
    than a day back, both at most ten years ahead; the silence at most ``max_bytes``
    (:func:`silence_bytes`; None: any size the field limits allow).
    """
    ms = tuple(matchers)
    problem = _matchers_problem(ms)
    if problem is not None:
        raise ValueError(problem)
    if len(ms) > MAX_MATCHERS:
        raise ValueError(f"a silence takes at most {MAX_MATCHERS} matchers")
    if not (math.isfinite(starts_at) and math.isfinite(ends_at)):
        raise ValueError("startsAt and endsAt must be finite times")
    if ends_at <= now:
        raise ValueError("endsAt is in the past")
    if not ends_at > starts_at:
        raise ValueError("endsAt must be after startsAt")
    if starts_at < now - MAX_PAST_S:
        raise ValueError("startsAt is more than a day in the past")
    if ends_at > now + MAX_AHEAD_S:
        raise ValueError("endsAt is more than ten years ahead")
    silence = Silence(str(uuid.uuid4()), ms, starts_at, ends_at, created_by, comment)
    if max_bytes is not None and (size := silence_bytes(silence)) > max_bytes:
        raise ValueError(
            f"the silence is {size} bytes (matchers, createdBy and comment), over the "
            f"limit of {max_bytes} (alerts.max_silence_bytes)"
        )
    return silence


def silence_bytes(silence: Silence) -> int:
    """The bytes a silence takes in the store: its matchers as stored (JSON), its
    ``createdBy`` and comment (UTF-8)."""
    matchers = _matchers_json(silence)
    return len(matchers.encode()) + len(silence.created_by.encode()) + len(silence.comment.encode())


def _matchers_json(silence: Silence) -> str:
    """A silence's matchers as the store keeps them."""
    return json.dumps([_stored(m) for m in silence.matchers])


def _matchers_problem(ms: tuple[Matcher, ...]) -> str | None:
    """Why these matchers cannot make a silence (new or stored), or None."""
    if not ms:
        return "a silence needs at least one matcher"
    bad = next((m.error for m in ms if m.error is not None), None)
    if bad is not None:
        return bad
    if all(m.matches({}) for m in ms):
        return "at least one matcher must not match an empty label (it would mute all)"
    return None


def silenced_by(silences: Iterable[Silence], labels: Mapping[str, str], now: float) -> str | None:
    """The id of the first active silence matching ``labels``, or None."""
    for s in silences:
        if s.active(now) and s.matches(labels):
            return s.id
    return None


class SilenceStore:
    """Silences kept in the store (the table and its SQL: :mod:`app.store.silences`)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.table = SilenceTable(store)

    def add(self, silence: Silence, *, now: float = 0.0, max_kept: int | None = None) -> bool:
        """Store ``silence``; False (and nothing stored) when ``max_kept`` silences not
        yet ended at ``now`` are stored already. Counted and inserted in one statement,
        so two requests at once cannot both take the last place."""
        row = SilenceRow(
            silence.id,
            _matchers_json(silence),
            silence.starts_at,
            silence.ends_at,
            silence.created_by,
            silence.comment,
        )
        return self.table.insert(row, now=now, max_kept=max_kept)

    def expire(self, silence_id: str, now: float) -> bool:
        """End a silence now; False when there is no such silence or it already ended."""
        return self.table.expire(silence_id, now)

    def get(self, silence_id: str) -> Silence | None:
        row = self.table.get(silence_id)
        return None if row is None else _silence(row)

    def list(self, *, since: float | None = None) -> list[Silence]:
        """Silences ending after ``since`` (all when None), newest first."""
        return [_silence(r) for r in self.table.ending_after(since)]


def _stored(m: Matcher) -> dict[str, Any]:
    return {"name": m.name, "value": m.value, "is_regex": m.is_regex, "is_equal": m.is_equal}


def _silence(row: SilenceRow) -> Silence:
    """A row as a silence; one that cannot apply comes back invalid, never raises."""
    sid, raw, starts, ends = row.id, row.matchers, row.starts_at, row.ends_at
    created_by, comment = row.created_by, row.comment
    try:
        starts_at, ends_at = float(starts), float(ends)
    except (TypeError, ValueError):
        starts_at = ends_at = math.nan
    if not (0.0 <= starts_at <= _LAST_TS and 0.0 <= ends_at <= _LAST_TS):  # NaN too
        # Older versions took endsAt 1e308: invalid (and showable) until deleted.
        times = f"unreadable times: startsAt {starts!r}, endsAt {ends!r}"[:200]
        return Silence(sid, (), 0.0, _LAST_TS, created_by, comment, times)
    try:
        matchers = tuple(
            Matcher(
                str(m["name"]),
                str(m["value"]),
                bool(m.get("is_regex", False)),
                bool(m.get("is_equal", True)),
            )
            for m in json.loads(raw)
        )
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        unreadable = f"unreadable matchers: {exc!r}"[:200]
        return Silence(sid, (), starts_at, ends_at, created_by, comment, unreadable)
    error = _matchers_problem(matchers)
    return Silence(sid, matchers, starts_at, ends_at, created_by, comment, error)
