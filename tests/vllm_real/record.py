"""Record a running vLLM under open-loop load: its raw ``/metrics`` pages and the load log.

Starts nothing itself: give it the base URL of a server already up (make_recordings.sh
starts one per setting). It runs bench/loadgen.py's generator for ``--warmup`` +
``--duration`` seconds (one continuous Poisson stream; the warm-up's requests are marked in
the log) and meanwhile saves the genuine page every ``--interval`` seconds (5 by default,
on a fixed grid from the first page) into ``OUT`` as ``<unix-seconds>.prom`` (3 decimals,
the scrape's start time: the format ``phasewatch replay OUT`` reads, see
app/sources/recording.py). The first page is taken before the first request, the last one
after the last request ended. Warm-up pages are kept (they are history); ``meta.json``
says where the steady part starts.

``OUT`` then holds:

* ``<unix-seconds>.prom`` — the pages, byte for byte as served;
* ``load.jsonl`` — one line per request (fields in bench/loadgen.py's docstring);
* ``meta.json`` — ``vllm_version`` (from ``/version``), ``vllm_flags`` (as given with
  ``--vllm-flags``: this script cannot see them), ``model``, ``load`` (the spec: rate,
  classes, seed, in-flight cap, warm-up), ``seed``, ``start`` (Unix time of the load's
  offset 0), ``steady_start`` (``start`` + warm-up), ``steady_end`` (last arrival time
  allowed), ``end`` (last request ended), ``interval``, ``pages``, ``scrape_failures``
  ``summary`` (the generator's summary line, steady part only), ``command`` and ``host``
  (CPU count and load averages at the start and the end: the machine may be shared).

Run with the project's Python::

    python tests/vllm_real/record.py http://127.0.0.1:PORT OUT --warmup 30 --duration 180 \\
        --rate 11 --seed 1 --class 8:80:128 --class 2:320:512 --max-in-flight 64 \\
        --vllm-flags "--max-num-seqs 4 --dtype float32 ..."

make_recordings.sh runs it that way for tests/data/vllm_real (README.md there).
record_knee.sh runs it with a phased load (``--phase SECONDS:RATE``, repeated: a surge
past the server's knee and back) for ``knee.tar.gz``.

Exit status 0 when every request of the steady part succeeded, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.loadgen import add_load_options, first_model, run_load, spec_from_args  # noqa: E402


async def scrape_pages(
    client: httpx.AsyncClient, url: str, out: Path, interval: float, stop: asyncio.Event
) -> tuple[int, int]:
    """Save a page every ``interval`` s until ``stop`` is set, then one last page.

    Pages are written under a temporary name and renamed, so a folder never holds half a
    page. Returns (pages saved, scrapes failed).
    """
    saved = failed = 0
    origin = time.time()
    k = 0
    while True:
        last = stop.is_set()
        started = time.time()
        try:
            resp = await client.get(url, timeout=min(interval, 10.0))
            resp.raise_for_status()
        except httpx.HTTPError as exc:
            failed += 1
            print(f"scrape at {started:.3f} failed: {exc!r}", file=sys.stderr)
        else:
            tmp = out / f".{started:.3f}.tmp"
            tmp.write_bytes(resp.content)
            tmp.rename(out / f"{started:.3f}.prom")
            saved += 1
        if last:
            return saved, failed
        k += 1
        wait = origin + k * interval - time.time()
        if wait <= 0:  # the scrape overran its slot: skip to the next one on the grid
            k = int((time.time() - origin) // interval) + 1
            wait = origin + k * interval - time.time()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), wait)


def _loadavg() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (Linux), for meta.json: the machine is shared."""
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except (OSError, ValueError):
        return None


async def record(args: argparse.Namespace) -> int:
    base = args.base.rstrip("/")
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    if any(out.iterdir()):
        print(f"{out} is not empty", file=sys.stderr)
        return 2
    spec = spec_from_args(args)
    load_start = _loadavg()
    # No keep-alive: uvicorn closes an idle connection after 5 s, the scrape interval.
    async with httpx.AsyncClient(limits=httpx.Limits(max_keepalive_connections=0)) as client:
        version = (await client.get(f"{base}/version", timeout=10.0)).json().get("version")
        model = args.model or await first_model(client, base)
        stop = asyncio.Event()
        scraper = asyncio.create_task(
            scrape_pages(client, f"{base}/metrics", out, args.interval, stop)
        )
        await asyncio.sleep(0.5)  # the first page shows the server before any request
        with (out / "load.jsonl").open("w") as log:
            summary = await run_load(
                base,
                spec,
                model=model,
                log=log,
                drain=args.drain,
                timeout=args.timeout,
            )
        # One more full interval, so the last page holds the last request's observations.
        await asyncio.sleep(args.interval)
        stop.set()
        pages, failures = await scraper
    meta: dict[str, Any] = {
        "vllm_version": version,
        "vllm_flags": shlex.split(args.vllm_flags),
        "model": model,
        "load": spec.describe(),
        "seed": spec.seed,
        "start": round(summary.start, 3),
        "steady_start": round(summary.start + spec.warmup, 3),
        "steady_end": round(summary.start + spec.duration, 3),
        "end": round(summary.end, 3),
        "interval": args.interval,
        "pages": pages,
        "scrape_failures": failures,
        "summary": summary.line(),
        "host": {"cpus": os.cpu_count(), "loadavg_start": load_start, "loadavg_end": _loadavg()},
        "command": " ".join(shlex.quote(a) for a in sys.argv),
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(f"{pages} pages ({failures} failed scrapes) in {out}")
    print(summary.line())
    return 0 if summary.failed == 0 else 1


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("base", help="vLLM base URL, e.g. http://127.0.0.1:8000")
    p.add_argument("out", type=Path, help="folder for the pages, load.jsonl and meta.json")
    add_load_options(p)
    p.add_argument("--interval", type=float, default=5.0, help="between pages, s")
    p.add_argument("--vllm-flags", default="", help="the server's flags, for meta.json")
    return asyncio.run(record(p.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
