"""A live URL scraped every few seconds for a while (``phasewatch diagnose``).

Every page goes through the service's own :func:`~app.sources.process.process`
(:class:`~app.sources.process.PageFeed`), the path a recording's pages take, so a
watched URL is judged as a recording of it would be. :func:`failures` groups the scrapes
that failed by error kind and :func:`nothing_to_judge` says why a watch gave no stream
to diagnose (nothing listens, no vLLM metrics on the page, a single scrape…), so the
caller reports the cause instead of an empty diagnosis.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from app.config import ScrapeConfig
from app.scrape.client import fetch
from app.sources.process import PageFeed
from app.sources.recording import ReplayedScrapes

__all__ = ["ScrapeFailure", "failures", "nothing_to_judge", "observe"]

# What to check for each error kind (``app.scrape.client``, ``app.sources.process``).
_CHECK = {
    "refused": "nothing listens at this host and port: is vLLM running, and on this port?",
    "connect": "the host cannot be reached: check the name and the network",
    "timeout": "no answer in time: the server or the network is overloaded, or a "
    "firewall drops the packets (--timeout)",
    "http_status": "the server answered with an error: is the path /metrics? (SGLang "
    "answers 404 there unless run with --enable-metrics)",
    "not_prometheus": "is this vLLM's /metrics URL?",
    "metrics_disabled": "is this vLLM's or SGLang's /metrics, and is vLLM run without "
    "--disable-log-stats (SGLang with --enable-metrics)?",
}
# Kinds whose message is better said plainly than as the scraper stored it.
_SAID = {
    "metrics_disabled": "no vLLM metrics on this page (Prometheus text without vllm: or "
    "sglang: families)",
    "not_prometheus": "not a Prometheus metrics page",
}


@dataclass(frozen=True, slots=True)
class ScrapeFailure:
    """Failed scrapes of one error kind: the latest one's message, how many, and what to
    check (empty when there is nothing specific)."""

    kind: str
    message: str
    count: int
    check: str = ""

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "message": self.message, "count": self.count}

    def text(self) -> str:
        check = f" — {self.check}" if self.check else ""
        return f"{self.message}{check}"


def failures(scrapes: ReplayedScrapes) -> list[ScrapeFailure]:
    """The failed scrapes grouped by error kind, most frequent first (ties: first seen)."""
    failed = [r for r in scrapes.records if not r.ok]
    counts = Counter(r.error_kind or "other" for r in failed)
    latest = {r.error_kind or "other": r.error or "" for r in failed}
    return [
        ScrapeFailure(kind, _SAID.get(kind) or latest[kind] or kind, n, _CHECK.get(kind, ""))
        for kind, n in counts.most_common()
    ]


def nothing_to_judge(scrapes: ReplayedScrapes) -> ScrapeFailure | None:
    """Why no stream of the watch can be diagnosed, or None when some can.

    A stream needs an interval: two usable scrapes that show it. None usable: the most
    frequent failure (``refused``, ``metrics_disabled``…). Usable scrapes but no
    interval: ``too_few_scrapes`` (a single scrape, or the others failed between).
    """
    if scrapes.deltas:
        return None
    failed = failures(scrapes)
    usable = sum(1 for r in scrapes.records if r.ok)
    if not usable and failed:
        return failed[0]
    return ScrapeFailure(
        "too_few_scrapes",
        f"{usable} usable scrape(s) and no interval between two of them",
        len(scrapes.records),
        "a diagnosis needs two scrapes that show the stream: watch longer (--duration)",
    )


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

    ``on_scrape(elapsed, ok)`` is called after each scrape (progress for the CLI); ``ok``:
    the scrape is usable (a page without vLLM metrics is not).
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
                on_scrape(time.monotonic() - t0, outcome.record.ok)
            k += 1
            if k * interval > duration + 1e-9:
                break
            await asyncio.sleep(max(0.0, t0 + k * interval - time.monotonic()))
    finally:
        if client is None:
            await http.aclose()
    return out
