"""How the SLO count cache grows with the days of history, per stream.

``SloTracker`` keeps each stream's SLO counts in 5-minute chunks for a day and in whole
hours for the budget period (``app.fleet.count_cache``). This builds one stream's history of
5 s deltas in memory (a ``MemorySource``: no store, no decoding) for ``--days`` days,
evaluates the default SLO every minute over the last three hours (so the caches reach
their steady shape), and prints what the cache holds for that stream (``tracemalloc``)
and the CPU of a steady evaluation. Multiply by the streams of a fleet.

Reproduce: ``.venv/bin/python bench/slo_memory.py [--days 2 10]``.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.fleet.deltas import MemorySource  # noqa: E402
from app.fleet.slo import SloSpec  # noqa: E402
from app.fleet.tracker import SloTracker  # noqa: E402
from app.model import HistogramDelta, IntervalDelta  # noqa: E402

BOUNDS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
STREAM = ("a", "m")


def history(days: float, seed: int = 1) -> MemorySource:
    rng = random.Random(seed)
    out = []
    for k in range(1, int(days * 86400 / 5) + 1):
        end = 5.0 * k
        b = {i: float(rng.randint(0, 5)) for i in range(len(BOUNDS) + 1)}
        n = sum(b.values())
        out.append(
            IntervalDelta(
                "a",
                "m",
                end - 5.0,
                end,
                histograms={
                    s: HistogramDelta(BOUNDS, b, 0.3 * n, n) for s in ("ttft", "itl", "tpot")
                },
                counters={"finished:stop": n, "finished:length": 1.0, "finished:error": 0.0},
                gauges={},
            )
        )
    return MemorySource({STREAM: out})


def measure(days: float) -> None:
    source = history(days)
    tracker = SloTracker(source, [SloSpec("chat")])
    end = days * 86400.0
    tracemalloc.start()
    t = end - 3 * 3600.0
    while t <= end:
        tracker.evaluate(t, [STREAM], {})
        t += 60.0
    held = sum(s.size for s in tracemalloc.take_snapshot().statistics("filename"))
    tracemalloc.stop()
    (cache,) = tracker._caches.values()
    t0, n = time.process_time(), 0
    while n < 30:
        t += 60.0
        tracker.evaluate(t, [STREAM], {})
        n += 1
    cpu = (time.process_time() - t0) / n
    tag = f"{days:g}d"
    print(f"chunks_{tag}: {len(cache.chunks[STREAM])}")
    print(f"hours_{tag}: {len(cache.hours[STREAM])}")
    print(f"evaluation_ms_per_stream_{tag}: {cpu * 1e3:.1f}")
    print(f"cache_kb_per_stream_{tag}: {held / 1e3:.0f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--days", type=float, nargs="+", default=[2.0, 10.0])
    args = ap.parse_args()
    for days in args.days:
        measure(days)
    return 0


if __name__ == "__main__":
    sys.exit(main())
