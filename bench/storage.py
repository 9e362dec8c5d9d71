"""Bytes the store needs per stream per day at a 5 s scrape interval.

Records an hour of the simulator's `incident` scenario (healthy → spike → recovery, so
histograms move in many buckets), feeds every page through the real path — parse,
normalise, interval deltas, store — into a fresh SQLite file, and extrapolates the
file's size per interval to a day. Scrape-health rows and the last snapshot are
included. Reproduce: `.venv/bin/python bench/storage.py [--hours H] [--scenario NAME]`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.model import Snapshot  # noqa: E402
from app.scrape.reader import PageReader  # noqa: E402
from app.sim.record import record  # noqa: E402
from app.store.sqlite import ScrapeRecord, Store  # noqa: E402
from app.windows.delta import snapshot_deltas  # noqa: E402

INTERVALS_PER_DAY = 86400 / 5
BUDGET_MB = 10.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
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
        empty = store.size_bytes()
        prev: Snapshot | None = None
        intervals = 0
        reader = PageReader()
        for page in sorted(rec_dir.glob("*.prom"), key=lambda p: float(p.name[:-5])):
            ts = float(page.name[:-5])
            snap = reader.normalize(reader.parse(page.read_text()), target="replica-0", ts=ts)
            deltas = snapshot_deltas(prev, snap) if prev is not None else []
            health = ScrapeRecord("replica-0", ts, True, None, None, 0.004, 52000, 0)
            snaps = [("replica-0", ts, s) for s in snap.streams.values()]
            store.write_round([health], deltas, snaps)
            intervals += len(deltas)
            prev = snap
        store.checkpoint()
        used = db_path.stat().st_size - empty
        store.close()
    per_interval = used / max(intervals, 1)
    mb_day = per_interval * INTERVALS_PER_DAY / 1e6
    print(f"scenario: {args.scenario}")
    print(f"intervals: {intervals}")
    print(f"bytes_per_interval: {per_interval:.0f}")
    print(f"budget_mb_per_stream_day: {BUDGET_MB}")
    print(f"store_mb_per_stream_day: {mb_day:.2f}")
    return 0 if mb_day <= BUDGET_MB else 1


if __name__ == "__main__":
    sys.exit(main())
