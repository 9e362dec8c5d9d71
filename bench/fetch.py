"""CPU a scrape's fetch costs: httpx (``ClientPool`` of ``httpx.AsyncClient``) vs the lean
HTTP/1.1 client (``app.scrape.http11``, what ``ClientPool`` hands out now), side by side.

One process: a page server on 127.0.0.1 (an ``asyncio.Protocol`` on its own event loop
in a thread, keep-alive, answering every GET at once from bytes made in advance, gzip
when asked and ``--gzip`` is on) and, in the main thread, ``--targets`` targets (one
client each, as the service keeps them) fetched with ``app.scrape.client.fetch`` all at
once, ``--rounds`` rounds per client, the two clients alternating round by round (which
goes first swaps every round). The figure is the main thread's CPU
(``time.thread_time``: the server's thread is not in it) per page; a client's first
round (connections made) is reported apart as ``first_contact``. Pages: the complete
vLLM 0.33.0 page (52 kB) and the vLLM 0.6.3 one (12 kB) from tests/fixtures, plain and
gzip (a real vLLM gzips its /metrics when asked, as both clients ask).

Reproduce: ``.venv/bin/python bench/fetch.py`` (defaults: ``--targets 500 --rounds 8``,
every page and encoding; about a minute on 2 shared cores). ``--page big --gzip on``
runs one case.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.scrape.client import ClientPool, fetch  # noqa: E402

PAGES = {
    "big": ROOT / "tests/fixtures/vllm-generated/v0.33.0_V1_1engine_singleproc_GENERATED.prom",
    "small": ROOT / "tests/fixtures/vllm-generated/v0.6.3.post1_V0_singleproc_GENERATED.prom",
}


class PageServer(asyncio.Protocol):
    """Answers every GET on a connection with the page (gzip if asked and offered)."""

    plain: bytes = b""
    gzipped: bytes | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.buf = b""

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while (end := self.buf.find(b"\r\n\r\n")) >= 0:
            head, self.buf = self.buf[:end], self.buf[end + 4 :]
            wants_gzip = b"gzip" in head.lower() and self.gzipped is not None
            self.transport.write(self.gzipped if wants_gzip else self.plain)  # type: ignore[arg-type]


def answer(body: bytes, encoding: str | None) -> bytes:
    extra = f"Content-Encoding: {encoding}\r\n" if encoding else ""
    head = (
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
        f"{extra}Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def start_server(page: bytes, use_gzip: bool) -> tuple[int, Callable[[], None]]:
    """The page server on its own loop in a daemon thread: its port, and what stops it."""
    PageServer.plain = answer(page, None)
    PageServer.gzipped = answer(gzip.compress(page, 6), "gzip") if use_gzip else None
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    made = loop.create_server(PageServer, "127.0.0.1", 0, backlog=2048)
    srv = asyncio.run_coroutine_threadsafe(made, loop).result(30)

    def stop() -> None:
        loop.call_soon_threadsafe(srv.close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()

    return int(srv.sockets[0].getsockname()[1]), stop


async def measure(port: int, targets: int, rounds: int) -> dict[str, dict[str, float]]:
    pools = {"httpx": ClientPool(follow_redirects=False, headers={"User-Agent": "phasewatch"})}
    pools["httpx"].lean = None  # httpx clients, as before the lean client
    pools["lean"] = ClientPool(follow_redirects=False, headers={"User-Agent": "phasewatch"})
    urls = [f"http://127.0.0.1:{port}/t{i}/metrics" for i in range(targets)]
    cpu: dict[str, list[float]] = {name: [] for name in pools}
    wall: dict[str, list[float]] = {name: [] for name in pools}
    failed = dict.fromkeys(pools, 0)
    order = list(pools)
    for r in range(rounds + 1):
        for name in order if r % 2 else order[::-1]:
            pool = pools[name]
            sem = asyncio.Semaphore(1024)

            async def one(i: int, pool: ClientPool = pool, sem: asyncio.Semaphore = sem) -> bool:
                async with sem:
                    res = await fetch(
                        pool.for_target(f"t{i}"), urls[i], timeout=30, max_bytes=10_000_000
                    )
                    return res.ok

            t0, w0 = time.thread_time(), time.perf_counter()
            oks = await asyncio.gather(*(one(i) for i in range(targets)))
            cpu[name].append(time.thread_time() - t0)
            wall[name].append(time.perf_counter() - w0)
            failed[name] += oks.count(False)
    for pool in pools.values():
        await pool.aclose()
    return {
        name: {
            "first_contact_us": cpu[name][0] / targets * 1e6,
            "us_per_page": statistics.median(cpu[name][1:]) / targets * 1e6,
            "us_per_page_min": min(cpu[name][1:]) / targets * 1e6,
            "round_wall_s": statistics.median(wall[name][1:]),
            "failed": failed[name],
        }
        for name in pools
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--targets", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=8, help="measured rounds per client")
    ap.add_argument("--page", choices=[*PAGES, "all"], default="all")
    ap.add_argument("--gzip", choices=["on", "off", "all"], default="all")
    args = ap.parse_args()
    pages = list(PAGES) if args.page == "all" else [args.page]
    encodings = [True, False] if args.gzip == "all" else [args.gzip == "on"]
    print(f"load_before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"targets: {args.targets}, rounds: {args.rounds} per client (median), alternating")
    for page_name in pages:
        page = PAGES[page_name].read_bytes()
        for use_gzip in encodings:
            port, stop = start_server(page, use_gzip)
            got = asyncio.run(measure(port, args.targets, args.rounds))
            stop()
            case = f"{page_name} ({len(page)} B, {'gzip' if use_gzip else 'plain'})"
            for name, fig in got.items():
                print(
                    f"{case} {name}: cpu_us_per_page {fig['us_per_page']:.0f} "
                    f"(min {fig['us_per_page_min']:.0f}), first_contact_us "
                    f"{fig['first_contact_us']:.0f}, round_wall_s {fig['round_wall_s']:.3f}, "
                    f"failed {fig['failed']:.0f}"
                )
            ratio = got["lean"]["us_per_page"] / got["httpx"]["us_per_page"]
            print(f"{case} lean/httpx cpu ratio: {ratio:.2f}")
    print(f"load_after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
