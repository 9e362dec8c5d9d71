"""Repository over the ``diagnoses`` table: one row per stream and evaluated window end.

The payload is ``Diagnosis.to_dict()`` as zlib-compressed JSON (about 2 KB a row, in a
rowid table since schema 4 so that it stays on its page). To stay inside the storage
budget the evaluation job writes a row when a stream's class or sub-cause changes and
otherwise at most every ``HEARTBEAT_S`` seconds (:func:`should_store`);
``GET /api/v1/windows`` can always re-window the history.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from app.store.sqlite import Store

__all__ = ["HEARTBEAT_S", "DiagnosisRow", "DiagnosisStore", "should_store"]

# A row a minute (about 2 KB compressed) would cost some 3 MB per stream and day, most
# of the 5 MB budget; a steady class needs no more than a few an hour.
HEARTBEAT_S = 900.0


@dataclass(frozen=True, slots=True)
class DiagnosisRow:
    target: str
    model_name: str
    start: float
    end: float
    cls: str
    payload: dict[str, Any]


def should_store(
    last: tuple[float, str, str | None] | None, end: float, cls: str, sub_cause: str | None
) -> bool:
    """Store when the verdict changed or ``HEARTBEAT_S`` passed since the last stored row."""
    if last is None:
        return True
    last_end, last_cls, last_sub = last
    return (cls, sub_cause) != (last_cls, last_sub) or end - last_end >= HEARTBEAT_S


def _encode(payload: dict[str, Any]) -> bytes:
    return zlib.compress(json.dumps(payload, separators=(",", ":")).encode(), 6)


def _decode(blob: bytes) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(zlib.decompress(blob))
    return out


class DiagnosisStore:
    def __init__(self, store: Store) -> None:
        self.store = store

    def add(self, rows: Iterable[DiagnosisRow]) -> None:
        """Write rows (a row for the same stream and end replaces the old one)."""
        items = [(self.store.stream_id(r.target, r.model_name), r) for r in rows]
        if not items:
            return
        with self.store.transaction("diagnoses") as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO diagnoses VALUES (?,?,?,?,?)",
                [(sid, r.end, r.start, r.cls, _encode(r.payload)) for sid, r in items],
            )

    def latest(self) -> dict[tuple[str, str], tuple[float, str, str | None]]:
        """The last stored (end, class, sub_cause) per stream, to resume after a restart."""
        rows = self.store.fetchall(
            "SELECT s.target, s.model_name, d.end_ts, d.class, d.payload FROM diagnoses d "
            "JOIN streams s ON s.id = d.stream_id "
            "JOIN (SELECT stream_id, MAX(end_ts) AS m FROM diagnoses GROUP BY stream_id) x "
            "ON x.stream_id = d.stream_id AND x.m = d.end_ts"
        )
        return {(t, m): (e, c, _decode(p).get("sub_cause")) for t, m, e, c, p in rows}

    def classes(
        self, target: str, model_name: str, start: float, end: float
    ) -> list[tuple[float, str]]:
        """(end, class) of a stream's stored rows with ``start < end_ts <= end``, oldest
        first (the payloads are not read)."""
        return [
            (float(e), str(c))
            for e, c in self.store.fetchall(
                "SELECT d.end_ts, d.class FROM diagnoses d JOIN streams s ON s.id = d.stream_id "
                "WHERE s.target = ? AND s.model_name = ? AND d.end_ts > ? AND d.end_ts <= ? "
                "ORDER BY d.end_ts",
                [target, model_name, start, end],
            )
        ]

    def query(
        self, target: str, *, model_name: str | None, start: float, end: float, limit: int
    ) -> list[dict[str, Any]]:
        """Stored diagnoses of a target with ``start < end_ts <= end``, oldest first."""
        sql = (
            "SELECT s.model_name, d.payload FROM diagnoses d JOIN streams s ON s.id = d.stream_id "
            "WHERE s.target = ? AND d.end_ts > ? AND d.end_ts <= ?"
        )
        params: list[object] = [target, start, end]
        if model_name is not None:
            sql += " AND s.model_name = ?"
            params.append(model_name)
        sql += " ORDER BY d.end_ts, s.model_name LIMIT ?"
        params.append(limit)
        return [_decode(p) for _, p in self.store.fetchall(sql, params)]
