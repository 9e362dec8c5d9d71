"""SLO counts of a stream over any range, from cached 5-minute chunks and whole hours.

A burn rate over ``w`` ending at ``end`` is the SLO's counts (``app.fleet.slo``) over
``(end − w, end]``, summed over the fleet's replicas (``app.fleet.tracker``). Counts are
additive, so they are kept per stream in aligned **5-minute chunks**
``(k·300, (k+1)·300]`` (an interval delta belongs to the chunk containing its end, as it
belongs to the window containing it) and in **whole hours** of chunks. A range is then:
the deltas of its two partial chunks, read from the source, plus cached chunks and
hours. A chunk is cached once it is *closed* (ends before ``closed_until``: no delta can
still arrive for it). What is kept as the store ages — chunks near the windows' edges,
a day of hours, whole days beyond — is :mod:`app.fleet.count_fold`'s: a stream's cache
stops growing after a day.

Where the source also has roll-ups (:mod:`app.fleet.rollup_counts`: the store), closed
chunks are counted from minute roll-ups and whole hours from hour roll-ups: a month's
budget is 720 rows, and it still counts once the raw deltas are gone.

A long range (a budget's period) may be filled a bounded number of chunks per call,
newest first (``fill``); the range then says from when its counts really start.

Pure apart from reading deltas through :class:`~app.fleet.deltas.DeltaSource`; time is
passed in.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from app.fleet.count_fold import DAY_HOURS, edge_chunks, edge_hours, fold_days
from app.fleet.deltas import DeltaSource, Stream
from app.fleet.packed import PackedCounts, pack, unpack
from app.fleet.rollup_counts import RollupSource, part_counts, rollups_of_source
from app.fleet.slo import SloCounts, SloSpec, delta_counts
from app.model import IntervalDelta

if TYPE_CHECKING:
    from array import array

    Packed = array[float] | None  # ``app.fleet.packed.pack``'s form of some counts

__all__ = ["CHUNK_S", "HOUR", "CountCache"]

CHUNK_S = 300.0
HOUR = 12  # chunks per hour
DAY = HOUR * DAY_HOURS  # chunks per day
MINUTE_S = 60.0  # a window's head chunk is summed from its minutes (see CountCache._head)


class CountCache:
    """SLO counts per stream in closed 5-minute chunks and whole hours, for one SLO key."""

    def __init__(self, source: DeltaSource, spec: SloSpec, chunk_s: float = CHUNK_S) -> None:
        self.source = source
        self.spec = spec
        self.chunk_s = chunk_s
        # Packed (``app.fleet.packed``): chunks near the edges, a day of hours, and the
        # period's whole days (day index: hour // 24) per stream (``app.fleet.count_fold``).
        self.chunks: dict[Stream, PackedCounts] = {}
        self.hours: dict[Stream, PackedCounts] = {}
        self.days: dict[Stream, PackedCounts] = {}
        # Head chunks: (generation last used, counts after each minute boundary, packed).
        self.minutes: dict[tuple[Stream, int], tuple[int, list[Packed]]] = {}
        # The open region's counts, read once per evaluation: every window shares it.
        self.tails: dict[tuple[Stream, float, float], SloCounts] = {}
        # Per stream, the chunk of its oldest delta (read once per evaluation, as a
        # backfill may add older ones): the chunks before it are empty, and are neither
        # read nor kept — a month's budget of a young stream would be 8,640 of them.
        self.floors: dict[Stream, int] = {}
        # Sums of runs of whole hours (``_hours_sum``), by the generation last used.
        self.hour_runs: dict[tuple[Stream, int, int], tuple[int, Packed]] = {}
        # Closed minutes of the open region, per stream, until their chunk is cached.
        self.open_minutes: dict[Stream, dict[int, Packed]] = {}
        self.generation = 0

    def begin(self) -> None:
        """A new evaluation: forget the open regions, drop head minutes unused since the
        previous one (a head moves on by one evaluation step at a time)."""
        self.generation += 1
        self.tails.clear()
        self.floors.clear()
        old = self.generation - 1  # kept: what the previous evaluation used
        for key in [k for k, (g, _) in self.minutes.items() if g < old]:
            del self.minutes[key]
        for run in [k for k, (g, _) in self.hour_runs.items() if g < old]:
            del self.hour_runs[run]

    def _floor(self, stream: Stream) -> int:
        """The chunk holding the stream's oldest delta; every chunk before it is empty
        (a source that cannot tell gives the lowest index: nothing is assumed empty)."""
        k = self.floors.get(stream)
        if k is None:
            first_end = getattr(self.source, "first_end", None)
            if not callable(first_end):
                k = -(1 << 62)
            else:
                first = first_end(stream[0], stream[1])
                k = (1 << 62) if first is None else math.ceil(first / self.chunk_s) - 1
            self.floors[stream] = k
        return k

    def _read(self, stream: Stream, start: float, end: float) -> SloCounts:
        if end <= start:
            return SloCounts()
        return delta_counts(self.source.intervals(stream[0], stream[1], start, end), self.spec)

    def _tail(self, stream: Stream, start: float, end: float, closed_until: float) -> SloCounts:
        """Counts over the open region ``(start, end]`` (``start`` on the chunk grid).

        Its closed whole minutes are counted once and kept (``open_minutes``) until their
        chunk is cached, which is then their sum: so an evaluation reads only the minute
        or so that is still open, and a chunk that closes is not read again.
        """
        key = (stream, start, end)
        counts = self.tails.get(key)
        if counts is None:
            edge = start
            minutes = SloCounts()
            if self.chunk_s % MINUTE_S == 0:
                m0 = round(start / MINUTE_S)
                m1 = math.floor(min(end, closed_until) / MINUTE_S)
                if m1 > m0:
                    minutes = self._closed_minutes(stream, m0, m1)
                    edge = m1 * MINUTE_S
            counts = self.tails[key] = minutes + self._read(stream, edge, end)
        return counts

    def _short(self, stream: Stream, start: float, end: float, closed_until: float) -> SloCounts:
        """Counts over a range holding no whole closed chunk (the 5-minute window): its
        closed whole minutes from ``open_minutes``, the partial ones read."""
        if self.chunk_s % MINUTE_S == 0:
            m0 = math.ceil(start / MINUTE_S - 1e-9)
            m1 = math.floor(min(end, closed_until) / MINUTE_S)
            if m1 > m0:
                return (
                    self._read(stream, start, m0 * MINUTE_S)
                    + self._closed_minutes(stream, m0, m1)
                    + self._read(stream, m1 * MINUTE_S, end)
                )
        return self._read(stream, start, end)

    def _closed_minutes(self, stream: Stream, m0: int, m1: int) -> SloCounts:
        """The sum of closed minutes ``m0 .. m1-1``, reading only those not yet kept."""
        held = self.open_minutes.setdefault(stream, {})
        missing = [m for m in range(m0, m1) if m not in held]
        if missing:
            lo = missing[0]
            groups: dict[int, list[IntervalDelta]] = {m: [] for m in range(lo, m1)}
            for d in self.source.intervals(stream[0], stream[1], lo * MINUTE_S, m1 * MINUTE_S):
                m = math.ceil(d.end / MINUTE_S) - 1
                if m in groups:
                    groups[m].append(d)
            for m, ds in groups.items():
                if m not in held:
                    held[m] = pack(delta_counts(ds, self.spec)) if ds else None
        return _total(unpack(held[m]) for m in range(m0, m1))

    def _chunk_minutes(self, stream: Stream, k: int) -> list[SloCounts] | None:
        """The counts of each minute of the closed chunk ``k`` when the open region kept
        some of them (the rest, its last minutes, are read); None when it kept none."""
        held = self.open_minutes.get(stream)
        if not held or self.chunk_s % MINUTE_S:
            return None
        n = round(self.chunk_s / MINUTE_S)
        first = k * n
        if not any(m in held for m in range(first, first + n)):
            return None
        self._closed_minutes(stream, first, first + n)  # reads only what is missing
        return [unpack(held[m]) for m in range(first, first + n)]

    def _head(self, stream: Stream, start: float, k: int) -> SloCounts:
        """Counts over ``(start, (k+1)·chunk]`` inside the closed chunk ``k``.

        Read once, the chunk's counts after each whole minute are kept while the head
        stays in it; then only the deltas up to the next minute are read again. Exact:
        a delta belongs to the minute containing its end, as it belongs to the chunk.
        """
        c = self.chunk_s
        base = k * c
        n = max(1, round(c / MINUTE_S))
        m = math.ceil((start - base) / MINUTE_S - 1e-9)
        if m <= 0 or m >= n:  # the whole chunk, or none of it
            return self._read(stream, start, base + c)
        entry = self.minutes.get((stream, k))
        if entry is None:
            per_minute = self._chunk_minutes(stream, k)
            if per_minute is None:
                groups: list[list[IntervalDelta]] = [[] for _ in range(n)]
                for d in self.source.intervals(stream[0], stream[1], base, base + c):
                    j = min(n - 1, max(0, math.ceil((d.end - base) / MINUTE_S) - 1))
                    groups[j].append(d)
                per_minute = [delta_counts(g, self.spec) for g in groups]
            suffix: list[Packed] = [None] * (n + 1)
            acc = SloCounts()
            for j in range(n - 1, -1, -1):
                acc = acc + per_minute[j]
                suffix[j] = pack(acc)
        else:
            suffix = entry[1]
        self.minutes[(stream, k)] = (self.generation, suffix)
        edge = base + min(m, n) * MINUTE_S
        rest = unpack(suffix[m]) if m < n else SloCounts()
        return self._read(stream, start, edge) + rest

    def _rolled(self) -> RollupSource | None:
        """The source's roll-ups, when it has them and chunks tile its minutes and hours."""
        if self.chunk_s % MINUTE_S or self.chunk_s * HOUR != 3600.0:
            return None
        return rollups_of_source(self.source)

    def _load(self, stream: Stream, k0: int, k1: int) -> None:
        """Read chunks ``k0 .. k1-1`` in one go and cache each (empty ones too); from
        roll-ups where the source has them (:meth:`_load_rolled`)."""
        c = self.chunk_s
        cache = self.chunks.setdefault(stream, PackedCounts())
        while k1 > k0:  # the newest chunks, from the minutes the open region kept
            kept = self._chunk_minutes(stream, k1 - 1)
            if kept is None:
                break
            cache[k1 - 1] = _total(kept)
            k1 -= 1
        if k1 <= k0:
            return
        rolled = self._rolled()
        if rolled is not None:
            self._load_rolled(rolled, stream, k0, k1)
            return
        buckets: dict[int, list[IntervalDelta]] = {k: [] for k in range(k0, k1)}
        for d in self.source.intervals(stream[0], stream[1], k0 * c, k1 * c):
            k = math.ceil(d.end / c) - 1
            if k in buckets:
                buckets[k].append(d)
        empty = SloCounts()  # most of a fresh history is chunks before the first delta
        for k, ds in buckets.items():
            cache[k] = delta_counts(ds, self.spec) if ds else empty

    def _load_rolled(self, rolled: RollupSource, stream: Stream, k0: int, k1: int) -> None:
        """Chunks ``k0 .. k1-1`` from the source's roll-ups: each whole hour inside from
        its hour roll-up (kept as an hour, no chunks), the rest from minute roll-ups; a
        whole day older than the last one (which the windows read by the hour) straight
        into ``days``. Read a day at most at a time, each roll-up counted as it comes: a
        month's fill holds a day's rows at once, and a month's hours never."""
        c = self.chunk_s
        cache = self.chunks.setdefault(stream, PackedCounts())
        h0, h1 = -(-k0 // HOUR), k1 // HOUR
        spans = [(k0, k1, MINUTE_S)]
        if h0 < h1:
            spans = [(k0, h0 * HOUR, MINUTE_S), (h1 * HOUR, k1, MINUTE_S)]
            cuts = [h0 * HOUR, *range((h0 * HOUR // DAY + 1) * DAY, h1 * HOUR, DAY), h1 * HOUR]
            spans += [(lo, hi, c * HOUR) for lo, hi in itertools.pairwise(cuts)]
        recent = k1 - (DAY_HOURS + 2) * HOUR  # days ending before this are not read by hour
        for lo, hi, res in spans:
            if hi <= lo:
                continue
            whole: dict[int, SloCounts] = {}
            parts: dict[int, SloCounts] = {}
            for part in rolled.rollups(stream[0], stream[1], lo * c, hi * c, res):
                counts = part_counts(part, self.spec)
                if part.end - part.start > c:  # an hour's roll-up
                    whole[math.ceil(part.end / (c * HOUR)) - 1] = counts
                else:
                    k = math.ceil(part.end / c) - 1
                    parts[k] = parts[k] + counts if k in parts else counts
            if res > MINUTE_S:  # an hour with no roll-up and no minute: nothing in it
                for h in range(lo // HOUR, hi // HOUR):
                    if h not in whole and not any(
                        k in parts for k in range(h * HOUR, h * HOUR + HOUR)
                    ):
                        whole[h] = SloCounts()
            if lo % DAY == 0 and hi - lo == DAY and hi <= recent and len(whole) == DAY_HOURS:
                self.days.setdefault(stream, PackedCounts())[lo // DAY] = _total(whole.values())
                continue
            hours = self.hours.setdefault(stream, PackedCounts())
            for h, counts in whole.items():
                hours[h] = counts
            for k in range(lo, hi):
                if k // HOUR not in whole:
                    cache[k] = parts.get(k, SloCounts())

    def _ensure(self, stream: Stream, k0: int, k1: int, budget: list[int]) -> int:
        """Make chunks ``k0..k1-1`` available (cached, or inside a cached hour or a day
        wholly inside the range), newest first, loading at most ``budget[0]`` of them (a
        whole hour read from its roll-up counts as one); return the first available one
        (``k0`` unless the budget ran out)."""
        cache = self.chunks.setdefault(stream, PackedCounts())
        hours = self.hours.setdefault(stream, PackedCounts())
        days: Mapping[int, SloCounts] = self.days.get(stream, {})
        rolled = self._rolled() is not None

        def have(k: int) -> bool:
            if k in cache or k // HOUR in hours:
                return True
            d = k // DAY
            return d in days and d * DAY >= k0 and (d + 1) * DAY <= k1

        k = k1
        while k > k0:
            if k % DAY == 0 and k - DAY >= k0 and k // DAY - 1 in days:
                k -= DAY
                continue
            if k % HOUR == 0 and k - HOUR >= k0 and k // HOUR - 1 in hours:
                k -= HOUR
                continue
            if have(k - 1):
                k -= 1
                continue
            lo = k
            while lo > k0 and not have(lo - 1) and budget[0] > 0:
                hour = (
                    rolled
                    and lo % HOUR == 0
                    and lo - HOUR >= k0
                    and not any(have(j) for j in range(lo - HOUR, lo))
                )
                lo -= HOUR if hour else 1
                budget[0] -= 1
            if lo == k:  # the budget ran out
                return k
            self._load(stream, lo, k)
            k = lo
        return k0

    def _whole_hours(self, stream: Stream, h_hi: int, first: int) -> int:
        """The lowest ``h`` such that hours ``h .. h_hi-1`` are whole, counted and at or
        after chunk ``first``."""
        h = h_hi
        days: Mapping[int, SloCounts] = self.days.get(stream, {})
        while (h - 1) * HOUR >= first:
            day = h // DAY_HOURS - 1
            if h % DAY_HOURS == 0 and (h - DAY_HOURS) * HOUR >= first and day in days:
                h -= DAY_HOURS
                continue
            hours = self.hours.get(stream)
            if (hours is None or h - 1 not in hours) and self._hour(stream, h - 1) is None:
                break
            h -= 1
        return h

    def _hours_sum(self, stream: Stream, lo: int, hi: int) -> SloCounts:
        """Hours ``lo .. hi-1`` summed, kept while some window still spans exactly them
        (the budget's do for an hour): an evaluation adds one sum, not a month of hours."""
        key = (stream, lo, hi)
        got = self.hour_runs.get(key)
        if got is None:
            hours = self.hours[stream]
            days: Mapping[int, SloCounts] = self.days.get(stream, {})
            total = SloCounts()
            h = lo
            while h < hi:  # a folded day where one fits, else its hours
                if h % DAY_HOURS == 0 and h + DAY_HOURS <= hi and h // DAY_HOURS in days:
                    total = total + days[h // DAY_HOURS]
                    h += DAY_HOURS
                else:
                    total = total + hours[h]
                    h += 1
            got = (self.generation, pack(total))
        self.hour_runs[key] = (self.generation, got[1])
        return unpack(got[1])

    def _hour(self, stream: Stream, h: int) -> SloCounts | None:
        hours = self.hours.setdefault(stream, PackedCounts())
        if h in hours:
            return hours[h]
        chunks = self.chunks.get(stream)
        if chunks is None:
            return None
        parts = [chunks.get(k) for k in range(h * HOUR, (h + 1) * HOUR)]
        if any(p is None for p in parts):
            return None
        total = hours[h] = _total(p for p in parts if p is not None)
        return total

    def range(
        self,
        stream: Stream,
        start: float,
        end: float,
        *,
        closed_until: float,
        fill: list[int] | None = None,
    ) -> tuple[SloCounts, float]:
        """Counts over ``(start, end]`` and the time they really start from (later than
        ``start`` only when the ``fill`` budget — a one-item list, decremented — ran out)."""
        c = self.chunk_s
        a = math.ceil(start / c)
        b = min(math.floor(end / c), math.floor(closed_until / c))
        if b - a < 1:  # no whole closed chunk inside: kept minutes and the edges
            return self._short(stream, start, end, closed_until), start
        budget = fill if fill is not None else [1 << 62]
        floor = self._floor(stream)
        if floor >= b:  # nothing before the open tail
            return self._tail(stream, b * c, end, closed_until), start
        lowest = max(a, floor)
        first = self._ensure(stream, lowest, b, budget)
        total = self._tail(stream, b * c, end, closed_until)
        chunks = self.chunks[stream]
        # The chunks from the start to its hour's end, in one read where some were pruned.
        missing = [k for k in range(first, min(b, (first // HOUR + 1) * HOUR)) if k not in chunks]
        if missing and first % HOUR:
            self._load(stream, missing[0], missing[-1] + 1)
        k = b
        while k > first:
            if k % HOUR == 0 and k - HOUR >= first:
                lo = self._whole_hours(stream, k // HOUR, first)
                if lo < k // HOUR:
                    total = total + self._hours_sum(stream, lo, k // HOUR)
                    k = lo * HOUR
                    continue
            if k - 1 not in chunks:  # pruned, its hour incomplete: read it again
                self._load(stream, k - 1, k)
            total = total + chunks[k - 1]
            k -= 1
        if first == lowest:  # complete: with the partial chunk before ``a`` if it can hold any
            return (total + self._head(stream, start, a - 1) if floor < a else total), start
        return total, first * c

    def prune(
        self,
        now: float,
        keep_hours_s: float,
        *,
        windows: Iterable[float] = (),
        period_starts: Iterable[float] = (),
    ) -> None:
        """Drop what a sliding evaluation at ``now`` no longer needs
        (:mod:`app.fleet.count_fold`): chunks but the last hours' and those at the start
        of each of ``windows`` (their hours stay), hours but the last day's and those at
        each of ``period_starts`` (complete days are folded), and anything older than
        ``keep_hours_s``."""
        c = self.chunk_s
        kept = {k for r in edge_chunks(now, c, HOUR, windows) for k in r}
        oldest_hour = math.floor((now - keep_hours_s) / (c * HOUR)) - 1
        for stream, chunks in self.chunks.items():
            for k in [k for k in chunks if k not in kept]:
                if self._hour(stream, k // HOUR) is not None or k < oldest_hour * HOUR:
                    del chunks[k]
            chunks.compact()
        keep_hours = edge_hours(now, c * HOUR, period_starts)
        for stream, hours in self.hours.items():
            days = self.days.setdefault(stream, PackedCounts())
            fold_days(hours, days, keep_hours)
            for h in [h for h in hours if h < oldest_hour]:
                del hours[h]
            for d in [d for d in days if (d + 1) * DAY_HOURS <= oldest_hour]:
                del days[d]
            hours.compact()
        self.tails.clear()
        # Heads and runs this evaluation did not use: the next one moves on from these.
        for head in [k for k, (g, _) in self.minutes.items() if g < self.generation]:
            del self.minutes[head]
        for run in [k for k, (g, _) in self.hour_runs.items() if g < self.generation]:
            del self.hour_runs[run]
        # Minutes of the last two chunks stay: the 5-minute window's head is in them.
        oldest_minute = math.floor((now - 2 * c) / MINUTE_S) - 1
        for minutes in self.open_minutes.values():
            for m in [m for m in minutes if m < oldest_minute]:
                del minutes[m]
        # A stream left with nothing (a removed target once its counts aged out) keeps no
        # entry: churn would add one per replaced pod for the life of the process.
        for book in (self.chunks, self.hours, self.days, self.open_minutes):
            for stream in [s for s, held in book.items() if not held]:
                del book[stream]


def _total(counts: Iterable[SloCounts]) -> SloCounts:
    """The sum of some counts (``SloCounts()`` for none)."""
    total = SloCounts()
    for c in counts:
        total = total + c
    return total
