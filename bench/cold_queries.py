"""The windows API's first answer in a fresh process: 24 h and 30 days of one stream.

"Cold" is the first request a freshly started process serves for a range (nothing
computed, nothing in its window cache, SQLite's page cache empty; the file may be in the
OS's cache, as on a server that restarted). Each run starts the real app
(``create_app``, no scraping) under uvicorn in a new Python process on a loopback port,
waits for it to listen — no request before the measured one — sends one
``GET /api/v1/windows``, and stops the process; ``--runs`` processes per query (5),
median and p95 (of five: the slowest).

* ``windows_api_24h_cold_*``: the last 24 h, 60 s windows every 60 s (1,440 windows),
  the query ``bench/queries.py`` times warm; answered from minute roll-ups.
* ``windows_api_30d_cold_*``: the last 30 days, 1 h windows every hour (720 windows),
  answered from hour roll-ups.

The store: 30 days of one stream at 5 s (518,400 deltas, a 15-minute ``incident``
recording from the simulator repeated 2,880 times, ending at the last whole hour),
written through ``Store.write_round`` with its scrape-health rows and rolled up every
simulated hour (``Store.roll_up``), as the service does every minute. Building takes about
a minute; ``--store PATH`` keeps it for the next run.

Reproduce: ``.venv/bin/python bench/cold_queries.py [--runs 5] [--store PATH]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

TARGET = "bench"
DAY = 86400.0
LOOP = 900.0
QUERIES = {  # name: (range, window, step)
    "24h": (DAY, 60.0, 60.0),
    "30d": (30 * DAY, 3600.0, 3600.0),
}


def p95(xs: list[float]) -> float:
    return sorted(xs)[max(0, math.ceil(0.95 * len(xs)) - 1)]


def build(db: Path, now: float) -> str:
    """Write 30 days of one stream ending at ``now``; return its model name."""
    from app.sim.record import record
    from app.sources.recording import read_scrapes
    from app.store.sqlite import ScrapeRecord, Store

    with tempfile.TemporaryDirectory() as tmp:
        rec = read_scrapes(record("incident", Path(tmp), duration=LOOP, seed=1, start_unix=0))
    ((model, one_loop),) = rec.deltas.items()
    store = Store(db)
    first = now - QUERIES["30d"][0] - LOOP
    loops = int((now - first) / LOOP)
    for k in range(loops):
        off = first + k * LOOP
        deltas = [
            dataclasses.replace(d, target=TARGET, start=d.start + off, end=d.end + off)
            for d in one_loop
        ]
        scrapes = [ScrapeRecord(TARGET, d.end, True, None, None, 0.01, 50_000, 0) for d in deltas]
        store.write_round(scrapes, deltas, [])
        if k % 4 == 3:
            store.roll_up(deltas[-1].end)
    store.roll_up(now)
    store.checkpoint()
    store.close()
    return model


def serve(db: str) -> None:
    """The child: the app on a free loopback port; prints its URL once it listens."""
    import uvicorn

    from app.config import load_settings
    from app.main import create_app

    settings = load_settings(
        None,
        {
            "targets": [{"name": TARGET, "url": "http://127.0.0.1:9/metrics"}],
            "storage": {"path": db, "retention_days": 31},
        },
    )
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings, start_jobs=False), port=0, log_level="warning")
    )

    async def run() -> None:
        config = server.config
        if not config.loaded:
            config.load()
        server.lifespan = config.lifespan_class(config)
        await server.startup()
        port = server.servers[0].sockets[0].getsockname()[1]
        print(f"http://127.0.0.1:{port}", flush=True)
        await server.main_loop()
        await server.shutdown()

    import asyncio

    asyncio.run(run())


def first_answer(db: Path, params: dict[str, str | float]) -> tuple[float, int]:
    """Start a fresh process on ``db``; the seconds its first answer took, and its windows."""
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(db)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        url = child.stdout.readline().strip()
        if not url.startswith("http://"):
            raise RuntimeError(f"the server did not start (said {url!r})")
        with httpx.Client(base_url=url, timeout=120) as client:
            t0 = time.perf_counter()
            resp = client.get("/api/v1/windows", params=params)
            took = time.perf_counter() - t0
        resp.raise_for_status()
        return took, len(json.loads(resp.content))
    finally:
        child.terminate()
        child.wait(30)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="fresh processes per query")
    ap.add_argument("--store", help="the store to use (built there when missing)")
    ap.add_argument("--serve", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve)
        return 0
    with tempfile.TemporaryDirectory(prefix="pw-bench-cold-") as tmp:
        db = Path(args.store) if args.store else Path(tmp) / "month.db"
        meta = db.with_suffix(".json")
        if not db.exists():
            now = math.floor(time.time() / 3600) * 3600
            t0 = time.perf_counter()
            model = build(db, now)
            meta.write_text(json.dumps({"now": now, "model": model}))
            print(f"build_s: {time.perf_counter() - t0:.0f}")
        info = json.loads(meta.read_text())
        now, model = float(info["now"]), str(info["model"])
        print(f"store_mb: {db.stat().st_size / 1e6:.1f}")
        for name, (span, window, step) in QUERIES.items():
            params: dict[str, str | float] = {
                "target": TARGET,
                "model": model,
                "start": now - span,
                "end": now,
                "window": window,
                "step": step,
            }
            times = []
            for _ in range(args.runs):
                took, got = first_answer(db, params)
                times.append(took)
            print(f"windows_api_{name}_windows: {got}")
            print(f"windows_api_{name}_cold_runs_ms: {[round(t * 1e3) for t in times]}")
            print(f"windows_api_{name}_cold_median_ms: {statistics.median(times) * 1e3:.0f}")
            print(f"windows_api_{name}_cold_p95_ms: {p95(times) * 1e3:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
