"""Whether the store's writes get through: error kinds, and each writer's last outcome.

A failed write raises the ``sqlite3.Error`` it got (the transaction rolled back) and is
remembered for :meth:`~app.store.sqlite.Store.health` with its kind (:func:`error_kind`:
``read_only``, ``full``, ``busy``, ``io``, ``corrupt``, ``other``) until a later write
*of the same writer* succeeds, or a scrape round (the heaviest and most frequent write)
does. Writers are named (``rounds``, ``outbox``, ``diagnoses``…): on a full disk a small
update may still fit in a free page while the scrape rounds keep failing, and that must
not make the store look healthy.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["StoreErrorKind", "StoreHealth", "WriteHealth", "error_kind"]


class StoreErrorKind(StrEnum):
    """What a store error means for an operator."""

    READ_ONLY = "read_only"
    FULL = "full"
    BUSY = "busy"
    IO = "io"
    CORRUPT = "corrupt"
    OTHER = "other"


# SQLite's primary result codes; an extended code (SQLITE_IOERR_WRITE…) carries its
# primary code in the low byte.
_ERROR_KINDS: dict[int, StoreErrorKind] = {
    sqlite3.SQLITE_READONLY: StoreErrorKind.READ_ONLY,
    sqlite3.SQLITE_FULL: StoreErrorKind.FULL,
    sqlite3.SQLITE_BUSY: StoreErrorKind.BUSY,
    sqlite3.SQLITE_LOCKED: StoreErrorKind.BUSY,
    sqlite3.SQLITE_IOERR: StoreErrorKind.IO,
    sqlite3.SQLITE_CORRUPT: StoreErrorKind.CORRUPT,
    sqlite3.SQLITE_NOTADB: StoreErrorKind.CORRUPT,
}


def error_kind(exc: BaseException) -> StoreErrorKind:
    """The kind of a store error, from SQLite's result code (``sqlite3.Error``'s
    ``sqlite_errorcode``, extended codes included); ``other`` for anything else."""
    code = getattr(exc, "sqlite_errorcode", None)
    if not isinstance(code, int):
        return StoreErrorKind.OTHER
    return _ERROR_KINDS.get(code & 0xFF, StoreErrorKind.OTHER)


@dataclass(frozen=True, slots=True)
class StoreHealth:
    """Whether the latest write got through; the last failure and when it happened."""

    ok: bool
    error_kind: StoreErrorKind | None
    last_error: str | None
    last_error_at: float | None
    last_write_ok: float | None
    failed_writes: int


class WriteHealth:
    """The last commit and the last failure of each named writer, and the failures
    counted; the store calls it under its own lock."""

    __slots__ = ("_failed_writes", "_last_error", "_last_ok")

    def __init__(self) -> None:
        """Start with no write seen."""
        self._last_ok: dict[str, float] = {}  # writer -> time of its last commit
        # writer -> (at, kind, message)
        self._last_error: dict[str, tuple[float, StoreErrorKind, str]] = {}
        self._failed_writes = 0

    def failed(self, writer: str, exc: BaseException) -> None:
        """Remember a failed write of ``writer`` (only a store error counts)."""
        if isinstance(exc, sqlite3.Error):
            self._failed_writes += 1
            self._last_error[writer] = (time.time(), error_kind(exc), str(exc)[:300])

    def wrote(self, writer: str) -> None:
        """Remember a commit of ``writer``."""
        self._last_ok[writer] = time.time()

    def health(self) -> StoreHealth:
        """Ok unless some writer's latest write failed and no scrape round has been
        written since."""
        rounds_ok = self._last_ok.get("rounds", -1.0)
        failing = sorted(
            (
                err
                for w, err in self._last_error.items()
                if max(self._last_ok.get(w, -1.0), rounds_ok) < err[0]
            ),
            reverse=True,
        )
        latest = max(self._last_error.values(), default=None)
        err = failing[0] if failing else latest
        return StoreHealth(
            ok=not failing,
            error_kind=failing[0][1] if failing else None,
            last_error=None if err is None else err[2],
            last_error_at=None if err is None else err[0],
            last_write_ok=max(self._last_ok.values(), default=None),
            failed_writes=self._failed_writes,
        )
