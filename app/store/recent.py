"""The newest interval deltas of every stream, kept in memory in front of the store.

Every alert round windows every stream's last minute; read from SQLite, that is a dozen
deltas a stream to decode again each time (at 1,000 targets, most of a round's CPU).
The store hands each delta it writes to :class:`RecentDeltas` as well, and a read whose
range lies inside what is held is answered from memory.

**What is held.** Per stream, the deltas with ``end > after`` — all of them, in end
order. A stream is held once a read from the store has filled it — a read that reaches
the newest delta written to the stream since start-up, so nothing after it is missing;
from then on every delta the store commits is added, and deltas
older than ``keep_s`` before the stream's newest are dropped (``after`` moves up to the
last one dropped). A stream nobody reads recently is not held at all.

**How.** Packed (:mod:`app.store.deltapack`): as the objects the scrape built they were
6.5 kB a delta, some 100 MB at 1,000 streams; packed, 1.5 kB. A read unpacks what it
returns (12–18 µs a delta), so every read gets new objects.

Pure: no I/O; the store calls it under its own lock.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence

from app.model import IntervalDelta
from app.store.deltapack import PackedDelta, pack, unpack

__all__ = ["RecentDeltas"]

Stream = tuple[str, str]


class _Held:
    """One stream's held deltas, packed (:mod:`app.store.deltapack`), and their ends."""

    __slots__ = ("after", "ends", "packed", "stream")

    def __init__(self, stream: Stream, after: float, deltas: Sequence[IntervalDelta]) -> None:
        self.stream = stream
        self.after = after
        self.ends: list[float] = []
        self.packed: list[PackedDelta | IntervalDelta] = []
        for d in deltas:
            self.ends.append(d.end)
            self.packed.append(self._pack(d))

    def _pack(self, d: IntervalDelta) -> PackedDelta | IntervalDelta:
        """``d`` packed, sharing the layout of the newest packed delta when it is the same."""
        last = self.packed[-1] if self.packed else None
        return pack(d, last.layout if isinstance(last, PackedDelta) else None)

    def put(self, d: IntervalDelta) -> None:
        """Add ``d``, replacing a delta with the same end (as the store replaces it)."""
        if d.end <= self.after:
            return
        p = self._pack(d)
        if not self.ends or d.end > self.ends[-1]:
            self.ends.append(d.end)
            self.packed.append(p)
            return
        i = bisect.bisect_left(self.ends, d.end)
        if i < len(self.ends) and self.ends[i] == d.end:
            self.packed[i] = p
        else:
            self.ends.insert(i, d.end)
            self.packed.insert(i, p)

    def between(self, start: float, end: float) -> list[IntervalDelta]:
        """The held deltas ending in ``(start, end]``, unpacked, oldest first."""
        lo = bisect.bisect_right(self.ends, start)
        hi = bisect.bisect_right(self.ends, end)
        target, model_name = self.stream
        return [
            unpack(p, target, model_name, at)
            for at, p in zip(self.ends[lo:hi], self.packed[lo:hi], strict=True)
        ]

    def trim(self, keep_s: float) -> None:
        if not self.ends:
            return
        cut = bisect.bisect_left(self.ends, self.ends[-1] - keep_s)
        if cut:
            self.after = self.ends[cut - 1]
            del self.ends[:cut], self.packed[:cut]


class RecentDeltas:
    """The last ``keep_s`` seconds of deltas of the streams that are read."""

    def __init__(self, keep_s: float) -> None:
        self.keep_s = keep_s
        self._held: dict[Stream, _Held] = {}
        # The newest delta end written to each stream since start-up (any stream).
        self._newest: dict[Stream, float] = {}
        self.hits = 0
        self.misses = 0

    def get(self, stream: Stream, start: float, end: float) -> list[IntervalDelta] | None:
        """The deltas ending in ``(start, end]``, oldest first; None if not all are held."""
        held = self._held.get(stream)
        if held is None or start < held.after:
            self.misses += 1
            return None
        self.hits += 1
        return held.between(start, end)

    def fill(
        self, stream: Stream, start: float, end: float, deltas: Sequence[IntervalDelta]
    ) -> None:
        """Learn a store read: ``deltas`` are every delta ending in ``(start, end]``.

        Kept only when the read reaches the newest delta written to the stream (so it
        holds every delta ending after ``start``) and starts within ``keep_s`` of it.
        """
        newest = self._newest.get(stream)
        if self.keep_s <= 0 or newest is None or end < newest or start < newest - self.keep_s:
            return
        held = self._held.get(stream)
        if held is not None and start >= held.after:
            return  # already held
        fresh = self._held[stream] = _Held(stream, start, deltas)
        fresh.trim(self.keep_s)

    def add(self, deltas: Iterable[IntervalDelta]) -> None:
        """Deltas the store has just committed (only held streams keep them)."""
        touched: dict[Stream, _Held] = {}
        newest = self._newest
        for d in deltas:
            key = (d.target, d.model_name)
            if d.end > newest.get(key, -math.inf):
                newest[key] = d.end
            held = self._held.get(key)
            if held is not None:
                held.put(d)
                touched[key] = held
        for held in touched.values():
            held.trim(self.keep_s)

    def drop_targets(self, targets: set[str]) -> None:
        """Hold nothing of these targets' streams any more (they are no longer scraped)."""
        for book in (self._held, self._newest):
            for stream in [s for s in book if s[0] in targets]:
                del book[stream]

    def forget(self) -> None:
        """Hold nothing (after a change the store did not make through ``add``)."""
        self._held.clear()
        self._newest.clear()

    def streams(self) -> int:
        """Streams known here: held, or with a delta written since start-up."""
        return len(self._held.keys() | self._newest.keys())

    def __len__(self) -> int:
        return sum(len(h.ends) for h in self._held.values())
