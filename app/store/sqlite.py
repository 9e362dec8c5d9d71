"""SQLite store (WAL): interval deltas, scrape health, last snapshots, retention.

One connection guarded by a lock; callers on the event loop hand work to a thread.
The schema and its migrations: :mod:`app.store.schema` (an older file is upgraded in
place, a newer one refused). Deltas are written one row each
(:mod:`app.store.deltacodec`); once their minute has closed, :meth:`Store.roll_up` moves
them into a block per minute and writes the minute and hour roll-ups beside them
(:mod:`app.store.rollups`), which :meth:`Store.rollups` reads back for long windows.
A failed write raises the ``sqlite3.Error`` it got (the transaction rolled back) and
shows in :meth:`Store.health` until its writer, or a scrape round, writes again
(:mod:`app.store.health`).
"""

from __future__ import annotations

import itertools
import json
import math
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.model import IntervalDelta, StreamSnapshot
from app.store.codec import decode_stream, encode_stream
from app.store.health import StoreHealth, WriteHealth
from app.store.recent import RecentDeltas
from app.store.rollups import HOUR, MINUTE, Rollups, Shapes
from app.store.schema import MIGRATIONS, migrate, user_version
from app.windows.rollup import Rollup, RollupPart, rollups_of


@dataclass(frozen=True, slots=True)
class ScrapeRecord:
    """The outcome of one scrape of one target."""

    target: str
    ts: float
    ok: bool
    error_kind: str | None
    error: str | None
    duration: float
    bytes: int
    parse_errors: int


class StoreError(RuntimeError):
    """The store file cannot be used (newer schema, not a database, …)."""


class Store:
    """Repository over one SQLite file."""

    def __init__(self, path: str | Path, *, recent_s: float = 0.0) -> None:
        """Open (or create) the store at ``path``; keep the last ``recent_s`` seconds of
        each stream that is read in memory as well (:mod:`app.store.recent`; 0: none)."""
        self.path = str(path)
        self._recent = RecentDeltas(recent_s)
        self._writes = 0  # commits of deltas: a read that saw none since may fill _recent
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot use store {self.path}: {exc}") from exc
        self._layouts: dict[tuple[float, ...], int] = {}
        self._bounds: dict[int, tuple[float, ...]] = {}
        self._streams: dict[tuple[str, str], int] = {}
        self._health = WriteHealth()
        self._load_caches()
        self._rollups = Rollups(
            self._db, Shapes(self._db), lambda b: self._layout_id(b), self._bounds.__getitem__
        )

    # -- schema ---------------------------------------------------------------------------
    def _migrate(self) -> None:
        version = user_version(self._db)
        if version > len(MIGRATIONS):
            raise StoreError(
                f"store {self.path} has schema {version}, newer than this phasewatch "
                f"({len(MIGRATIONS)}); upgrade phasewatch or use another file"
            )
        migrate(self._db, version)

    @property
    def schema_version(self) -> int:
        with self._lock:
            return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    def _load_caches(self) -> None:
        for lid, text in self._db.execute("SELECT id, bounds FROM layouts"):
            bounds = tuple(float(b) for b in json.loads(text))
            self._layouts[bounds] = lid
            self._bounds[lid] = bounds
        for sid, target, model in self._db.execute("SELECT id, target, model_name FROM streams"):
            self._streams[(target, model)] = sid

    def _layout_id(self, bounds: tuple[float, ...]) -> int:
        lid = self._layouts.get(bounds)
        if lid is None:
            cur = self._db.execute(
                "INSERT INTO layouts(bounds) VALUES (?)", (json.dumps(list(bounds)),)
            )
            lid = int(cur.lastrowid or 0)
            self._layouts[bounds] = lid
            self._bounds[lid] = bounds
        return lid

    def _stream_id(self, target: str, model_name: str) -> int:
        sid = self._streams.get((target, model_name))
        if sid is None:
            cur = self._db.execute(
                "INSERT INTO streams(target, model_name) VALUES (?, ?)", (target, model_name)
            )
            sid = int(cur.lastrowid or 0)
            self._streams[(target, model_name)] = sid
        return sid

    # -- write health -----------------------------------------------------------------------
    def _rollback(self, exc: BaseException, writer: str) -> None:
        """Roll back after a failed write (under the lock) and remember a store error.

        SQLite rolls back by itself after some errors (``SQLITE_FULL``, ``SQLITE_IOERR``…);
        a second ROLLBACK would then raise "no transaction is active" and hide the cause.
        """
        if self._db.in_transaction:
            self._db.execute("ROLLBACK")
        self._rollups.reload()  # shapes and marks written in the transaction are gone
        self._health.failed(writer, exc)

    def health(self) -> StoreHealth:
        """The write path's health: ok unless some writer's latest write failed and no
        scrape round has been written since."""
        with self._lock:
            return self._health.health()

    # -- generic access for the repositories of other aggregates ----------------------------
    @contextmanager
    def transaction(self, writer: str = "other") -> Iterator[sqlite3.Connection]:
        """Run statements in one transaction under the store's lock (commit or roll back);
        ``writer`` names the kind of write for :meth:`health`."""
        with self._lock:
            self._db.execute("BEGIN")
            try:
                yield self._db
                self._db.execute("COMMIT")
            except BaseException as exc:
                self._rollback(exc, writer)
                raise
            self._health.wrote(writer)

    def fetchall(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        """Run a read query under the store's lock."""
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    def stream_id(self, target: str, model_name: str) -> int:
        """The id of a stream, created on first use."""
        with self._lock:
            return self._stream_id(target, model_name)

    # -- writes ---------------------------------------------------------------------------
    def write_round(
        self,
        scrapes: Sequence[ScrapeRecord],
        deltas: Sequence[IntervalDelta],
        snapshots: Sequence[tuple[str, float, StreamSnapshot]],
    ) -> None:
        """Write one scrape round (health, deltas, latest snapshots) in one transaction."""
        with self._lock:
            self._db.execute("BEGIN")
            try:
                self._db.executemany(
                    "INSERT OR REPLACE INTO scrapes VALUES (?,?,?,?,?,?,?,?)",
                    [
                        (
                            s.target,
                            s.ts,
                            int(s.ok),
                            s.error_kind,
                            s.error,
                            s.duration,
                            s.bytes,
                            s.parse_errors,
                        )
                        for s in scrapes
                    ],
                )
                rows = []
                for d in deltas:
                    sid = self._stream_id(d.target, d.model_name)
                    if self._rollups.is_late(sid, d.end):  # its minute is rolled up already
                        self._rollups.write_late(sid, d)
                        continue
                    rows.append((sid, d.end, d.start, int(d.reset), self._rollups.row(d)))
                self._db.executemany("INSERT OR REPLACE INTO intervals VALUES (?,?,?,?,?)", rows)
                self._db.executemany(
                    "INSERT OR REPLACE INTO last_snapshot VALUES (?,?,?,?)",
                    [(t, s.model_name, ts, encode_stream(s)) for t, ts, s in snapshots],
                )
                self._db.execute("COMMIT")
            except BaseException as exc:
                self._rollback(exc, "rounds")
                raise
            self._writes += 1
            self._recent.add(deltas)
            self._health.wrote("rounds")

    def enforce_retention(
        self, now: float, retention_s: float, rollup_retention_s: float | None = None
    ) -> int:
        """Drop raw deltas and scrape rows older than the retention, and roll-ups older
        than ``rollup_retention_s`` (never before the raw data; None: keep them); return
        the rows removed. Minutes not rolled up yet are rolled up first, so no delta
        leaves before its roll-ups are written."""
        cutoff = now - retention_s
        rollup_cutoff = (
            -math.inf if rollup_retention_s is None else now - max(retention_s, rollup_retention_s)
        )
        self.roll_up(cutoff)
        with self._lock:
            removed = 0
            try:
                removed += self._rollups.drop_before(cutoff, rollup_cutoff)
                for table, column in (
                    ("scrapes", "ts"),
                    ("diagnoses", "end_ts"),
                    ("alert_history", "at"),
                    ("silences", "ends_at"),
                ):
                    cur = self._db.execute(f"DELETE FROM {table} WHERE {column} < ?", (cutoff,))
                    removed += int(cur.rowcount)
                cur = self._db.execute(
                    "DELETE FROM outbox WHERE delivered IS NOT NULL AND delivered < ?", (cutoff,)
                )
            except sqlite3.Error as exc:
                self._rollback(exc, "retention")
                raise
            self._health.wrote("retention")
            return removed + int(cur.rowcount)

    def roll_up(
        self,
        until: float,
        *,
        pace: Callable[[], None] | None = None,
        deadline: float | None = None,
        stop: threading.Event | None = None,
    ) -> int:
        """Roll up every stream's minutes that ended at or before ``until`` and are not
        rolled up yet (:mod:`app.store.rollups`), a chunk (at most an hour of a stream) per
        transaction, every stream's next chunk in turn (a stream back-filling a long
        history does not hold the others back), calling ``pace`` between chunks; stop
        after the chunk that passes ``deadline`` (``time.monotonic()``) or once ``stop``
        is set. Return the minutes written.

        Deltas the store holds in memory (:mod:`app.store.recent`) are not decoded again.
        """
        upto = math.floor(until / MINUTE) * MINUTE
        with self._lock:
            pending = sorted(self._streams.items(), key=lambda kv: kv[1])
        done = 0
        while pending:
            more = []
            for stream, sid in pending:
                with self.transaction("rollups"):
                    chunk = self._rollups.next_chunk(sid, upto)
                    if chunk is None:
                        continue
                    rows = self._rollups.head_rows(sid, *chunk)
                    held = self._recent.get(stream, *chunk)
                    if held is None or len(held) != len(rows):
                        held = self._rollups.decode_rows(rows, *stream)
                    done += self._rollups.pack(sid, *chunk, rows, held)
                more.append((stream, sid))
                if pace is not None:
                    pace()
                if deadline is not None and time.monotonic() > deadline:
                    return done
                if stop is not None and stop.is_set():
                    return done
            pending = more
        return done

    # -- reads ----------------------------------------------------------------------------
    def streams(self, target: str | None = None) -> list[tuple[str, str]]:
        """Known (target, model_name) pairs, optionally for one target."""
        with self._lock:
            return sorted(k for k in self._streams if target is None or k[0] == target)

    def intervals(
        self, target: str, model_name: str, start: float, end: float
    ) -> list[IntervalDelta]:
        """Interval deltas of a stream whose end lies in ``(start, end]``, oldest first
        (from the minute blocks, then the rows not rolled up yet).

        Recent ones may be the very objects written (:mod:`app.store.recent`): callers
        must not change what they get.
        """
        stream = (target, model_name)
        with self._lock:
            held = self._recent.get(stream, start, end)
            if held is not None:
                return held
            sid = self._streams.get(stream)
            if sid is None:
                return []
            blocks = self._rollups.block_rows(sid, start, end)
            rows = self._db.execute(
                "SELECT end_ts, start_ts, reset, payload FROM intervals "
                "WHERE stream_id = ? AND end_ts > ? AND end_ts <= ? ORDER BY end_ts",
                (sid, start, end),
            ).fetchall()
            writes = self._writes
        deltas = [
            d
            for d in self._rollups.decode_blocks(blocks, target, model_name)
            if start < d.end <= end
        ]
        deltas += self._rollups.decode_rows(rows, target, model_name)
        with self._lock:
            if self._writes == writes:  # nothing committed since the read
                self._recent.fill(stream, start, end, deltas)
        return deltas

    def has_deltas(self, target: str, model_name: str, start: float, end: float) -> bool:
        """Whether a stream has a delta ending in ``(start, end]``, as ``intervals`` would
        find, without decoding the minutes wholly inside the range (a block holds one
        minute's deltas, never none): only its two edge minutes may need reading."""
        stream = (target, model_name)
        with self._lock:
            held = self._recent.get(stream, start, end)
            if held is not None:
                return bool(held)
            sid = self._streams.get(stream)
            if sid is None:
                return False
            found = self._db.execute(
                "SELECT 1 FROM intervals WHERE stream_id = ? AND end_ts > ? AND end_ts <= ? "
                "UNION ALL SELECT 1 FROM interval_blocks WHERE stream_id = ? AND end_ts >= ? "
                "AND end_ts <= ? LIMIT 1",
                (sid, start, end, sid, start + MINUTE, end),
            ).fetchone()
        if found is not None:
            return True
        # No whole minute inside: the edges (at most two blocks) decide.
        return bool(
            self.intervals(target, model_name, start, min(end, start + 2 * MINUTE))
        ) or bool(self.intervals(target, model_name, max(start, end - 2 * MINUTE), end))

    def rollups(
        self, target: str, model_name: str, start: float, end: float, res: float
    ) -> Iterator[RollupPart]:
        """Roll-ups of a stream covering ``(start, end]``, oldest first, for windows whose
        edges are multiples of ``res`` (``MINUTE`` or ``HOUR``).

        Each is a whole ``res`` span where that roll-up is written, else a minute: the
        minute roll-ups of an hour not closed yet, and minutes rolled up on the fly from
        the deltas not rolled up yet. Parsed one at a time, as they are read.
        """
        if res not in (MINUTE, HOUR):
            raise ValueError(f"no roll-up of {res:g} s")
        with self._lock:
            sid = self._streams.get((target, model_name))
            if sid is None:
                return iter(())
            stored, raw_from = self._rollups.stored_parts(sid, start, end, res)
        fresh = self.intervals(target, model_name, raw_from, end) if raw_from < end else []
        return itertools.chain(stored, rollups_of(fresh, MINUTE))

    def first_end(self, target: str, model_name: str) -> float | None:
        """The end of a stream's oldest stored delta, raw or held in a minute roll-up
        (retention may have dropped its raw deltas); None: it has none."""
        with self._lock:
            sid = self._streams.get((target, model_name))
            if sid is None:
                return None
            rolled = self._rollups.first_rolled_end(sid)
            if rolled is not None:
                return rolled
            block = self._rollups.first_block(sid)
            row = self._db.execute(
                "SELECT MIN(end_ts) FROM intervals WHERE stream_id = ?", (sid,)
            ).fetchone()
        if block is not None:
            deltas = self._rollups.decode_blocks([block], target, model_name)
            if deltas:
                return deltas[0].end
        return None if row is None or row[0] is None else float(row[0])

    def import_rollups(self, target: str, model_name: str, minutes: Sequence[Rollup]) -> int:
        """Write history of a stream kept only as roll-ups: its minute roll-ups (whole
        minutes, oldest first, after anything stored of the stream) and the hour
        roll-ups they add up to — what retention leaves of raw deltas older than
        ``storage.retention_days``, written without them (a back-fill, a benchmark's
        month). Deltas written later continue from there. Return the minutes written."""
        with self.transaction("rollups"):
            sid = self._stream_id(target, model_name)
            return self._rollups.import_minutes(sid, minutes)

    def _of_targets(self, sql: str, targets: Collection[str] | None, tail: str = "") -> list[Any]:
        """Rows of ``sql`` (which ends in a WHERE clause's place), for every target or
        for ``targets`` only (by index, a few hundred names a query)."""
        with self._lock:
            if targets is None:
                return self._db.execute(sql + tail).fetchall()
            names, rows = list(targets), []
            for i in range(0, len(names), 500):
                chunk = names[i : i + 500]
                where = f" WHERE target IN ({','.join('?' * len(chunk))})"
                rows += self._db.execute(sql + where + tail, chunk).fetchall()
            return rows

    def last_snapshots(
        self, targets: Collection[str] | None = None
    ) -> dict[str, tuple[float, dict[str, StreamSnapshot]]]:
        """The latest cumulative snapshot per target (of ``targets`` when given), to
        resume deltas after a restart or when a target comes back."""
        out: dict[str, tuple[float, dict[str, StreamSnapshot]]] = {}
        rows = self._of_targets("SELECT target, ts, payload FROM last_snapshot", targets)
        for target, ts, payload in rows:
            stream = decode_stream(payload)
            prev_ts, streams = out.get(target, (ts, {}))
            streams[stream.model_name] = stream
            out[target] = (max(prev_ts, ts), streams)
        return out

    def last_scrapes(self, targets: Collection[str] | None = None) -> dict[str, ScrapeRecord]:
        """The most recent scrape record of every target (of ``targets`` when given)."""
        rows = self._of_targets(
            "SELECT target, MAX(ts), ok, error_kind, error, duration, bytes, parse_errors "
            "FROM scrapes",
            targets,
            " GROUP BY target",
        )
        return {
            r[0]: ScrapeRecord(r[0], r[1], bool(r[2]), r[3], r[4], r[5], r[6], r[7]) for r in rows
        }

    def scrapes(self, target: str, start: float, end: float) -> list[ScrapeRecord]:
        """Scrape records of one target in ``(start, end]``, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT target, ts, ok, error_kind, error, duration, bytes, parse_errors "
                "FROM scrapes WHERE target = ? AND ts > ? AND ts <= ? ORDER BY ts",
                (target, start, end),
            ).fetchall()
        return [ScrapeRecord(r[0], r[1], bool(r[2]), r[3], r[4], r[5], r[6], r[7]) for r in rows]

    def release_targets(self, targets: set[str]) -> None:
        """Drop what is held in memory of these targets' streams (they are no longer
        scraped); their history stays in the file."""
        with self._lock:
            self._recent.drop_targets(targets)

    def held_streams(self) -> int:
        """Streams whose newest deltas are held in memory (:mod:`app.store.recent`)."""
        with self._lock:
            return self._recent.streams()

    def size_bytes(self) -> int:
        """Bytes used by the database pages (excluding the WAL)."""
        with self._lock:
            (count,) = self._db.execute("PRAGMA page_count").fetchone()
            (size,) = self._db.execute("PRAGMA page_size").fetchone()
        return int(count) * int(size)

    def checkpoint(self) -> None:
        """Fold the WAL into the main file."""
        with self._lock:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        with self._lock:
            self._db.close()
