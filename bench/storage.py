"""Bytes the store needs per stream per day at a 5 s scrape interval, and where they go.

Records an hour of the simulator's ``incident`` scenario (healthy → spike → recovery, so
histograms move in many buckets) and feeds every page through the real path — parse,
normalise, interval deltas, store — into a fresh SQLite file, rolling up closed minutes
every minute as the service does (``Store.roll_up``: minute blocks of raw deltas, minute
and hour roll-ups; the newest minute or two stay one row each). Scrape-health rows and
the last snapshot are included. Then it prints:

* ``store_mb_per_stream_day``: the file's pages in use (free pages left by rows that
  moved into blocks are reused by the next ones) per interval, scaled to 17,280
  intervals a day — the headline;
* ``table_mb_per_stream_day.*``: the same per table (``dbstat``: each table's pages,
  its b-tree and slack included);
* ``field_bytes_per_interval.*``: a delta's binary encoding (``app.store.deltacodec``)
  field by field, before its block is compressed, and ``block_bytes_per_interval``
  after;
* ``json_*``: the same deltas in the encoding used before blocks and roll-ups (JSON and
  zlib, one row each, ``app.store.codec``), written side by side into a table of that
  layout: the "before".

Reproduce: ``.venv/bin/python bench/storage.py [--hours H] [--scenario NAME]``.
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.model import IntervalDelta, Snapshot  # noqa: E402
from app.scrape.reader import PageReader  # noqa: E402
from app.sim.record import record  # noqa: E402
from app.store import deltacodec, rollupcodec  # noqa: E402
from app.store.codec import encode_delta  # noqa: E402
from app.store.sqlite import ScrapeRecord, Store  # noqa: E402
from app.windows.delta import snapshot_deltas  # noqa: E402

INTERVALS_PER_DAY = 86400 / 5
BUDGET_MB = 5.0
SETTLE_S = 16.0  # the service's: a scrape interval, its timeout and a second


def _size(out: bytearray, put: Callable[[bytearray, Any], None], value: Any) -> int:
    before = len(out)
    put(out, value)
    return len(out) - before


def field_bytes(deltas: list[IntervalDelta]) -> dict[str, float]:
    """Bytes of each part of the binary encoding of ``deltas``, per delta (before zlib)."""
    parts: Counter[str] = Counter()
    out = bytearray()
    num, varint = deltacodec._number, deltacodec._varint
    prev_end = math.nan
    for d in deltas:
        parts["times and flags"] += 1 + 8 + (0 if d.start == prev_end else 8)
        prev_end = d.end
        parts["shape id"] += 1
        for hd in d.histograms.values():
            implied = math.fsum(hd.buckets.values()) == hd.count
            parts["histogram counts"] += 1 if implied else _size(out, num, float(hd.count))
            parts["histogram sums"] += _size(out, num, float(hd.sum))
            parts["bucket indexes"] += _size(out, varint, len(hd.buckets))
            prev = -1
            for i in sorted(hd.buckets):
                parts["bucket indexes"] += _size(out, varint, i - prev - 1)
                parts["bucket increases"] += _size(out, num, float(hd.buckets[i]))
                prev = i
        for v in d.counters.values():
            parts["counters"] += _size(out, num, float(v))
        for v in d.gauges.values():
            parts["gauges"] += _size(out, num, float(v))
    return {k: v / len(deltas) for k, v in parts.items()}


def rollup_fields(path: Path) -> tuple[int, dict[str, float]]:
    """Minute roll-ups: how many, and the bytes of each key of their JSON per roll-up
    (before zlib; ``h`` histograms, ``c`` counters, ``g`` gauges, ``t``/``v``/``n``/``r``
    times, covered seconds, deltas, resets, ``m`` missing)."""
    db = sqlite3.connect(path)
    try:
        rows = db.execute("SELECT payload FROM rollups WHERE res = 60").fetchall()
    finally:
        db.close()
    parts: Counter[str] = Counter()
    for (blob,) in rows:
        obj = rollupcodec._parse(blob)
        for key, value in obj.items():
            parts[key] += len(json.dumps({key: value}, separators=(",", ":"))) - 2
    return len(rows), {k: v / max(len(rows), 1) for k, v in parts.items()}


def table_bytes(path: Path) -> dict[str, int]:
    """Bytes of the pages of each table (with its indexes), from ``dbstat``."""
    db = sqlite3.connect(path)
    try:
        tables = {n: t for n, t in db.execute("SELECT name, tbl_name FROM sqlite_master")}
        out: Counter[str] = Counter()
        for name, size in db.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"):
            out[tables.get(name, name)] += int(size)
    finally:
        db.close()
    return dict(out)


def live_bytes(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        (count,) = db.execute("PRAGMA page_count").fetchone()
        (free,) = db.execute("PRAGMA freelist_count").fetchone()
        (size,) = db.execute("PRAGMA page_size").fetchone()
    finally:
        db.close()
    return (int(count) - int(free)) * int(size)


def json_store(path: Path, rows: list[tuple[int, IntervalDelta]], scrapes: int) -> int:
    """The deltas one JSON row each (the layout before blocks), with ``scrapes`` health
    rows as the store writes them; the file's bytes."""
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE intervals(stream_id INTEGER NOT NULL, end_ts REAL NOT NULL,"
        " start_ts REAL NOT NULL, reset INTEGER NOT NULL, payload BLOB NOT NULL,"
        " PRIMARY KEY(stream_id, end_ts)) WITHOUT ROWID;"
        "CREATE TABLE scrapes(target TEXT NOT NULL, ts REAL NOT NULL, ok INTEGER NOT NULL,"
        " error_kind TEXT, error TEXT, duration REAL NOT NULL, bytes INTEGER NOT NULL,"
        " parse_errors INTEGER NOT NULL, PRIMARY KEY(target, ts)) WITHOUT ROWID;"
    )
    layouts: dict[tuple[float, ...], int] = {}
    for n, (sid, d) in enumerate(rows):
        payload = encode_delta(d, lambda b: layouts.setdefault(b, len(layouts)))
        db.execute(
            "INSERT INTO intervals VALUES (?,?,?,?,?)",
            (sid, d.end, d.start, int(d.reset), payload),
        )
        if n < scrapes:
            db.execute(
                "INSERT INTO scrapes VALUES (?,?,?,?,?,?,?,?)",
                ("replica-0", d.end, 1, None, None, 0.004, 52000, 0),
            )
    db.commit()
    db.close()
    return path.stat().st_size


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hours", type=float, default=1.0)
    ap.add_argument("--scenario", default="incident")
    ap.add_argument("--rate", type=float, default=None, help="override requests per second")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rec_dir = Path(tmp) / "rec"
        t0 = time.perf_counter()
        overrides = {"workload.rate": args.rate} if args.rate else None
        record(args.scenario, rec_dir, duration=args.hours * 3600, seed=1, overrides=overrides)
        print(f"record_s: {time.perf_counter() - t0:.1f}")
        db_path = Path(tmp) / "pw.db"
        store = Store(db_path)
        store.checkpoint()
        empty = live_bytes(db_path)
        empty_tables = table_bytes(db_path)
        prev: Snapshot | None = None
        written: list[IntervalDelta] = []
        reader = PageReader()
        next_rollup = -math.inf
        for page in sorted(rec_dir.glob("*.prom"), key=lambda p: float(p.name[:-5])):
            ts = float(page.name[:-5])
            snap = reader.normalize(reader.parse(page.read_text()), target="replica-0", ts=ts)
            deltas = snapshot_deltas(prev, snap) if prev is not None else []
            health = ScrapeRecord("replica-0", ts, True, None, None, 0.004, 52000, 0)
            snaps = [("replica-0", ts, s) for s in snap.streams.values()]
            store.write_round([health], deltas, snaps)
            written += deltas
            prev = snap
            if ts >= next_rollup:  # the service's job, once a minute
                store.roll_up(ts - SETTLE_S)
                next_rollup = ts + 60.0
        store.checkpoint()
        store.close()
        intervals = len(written)
        used = live_bytes(db_path) - empty
        tables = table_bytes(db_path)
        minutes, rollup_json = rollup_fields(db_path)
        json_bytes = json_store(Path(tmp) / "json.db", [(1, d) for d in written], intervals + 1)

    def per_day(nbytes: float) -> float:
        return nbytes / max(intervals, 1) * INTERVALS_PER_DAY / 1e6

    fields = field_bytes(written)
    blocks = tables.get("interval_blocks", 0) / max(intervals, 1)
    print(f"scenario: {args.scenario}")
    print(f"intervals: {intervals}")
    for name, size in sorted(tables.items(), key=lambda kv: -kv[1]):
        grown = size - empty_tables.get(name, 0)
        if grown > 0:
            print(f"table_mb_per_stream_day.{name}: {per_day(grown):.3f}")
    for name, size in sorted(fields.items(), key=lambda kv: -kv[1]):
        print(f"field_bytes_per_interval.{name}: {size:.1f}")
    print(f"field_bytes_per_interval.total: {sum(fields.values()):.1f}")
    print(f"block_bytes_per_interval: {blocks:.1f}  # pages of interval_blocks, zlib")
    for name, size in sorted(rollup_json.items(), key=lambda kv: -kv[1]):
        print(f"rollup_json_bytes.{name}: {size:.0f}")
    rollup_pages = tables.get("rollups", 0) / max(minutes, 1)
    print(f"rollup_bytes_per_minute: {rollup_pages:.0f}  # pages of rollups (hours too), zlib")
    print(f"json_bytes_per_interval: {json_bytes / max(intervals, 1):.0f}")
    print(f"json_store_mb_per_stream_day: {per_day(json_bytes):.2f}  # before: one JSON row each")
    print(f"bytes_per_interval: {used / max(intervals, 1):.0f}")
    print(f"budget_mb_per_stream_day: {BUDGET_MB}")
    mb_day = per_day(used)
    print(f"store_mb_per_stream_day: {mb_day:.2f}")
    return 0 if mb_day <= BUDGET_MB else 1


if __name__ == "__main__":
    sys.exit(main())
