"""Repository over the ``silences`` table: a silence's row as stored.

The matchers are JSON text as their owner encoded them (:mod:`app.alerts.silences`
reads them back); the times are what the row holds — a row written straight into the
database may hold anything there, so they are not converted here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.store.sqlite import Store

__all__ = ["SilenceRow", "SilenceTable"]

_COLUMNS = "id, matchers, starts_at, ends_at, created_by, comment"


@dataclass(frozen=True, slots=True)
class SilenceRow:
    id: str
    matchers: str
    starts_at: Any
    ends_at: Any
    created_by: str
    comment: str


class SilenceTable:
    """The ``silences`` table of a store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def insert(self, row: SilenceRow, *, now: float = 0.0, max_kept: int | None = None) -> bool:
        """Store ``row``; False (and nothing stored) when ``max_kept`` silences not yet
        ended at ``now`` are stored already. Counted and inserted in one statement, so
        two requests at once cannot both take the last place."""
        values = (row.id, row.matchers, row.starts_at, row.ends_at, row.created_by, row.comment)
        with self.store.transaction() as conn:
            if max_kept is None:
                conn.execute("INSERT INTO silences VALUES (?,?,?,?,?,?)", values)
                return True
            cur = conn.execute(
                "INSERT INTO silences SELECT ?,?,?,?,?,? "
                "WHERE (SELECT COUNT(*) FROM silences WHERE ends_at > ?) < ?",
                (*values, now, max_kept),
            )
            return cur.rowcount > 0

    def expire(self, silence_id: str, now: float) -> bool:
        """End a silence now; False when there is no such silence or it already ended."""
        with self.store.transaction() as conn:
            cur = conn.execute(
                "UPDATE silences SET ends_at = ? WHERE id = ? AND ends_at > ?",
                (now, silence_id, now),
            )
            return cur.rowcount > 0

    def get(self, silence_id: str) -> SilenceRow | None:
        rows = self.store.fetchall(f"SELECT {_COLUMNS} FROM silences WHERE id = ?", (silence_id,))
        return SilenceRow(*rows[0]) if rows else None

    def ending_after(self, since: float | None) -> list[SilenceRow]:
        """Rows ending after ``since`` (all when None), newest start first."""
        rows = self.store.fetchall(
            f"SELECT {_COLUMNS} FROM silences WHERE ends_at > ? ORDER BY starts_at DESC",
            (float("-inf") if since is None else since,),
        )
        return [SilenceRow(*r) for r in rows]
