"""Pages over time → interval deltas → sliding windows → a diagnosis per window and stream.

Two sources feed the same path: a recording folder (DESIGN.md's format: one exposition
page per scrape named by its Unix time, ``1764403200.000.prom``; read by
``app.alerts.replay.read_scrapes``, which the alert replay shares) and a live URL
scraped every few seconds (``phasewatch diagnose``). Every page goes through the
service's own collector step (parse, normalise, deltas), so a replay judges exactly what
the service would have stored. A page that cannot be used (not Prometheus text, cut in
the middle of a line, unreadable) is a failed scrape: the next good page's delta covers
the gap, and the windows that contain it are told how many scrapes failed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from app.alerts.fields import ScrapeStatus
from app.alerts.replay import ReplayedScrapes, read_scrapes
from app.collector import TargetState, process
from app.config import ScrapeConfig, TargetConfig
from app.diagnose.classify import diagnose
from app.diagnose.config import DEFAULT_CONFIG, DiagnosisConfig
from app.diagnose.records import Diagnosis
from app.scrape.client import fetch
from app.windows.aggregate import window, windows

__all__ = ["diagnose_recording", "diagnose_scrapes", "observe", "read_scrapes"]


def diagnose_scrapes(
    scrapes: ReplayedScrapes,
    *,
    length: float = 60.0,
    step: float = 15.0,
    config: DiagnosisConfig = DEFAULT_CONFIG,
) -> list[Diagnosis]:
    """Windows ``(end - length, end]`` every ``step`` s, per stream, diagnosed in time order.

    The window ends are ``start + length + k·step`` (the alert replay's too). A
    recording shorter than one window gets one window over all of it. A target that
    never showed a stream is diagnosed as stream "" (insufficient data, saying why).
    """
    out: list[Diagnosis] = []
    for model in sorted(scrapes.deltas) or [""]:
        deltas = scrapes.deltas.get(model, [])
        target = scrapes.target
        ws = windows(
            deltas,
            start=scrapes.start,
            end=scrapes.end,
            length=length,
            step=step,
            target=target,
            model_name=model,
        )
        if not ws and scrapes.end > scrapes.start:
            ws = [
                window(
                    deltas, start=scrapes.start, end=scrapes.end, target=target, model_name=model
                )
            ]
        for w in ws:
            failed, attempted = scrapes.counts(w.start, w.end)
            out.append(diagnose(w, config, failed_scrapes=failed, attempted_scrapes=attempted))
    out.sort(key=lambda d: (d.end, d.model_name))
    return out


def diagnose_recording(
    folder: str | Path,
    *,
    length: float = 60.0,
    step: float = 15.0,
    config: DiagnosisConfig = DEFAULT_CONFIG,
    target: str | None = None,
) -> list[Diagnosis]:
    """The diagnosis timeline of a recording folder; ValueError when it has no pages."""
    scrapes = read_scrapes(Path(folder), target)
    return diagnose_scrapes(scrapes, length=length, step=step, config=config)


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
    state = TargetState(TargetConfig(name="live", url="http://live"))
    cap = ScrapeConfig().max_body_bytes
    http = client or httpx.AsyncClient()
    try:
        t0 = time.monotonic()
        k = 0
        while True:
            result = await fetch(http, url, timeout=timeout, max_bytes=cap)
            now = time.time()
            outcome = process(state, result, now)
            out.statuses.append(
                (now, ScrapeStatus(now, outcome.record.ok, outcome.record.error_kind))
            )
            for d in outcome.deltas:
                out.deltas.setdefault(d.model_name, []).append(d)
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


def diagnose_observed(
    scrapes: ReplayedScrapes, config: DiagnosisConfig = DEFAULT_CONFIG
) -> list[Diagnosis]:
    """One window over everything observed, per stream."""
    out = []
    for model in sorted(scrapes.deltas) or [""]:
        w = window(
            scrapes.deltas.get(model, []),
            start=scrapes.start,
            end=scrapes.end,
            target=scrapes.target,
            model_name=model,
        )
        failed, attempted = scrapes.counts(scrapes.start - 1e-9, scrapes.end)
        out.append(diagnose(w, config, failed_scrapes=failed, attempted_scrapes=attempted))
    return out
