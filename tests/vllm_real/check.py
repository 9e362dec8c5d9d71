"""Drive a real vLLM server and check phasewatch on its genuine ``/metrics`` page.

Run with the project's Python (phasewatch installed), against a server started by
``run.sh``: ``python tests/vllm_real/check.py http://127.0.0.1:PORT MODEL``.

1. Scrape the idle page once: it must be a V1 page with the five core signals.
2. Send ``--streams`` concurrent long completions (``ignore_eos``) in two waves, so that
   with a small KV pool (``--num-gpu-blocks-override``) requests wait, the cache fills
   and requests get preempted; scrape every ``--interval`` seconds meanwhile, through
   the service's own collector step (parse, normalise, deltas).
3. Build windows over the load, diagnose them, print them, and fail unless TTFT and ITL
   percentiles were computed, some window saw requests waiting or KV usage > 0, and the
   diagnosis over the load is something other than ``insufficient_data``.

Exit status 0 on success, 1 with the reason on failure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sys
import time

import httpx

from app.diagnose import diagnose
from app.diagnose.render import render
from app.model import IntervalDelta
from app.scrape.client import fetch
from app.sources.process import PageFeed
from app.windows.aggregate import window, windows

WORDS = [
    "cache",
    "token",
    "prefill",
    "decode",
    "batch",
    "queue",
    "engine",
    "request",
    "stream",
    "latency",
]


async def one_request(client: httpx.AsyncClient, base: str, model: str, rng: random.Random) -> int:
    prompt = " ".join(rng.choice(WORDS) for _ in range(rng.randint(60, 120)))
    body = {
        "model": model,
        "prompt": prompt,
        "max_tokens": rng.randint(300, 500),
        "temperature": 0.0,
        "ignore_eos": True,
    }
    resp = await client.post(f"{base}/v1/completions", json=body, timeout=600)
    resp.raise_for_status()
    return int(resp.json()["usage"]["completion_tokens"])


async def load(base: str, model: str, streams: int, waves: int) -> int:
    rng = random.Random(1)
    total = 0
    async with httpx.AsyncClient() as client:
        for _ in range(waves):
            done = await asyncio.gather(
                *(one_request(client, base, model, rng) for _ in range(streams))
            )
            total += sum(done)
    return total


async def scrape_loop(
    url: str, interval: float, stop: asyncio.Event
) -> tuple[list[IntervalDelta], list[float]]:
    feed = PageFeed("vllm", url)
    deltas: list[IntervalDelta] = []
    times: list[float] = []
    async with httpx.AsyncClient() as client:
        while True:
            result = await fetch(client, url, timeout=5.0, max_bytes=50_000_000)
            now = time.time()
            outcome = feed(now, result)
            if outcome.snapshot is None:
                raise SystemExit(
                    f"scrape failed: {outcome.record.error_kind}: {outcome.record.error}"
                )
            deltas.extend(outcome.deltas)
            times.append(now)
            if stop.is_set():
                return deltas, times
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval)


def fail(msg: str) -> int:
    print(f"FAIL: {msg}", file=sys.stderr)
    return 1


async def main_async(args: argparse.Namespace) -> int:
    base = args.base.rstrip("/")
    url = f"{base}/metrics"
    async with httpx.AsyncClient() as client:
        first = await fetch(client, url, timeout=10.0, max_bytes=50_000_000)
    snap = PageFeed("vllm", url)(time.time(), first).snapshot
    if snap is None or args.model not in snap.streams:
        return fail(f"idle page has no stream {args.model!r}: {snap and list(snap.streams)}")
    stream = snap.streams[args.model]
    print(f"idle page: {first.nbytes} bytes, missing signals: {list(stream.missing)}")
    core_missing = [
        s for s in ("ttft", "itl", "running", "waiting", "kv_usage") if s in stream.missing
    ]
    if core_missing:
        return fail(f"core signals missing on the genuine page: {core_missing}")

    stop = asyncio.Event()
    scraper = asyncio.create_task(scrape_loop(url, args.interval, stop))
    t0 = time.time()
    tokens = await load(base, args.model, args.streams, args.waves)
    await asyncio.sleep(args.interval)
    stop.set()
    deltas, times = await scraper
    t1 = time.time()
    print(f"load: {args.waves} x {args.streams} streams, {tokens} tokens in {t1 - t0:.1f} s")

    model = args.model
    ws = windows(
        deltas,
        start=times[0],
        end=times[-1],
        length=args.window,
        step=args.window / 2,
        target="vllm",
        model_name=model,
    )
    whole = window(deltas, start=times[0], end=times[-1], target="vllm", model_name=model)
    for w in ws:
        d = diagnose(w)
        kv = w.gauges.get("kv_usage")
        waiting = w.gauges.get("waiting")
        ttft = w.quantiles.get("ttft", {}).get("p99")
        itl = w.quantiles.get("itl", {}).get("p99")
        print(
            f"  window ending +{w.end - times[0]:5.1f} s: {d.label:<32} "
            f"ttft_p99={ttft and ttft.value} itl_p99={itl and itl.value} "
            f"waiting_avg={waiting and waiting.avg} kv_max={kv and kv.max} "
            f"preemptions={w.increases.get('preemptions')}"
        )
    d = diagnose(whole)
    print(render(d, verbose=False))
    summary = {
        "class": d.cls.value,
        "ttft_n": whole.observations.get("ttft"),
        "itl_n": whole.observations.get("itl"),
        "waiting_max": whole.gauges["waiting"].max if "waiting" in whole.gauges else None,
        "kv_max": whole.gauges["kv_usage"].max if "kv_usage" in whole.gauges else None,
        "preemptions": whole.increases.get("preemptions"),
    }
    print(json.dumps(summary))
    ttft = whole.quantiles.get("ttft", {}).get("p99")
    itl = whole.quantiles.get("itl", {}).get("p99")
    if ttft is None or ttft.value is None or itl is None or itl.value is None:
        return fail("no TTFT/ITL percentiles over the load")
    if not (summary["waiting_max"] or 0) > 0 and not (summary["kv_max"] or 0) > 0:
        return fail("the load never made requests wait nor used the KV cache")
    if d.cls.value == "insufficient_data":
        return fail(f"diagnosis is insufficient_data: {d.summary}")
    print(f"OK: phasewatch diagnosed the real vLLM as {d.label}")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("base", help="vLLM base URL, e.g. http://127.0.0.1:8000")
    p.add_argument("model", help="served model name")
    p.add_argument("--streams", type=int, default=24)
    p.add_argument("--waves", type=int, default=2)
    p.add_argument("--interval", type=float, default=1.0)
    p.add_argument("--window", type=float, default=10.0)
    return asyncio.run(main_async(p.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
