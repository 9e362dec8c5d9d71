"""Blocks and roll-ups: what the store keeps of a stream's deltas once their minute closed.

Tables (migration 4 of :mod:`app.store.schema`):

* ``intervals``: the newest deltas, one row each (:mod:`app.store.deltacodec`), until
  their minute is rolled up; rows of an older store (JSON, :mod:`app.store.codec`) stay
  readable and are rolled up like the others.
* ``interval_blocks``: one stream's deltas ending in one minute, in one row
  (``end_ts`` = the minute's end), kept for ``storage.retention_days``: the raw history.
* ``rollups``: per stream, resolution (``res``: 60 or 3600 s) and span end, a
  :class:`~app.windows.rollup.Rollup` (:mod:`app.store.rollupcodec`), kept for
  ``storage.rollup_retention_days``. An hour is written when its last minute is.
* ``rollup_marks``: per stream, ``until``: every delta ending at or before it is in a
  block and in the minute roll-ups, every hour up to it in the hour roll-ups, and
  ``intervals`` holds only later ones. No row: nothing rolled up yet (a store written
  before roll-ups existed is back-filled from its rows this way, oldest first).

**Rolling up** (:meth:`Rollups.next_chunk`, :meth:`Rollups.pack`) moves closed minutes
after the mark into blocks and roll-ups, a chunk at a time: up to the next hour's end,
so that an hour is complete when it is written. **A delta written at or before the
mark** (a recording written into a store that already holds later data) goes into its
minute's block, and that minute and its hour are rolled up again
(:meth:`Rollups.write_late`); where retention dropped the minute's block already, the
delta is added to the minute's roll-up when it lies before or after all the deltas that
roll-up holds (elsewhere it cannot be placed exactly, and is not written).

All of it runs under the store's lock, inside the caller's transaction where it writes.
"""

from __future__ import annotations

import itertools
import math
import sqlite3
from collections.abc import Callable, Iterator, Sequence

from app.model import IntervalDelta
from app.store.codec import decode_delta
from app.store.deltacodec import (
    ROW_MAGIC,
    BlockEntry,
    Shape,
    decode_block,
    decode_row,
    encode_block,
    encode_row,
    shape_from_text,
    shape_of,
    shape_text,
)
from app.store.rollupcodec import StoredRollup, decode_rollup, encode_rollup
from app.windows.rollup import Rollup, span_end

__all__ = ["HOUR", "MINUTE", "RESOLUTIONS", "Rollups", "Shapes"]

MINUTE = 60.0
HOUR = 3600.0
RESOLUTIONS = (HOUR, MINUTE)
"""The roll-ups kept, coarsest first."""

Bounds = Callable[[int], tuple[float, ...]]
LayoutId = Callable[[tuple[float, ...]], int]
Row = tuple[float, float, int, bytes]  # end, start, reset, payload


class Shapes:
    """Delta shapes (:class:`~app.store.deltacodec.Shape`) interned in ``shapes``."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self._ids: dict[Shape, int] = {}
        self._by_id: dict[int, Shape] = {}
        for sid, text in db.execute("SELECT id, text FROM shapes"):
            shape = shape_from_text(text)
            self._ids[shape] = sid
            self._by_id[sid] = shape

    def id(self, shape: Shape) -> int:
        """The id of ``shape``, written on first use (inside the caller's transaction)."""
        sid = self._ids.get(shape)
        if sid is None:
            cur = self._db.execute("INSERT INTO shapes(text) VALUES (?)", (shape_text(shape),))
            sid = int(cur.lastrowid or 0)
            self._ids[shape] = sid
            self._by_id[sid] = shape
        return sid

    def of(self, sid: int) -> Shape:
        return self._by_id[sid]


class Rollups:
    """The blocks, roll-ups and marks of every stream (module docstring)."""

    def __init__(
        self, db: sqlite3.Connection, shapes: Shapes, layout_id: LayoutId, bounds_of: Bounds
    ) -> None:
        self._db = db
        self.shapes = shapes
        self._layout_id = layout_id
        self._bounds_of = bounds_of
        self.marks: dict[int, float] = dict(db.execute("SELECT stream_id, until FROM rollup_marks"))

    # -- encoding -------------------------------------------------------------------------
    def row(self, d: IntervalDelta) -> bytes:
        """``d`` as an ``intervals`` payload (its shape interned)."""
        return encode_row(d, self.shapes.id(shape_of(d, self._layout_id)))

    def decode_rows(self, rows: Sequence[Row], target: str, model_name: str) -> list[IntervalDelta]:
        """``intervals`` rows as deltas, oldest first (binary or the older JSON rows)."""
        out = []
        for end, start, reset, payload in rows:
            if payload.startswith(ROW_MAGIC):
                out.append(
                    decode_row(
                        payload,
                        target=target,
                        model_name=model_name,
                        start=start,
                        end=end,
                        reset=bool(reset),
                        shapes=self.shapes.of,
                        bounds_of=self._bounds_of,
                    )
                )
            else:
                out.append(
                    decode_delta(
                        payload,
                        target=target,
                        model_name=model_name,
                        start=start,
                        end=end,
                        reset=bool(reset),
                        bounds_of=self._bounds_of,
                    )
                )
        return out

    def decode_blocks(
        self, blobs: Sequence[bytes], target: str, model_name: str
    ) -> list[IntervalDelta]:
        return [
            d
            for blob in blobs
            for d in decode_block(
                blob,
                target=target,
                model_name=model_name,
                shapes=self.shapes.of,
                bounds_of=self._bounds_of,
            )
        ]

    def decode_rollups(self, rows: Sequence[tuple[float, bytes]], res: float) -> list[Rollup]:
        return [
            decode_rollup(blob, start=end - res, end=end, bounds_of=self._bounds_of)
            for end, blob in rows
        ]

    def stored(self, row: tuple[float, bytes], res: float) -> StoredRollup:
        """A roll-up row to read windows from, parsed when first asked."""
        end, blob = row
        return StoredRollup(blob, start=end - res, end=end, bounds_of=self._bounds_of)

    # -- reads ----------------------------------------------------------------------------
    def block_rows(self, sid: int, start: float, end: float) -> list[bytes]:
        """The blocks that may hold deltas ending in ``(start, end]``, oldest first."""
        mark = self.marks.get(sid)
        if mark is None or start >= mark:
            return []
        rows = self._db.execute(
            "SELECT payload FROM interval_blocks WHERE stream_id = ? AND end_ts > ? "
            "AND end_ts < ? ORDER BY end_ts",
            (sid, start, min(end, mark) + MINUTE),
        ).fetchall()
        return [r[0] for r in rows]

    def rollup_rows(
        self, sid: int, res: float, start: float, end: float
    ) -> list[tuple[float, bytes]]:
        return self._db.execute(
            "SELECT end_ts, payload FROM rollups WHERE stream_id = ? AND res = ? "
            "AND end_ts > ? AND end_ts <= ? ORDER BY end_ts",
            (sid, int(res), start, end),
        ).fetchall()

    def stored_parts(
        self, sid: int, start: float, end: float, res: float
    ) -> tuple[Iterator[StoredRollup], float]:
        """The stored roll-ups covering ``(start, end]`` up to the mark — whole ``res``
        spans where written (hours: up to the last closed one), minutes after — and where
        the deltas not rolled up yet take over (``start`` when nothing is rolled up).

        The rows are read at once, each made a :class:`StoredRollup` only when the
        iterator reaches it: a parsed roll-up is dropped with the window that read it,
        not held to the end of the range (a day of minutes held parsed made the garbage
        collector walk every object of the process once, ~0.1 s)."""
        mark = self.marks.get(sid)
        rolled = -math.inf if mark is None else min(end, mark)
        if rolled <= start:
            return iter(()), start
        cut = max(start, math.floor(rolled / HOUR) * HOUR) if res == HOUR else start
        hours = self.rollup_rows(sid, HOUR, start, cut) if res == HOUR else []
        minutes = self.rollup_rows(sid, MINUTE, cut, rolled)
        parts = itertools.chain(
            (self.stored(row, HOUR) for row in hours),
            (self.stored(row, MINUTE) for row in minutes),
        )
        return parts, rolled

    def first_rolled_end(self, sid: int) -> float | None:
        """The end of the oldest delta a minute roll-up of stream ``sid`` holds."""
        row = self._db.execute(
            "SELECT end_ts, payload FROM rollups WHERE stream_id = ? AND res = ? "
            "ORDER BY end_ts LIMIT 1",
            (sid, int(MINUTE)),
        ).fetchone()
        if row is None:
            return None
        roll = self.stored((float(row[0]), bytes(row[1])), MINUTE).rollup()
        return roll.first_end if roll.intervals else None

    def first_block(self, sid: int) -> bytes | None:
        row = self._db.execute(
            "SELECT payload FROM interval_blocks WHERE stream_id = ? ORDER BY end_ts LIMIT 1",
            (sid,),
        ).fetchone()
        return None if row is None else bytes(row[0])

    # -- rolling up -----------------------------------------------------------------------
    def next_chunk(self, sid: int, upto: float) -> tuple[float, float] | None:
        """The next ``(lo, hi]`` of stream ``sid`` to roll up, closed minutes ending at or
        before ``upto`` (a minute's end); None when there is nothing to do.

        A chunk ends at the hour holding its first new minute (or at ``upto``), so every
        hour is complete when it is written; an hour left open by the mark, which got no
        new delta since, is closed by a chunk of its own.
        """
        mark = self.marks.get(sid)
        (nxt,) = self._db.execute(
            "SELECT MIN(end_ts) FROM intervals WHERE stream_id = ? AND end_ts > ? AND end_ts <= ?",
            (sid, -math.inf if mark is None else mark, upto),
        ).fetchone()
        if mark is None:
            if nxt is None:
                return None
            lo = span_end(nxt, MINUTE) - MINUTE
        else:
            lo = mark
        open_hour = span_end(lo, HOUR)  # == lo: no hour open
        if nxt is None:
            return (lo, open_hour) if lo < open_hour <= upto else None
        first_minute = span_end(nxt, MINUTE) - MINUTE
        if lo < open_hour <= first_minute:
            return lo, open_hour
        return lo, min(upto, math.floor(first_minute / HOUR) * HOUR + HOUR)

    def head_rows(self, sid: int, lo: float, hi: float) -> list[Row]:
        return self._db.execute(
            "SELECT end_ts, start_ts, reset, payload FROM intervals WHERE stream_id = ? "
            "AND end_ts > ? AND end_ts <= ? ORDER BY end_ts",
            (sid, lo, hi),
        ).fetchall()

    def pack(
        self, sid: int, lo: float, hi: float, rows: Sequence[Row], deltas: Sequence[IntervalDelta]
    ) -> int:
        """Move the rows of ``(lo, hi]`` (``deltas``: the same, decoded) into blocks and
        roll-ups, roll up the hour ending at ``hi``, and set the mark; return the minutes
        written. Runs inside the caller's transaction."""
        minutes: dict[float, tuple[list[BlockEntry], Rollup]] = {}
        for (end, start, reset, payload), d in zip(rows, deltas, strict=True):
            e = span_end(end, MINUTE)
            held = minutes.get(e)
            if held is None:
                held = minutes[e] = ([], Rollup(e - MINUTE, e))
            entries, roll = held
            row = payload if payload.startswith(ROW_MAGIC) else self.row(d)
            entries.append(BlockEntry(end, start, bool(reset), row))
            roll.add(d)
        for e, (entries, roll) in minutes.items():
            self._db.execute(
                "INSERT OR REPLACE INTO interval_blocks VALUES (?,?,?)",
                (sid, e, encode_block(entries)),
            )
            self._put_rollup(sid, MINUTE, roll)
        if hi % HOUR == 0:
            self._roll_hour(sid, hi, lo, [roll for _, roll in minutes.values()])
        self._db.execute(
            "DELETE FROM intervals WHERE stream_id = ? AND end_ts > ? AND end_ts <= ?",
            (sid, lo, hi),
        )
        self._set_mark(sid, hi)
        return len(minutes)

    def import_minutes(self, sid: int, minutes: Sequence[Rollup]) -> int:
        """Write minute roll-ups of stream ``sid`` with no raw deltas behind them, and
        the hours they touch (``Store.import_rollups``): after everything stored (the
        mark moves past them) or before it all (an older history back-filled)."""
        if not minutes:
            return 0
        mark = self.marks.get(sid)
        (oldest,) = self._db.execute(
            "SELECT MIN(end_ts) FROM rollups WHERE stream_id = ? AND res = ?", (sid, int(MINUTE))
        ).fetchone()
        (first_row,) = self._db.execute(
            "SELECT MIN(end_ts) FROM intervals WHERE stream_id = ?", (sid,)
        ).fetchone()
        after = (mark is None or minutes[0].start >= mark) and (
            first_row is None or minutes[-1].end < first_row
        )
        before = oldest is not None and minutes[-1].end <= oldest - MINUTE
        if not (after or before):
            raise ValueError(
                f"minutes ({minutes[0].start}, {minutes[-1].end}] are neither before nor "
                "after what is stored"
            )
        hours: dict[float, list[Rollup]] = {}
        previous = -math.inf
        for roll in minutes:
            if roll.end - roll.start != MINUTE or roll.end % MINUTE:
                raise ValueError(f"({roll.start}, {roll.end}] is not a whole minute")
            if roll.start < previous:
                raise ValueError(f"minute ending {roll.end} is out of order")
            self._put_rollup(sid, MINUTE, roll)
            hours.setdefault(span_end(roll.end, HOUR), []).append(roll)
            previous = roll.end
        for hour, fresh in hours.items():  # each hour again from all its minutes
            (stored,) = self._db.execute(
                "SELECT COUNT(*) FROM rollups WHERE stream_id = ? AND res = ? "
                "AND end_ts > ? AND end_ts <= ?",
                (sid, int(MINUTE), hour - HOUR, hour),
            ).fetchone()
            if stored == len(fresh):  # the hour holds these minutes only: no read back
                self._roll_hour(sid, hour, hour - HOUR, fresh)
            else:
                self._roll_hour(sid, hour, hour, [])
        if after:
            self._set_mark(sid, previous)
        return len(minutes)

    def _roll_hour(self, sid: int, hour: float, stored_until: float, fresh: list[Rollup]) -> None:
        """Write the hour ending at ``hour`` from its minutes: those stored up to
        ``stored_until`` and the ``fresh`` ones after it."""
        parts: list[Rollup] = []
        if stored_until > hour - HOUR:
            rows = self.rollup_rows(sid, MINUTE, hour - HOUR, stored_until)
            parts = self.decode_rollups(rows, MINUTE)
        parts += [r for r in fresh if hour - HOUR < r.end <= hour]
        if not parts:
            return
        total = Rollup(hour - HOUR, hour)
        for part in parts:
            total.merge(part)
        self._put_rollup(sid, HOUR, total)

    def _put_rollup(self, sid: int, res: float, roll: Rollup) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO rollups VALUES (?,?,?,?)",
            (sid, int(res), roll.end, encode_rollup(roll, self._layout_id)),
        )

    def _set_mark(self, sid: int, until: float) -> None:
        self._db.execute("INSERT OR REPLACE INTO rollup_marks VALUES (?,?)", (sid, until))
        self.marks[sid] = until

    def reload(self) -> None:
        """Read shapes and marks again after a transaction that wrote some rolled back."""
        self.shapes = Shapes(self._db)
        self.marks = dict(self._db.execute("SELECT stream_id, until FROM rollup_marks"))

    # -- late deltas ----------------------------------------------------------------------
    def is_late(self, sid: int, end: float) -> bool:
        """Whether a delta ending at ``end`` falls where the stream is rolled up already."""
        mark = self.marks.get(sid)
        return mark is not None and end <= mark

    def write_late(self, sid: int, d: IntervalDelta) -> None:
        """Put ``d`` into its minute's block (replacing a delta with the same end) and roll
        that minute and its hour up again (module docstring)."""
        e = span_end(d.end, MINUTE)
        row = self._db.execute(
            "SELECT payload FROM interval_blocks WHERE stream_id = ? AND end_ts = ?", (sid, e)
        ).fetchone()
        if row is None:  # no raw left of this minute: add to what its roll-up holds
            deltas = [d]
            roll = Rollup(e - MINUTE, e)
            roll.add(d)
            kept = self.decode_rollups(self.rollup_rows(sid, MINUTE, e - MINUTE, e), MINUTE)
            if kept and kept[0].first_end <= d.end <= kept[0].last_end:
                return  # among the deltas it holds: no place to put it exactly
            if kept and d.end < kept[0].first_end:
                roll.merge(kept[0])
            elif kept:
                kept[0].merge(roll)
                roll = kept[0]
        else:
            deltas = [
                x for x in self.decode_blocks([row[0]], d.target, d.model_name) if x.end != d.end
            ]
            deltas.append(d)
            deltas.sort(key=lambda x: x.end)
            roll = Rollup(e - MINUTE, e)
            for x in deltas:
                roll.add(x)
        entries = [BlockEntry(x.end, x.start, x.reset, self.row(x)) for x in deltas]
        self._db.execute(
            "INSERT OR REPLACE INTO interval_blocks VALUES (?,?,?)",
            (sid, e, encode_block(entries)),
        )
        self._put_rollup(sid, MINUTE, roll)
        hour = span_end(d.end, HOUR)
        if hour <= self.marks[sid]:
            self._roll_hour(sid, hour, hour, [])

    # -- retention ------------------------------------------------------------------------
    def drop_before(self, raw_cutoff: float, rollup_cutoff: float) -> int:
        """Drop blocks ending before ``raw_cutoff``, rolled-up ``intervals`` rows before it
        and roll-ups ending before ``rollup_cutoff``; return the rows removed."""
        removed = 0
        for sql, cutoff in (
            ("DELETE FROM interval_blocks WHERE end_ts < ?", raw_cutoff),
            (
                "DELETE FROM intervals WHERE end_ts < ? AND end_ts <= COALESCE("
                "(SELECT until FROM rollup_marks m WHERE m.stream_id = intervals.stream_id),"
                " -1e308)",
                raw_cutoff,
            ),
            ("DELETE FROM rollups WHERE end_ts < ?", rollup_cutoff),
        ):
            removed += int(self._db.execute(sql, (cutoff,)).rowcount)
        return removed
