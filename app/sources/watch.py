"""A live URL scraped every few seconds for a while (``phasewatch diagnose``).

Every page goes through the service's own :func:`~app.sources.process.process`
(:class:`~app.sources.process.PageFeed`), the path a recording's pages take, so a
watched URL is judged as a recording of it would be.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import httpx

from app.config import ScrapeConfig
from app.scrape.client import fetch
from app.sources.process import PageFeed
from app.sources.recording import ReplayedScrapes

__all__ = ["observe"]


async def observe(
    url: str,
    *,
    duration: float,
    interval: float = 5.0,
    timeout: float = 4.0,
    client: httpx.AsyncClient | None = None,
    on_scrape: Callable[[float, bool], None] | None = None,
) -> ReplayedScrapes:
    """Scrape ``url`` every ``interval`` s for ``duration`` s, a first scrape at 0.

    ``on_scrape(elapsed, ok)`` is called after each scrape (progress for the CLI).
    """
    out = ReplayedScrapes(url)
    feed = PageFeed("live", "http://live")
    cap = ScrapeConfig().max_body_bytes
    http = client or httpx.AsyncClient()
    try:
        t0 = time.monotonic()
        k = 0
        while True:
            result = await fetch(http, url, timeout=timeout, max_bytes=cap)
            outcome = feed(time.time(), result)
            out.add(outcome)
            if on_scrape is not None:
                on_scrape(time.monotonic() - t0, outcome.snapshot is not None)
            k += 1
            if k * interval > duration + 1e-9:
                break
            await asyncio.sleep(max(0.0, t0 + k * interval - time.monotonic()))
    finally:
        if client is None:
            await http.aclose()
    return out
