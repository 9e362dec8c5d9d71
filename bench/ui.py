"""How fast the target page shows a day of 5 s data for one stream, in headless Chromium.

Builds 24 h of 5 s intervals for one stream (a 15-minute ``incident`` recording from the
simulator — healthy, ×4 spike, recovery — replayed through the collector and repeated
96 times, ending now), serves the real app (``create_app``, no scraping) under uvicorn,
and opens ``/ui/targets/<t>?from=<now-24h>&to=<now>`` in Debian's Chromium. A page
counts as rendered when the five-metric figure holds the day's 1,440 windows with its
diagnosis band and the diagnosis card is shown.

* ``*_cold_*``: nothing computed yet (the first view after a restart, before the
  service's background warmer has filled the cache).
* ``*_warm_*``: the windows already computed — what a user sees while the service runs
  (the warmer keeps the 6 h and 24 h views of up to 50 streams computed).

Reproduce: ``.venv/bin/python bench/ui.py [--runs N]``. Needs /usr/bin/chromium and the
``playwright`` package (no browser download).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import uvicorn  # noqa: E402

from app.config import load_settings  # noqa: E402
from app.evaluate.settings import diagnosis_config  # noqa: E402
from app.main import create_app  # noqa: E402
from app.sim.record import record  # noqa: E402
from app.sources.recording import read_scrapes  # noqa: E402
from app.store.sqlite import ScrapeRecord, Store  # noqa: E402
from app.ui.data import UiData  # noqa: E402
from app.ui.source import StoreSource  # noqa: E402

TARGET = "bench"
DAY = 86400.0
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def build_day(db: Path, now: float) -> tuple[str, float]:
    """Write 24 h of 5 s intervals ending at ``now``; return (model, first page time)."""
    loop = 900.0
    first = math.floor((now - DAY) / loop) * loop
    with tempfile.TemporaryDirectory() as tmp:
        rec = read_scrapes(record("incident", Path(tmp), duration=loop, seed=1, start_unix=0))
    ((model, one_loop),) = rec.deltas.items()
    store = Store(db)
    k = 0
    while first + k * loop < now:
        off = first + k * loop
        deltas = [
            dataclasses.replace(d, target=TARGET, start=d.start + off, end=d.end + off)
            for d in one_loop
            if d.end + off <= now
        ]
        scrapes = [ScrapeRecord(TARGET, d.end, True, None, None, 0.01, 50_000, 0) for d in deltas]
        store.write_round(scrapes, deltas, [])
        k += 1
    store.close()
    return model, first


class Server:
    def __init__(self, app: Any) -> None:
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def render(page: Any, url: str) -> float:
    """Seconds from navigation to the day's figure and the diagnosis card on screen."""
    t0 = time.perf_counter()
    page.goto(url)
    page.wait_for_function(
        "(() => { const g = document.querySelector('#target-graph .js-plotly-plot');"
        " const s = document.querySelector('#target-status');"
        " return g && g.data && g.data.length > 8 && s && s.innerText.includes('1440 windows')"
        " && document.querySelector('#target-graph .barlayer .point')"
        " && document.querySelector('.diagnosis-card'); })()",
        timeout=120_000,
        polling=20,
    )
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=3, help="warm renders to take the median of")
    args = ap.parse_args()
    exe = shutil.which("chromium")
    if exe is None:
        print("chromium not installed (apt-get install chromium)", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    tmp = Path(tempfile.mkdtemp(prefix="pw-bench-ui-"))
    now = math.floor(time.time() / 60) * 60
    t0 = time.perf_counter()
    model, _ = build_day(tmp / "pw.db", now)
    print(f"build_day_s: {time.perf_counter() - t0:.1f}")
    settings = load_settings(
        None,
        {
            "targets": [{"name": TARGET, "url": "http://127.0.0.1:9/metrics"}],
            "storage": {"path": str(tmp / "pw.db")},
        },
    )

    # Server side alone: the day's windows, diagnoses and points, from the store.
    store = Store(tmp / "pw.db")
    data = UiData(
        StoreSource(lambda: store, targets=lambda: [], clock=lambda: now, settled=0.0),
        diagnosis_config(settings),
    )
    t0 = time.perf_counter()
    tl = data.timeline(TARGET, model, now - DAY, now)
    print(f"timeline_cold_s: {time.perf_counter() - t0:.2f}")
    print(f"windows: {len(tl.points)}")
    store.close()

    server = Server(create_app(settings, start_jobs=False))
    url = (
        f"{server.url}/ui/targets/{TARGET}?model={quote(model, safe='')}"
        f"&from={int(now - DAY)}&to={int(now)}"
    )
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=exe, args=ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            cold = render(page, url)
            warm = [render(page, url) for _ in range(args.runs)]
            print(f"warm_runs_s: {' '.join(f'{w:.2f}' for w in warm)}")
            traces = page.evaluate(
                "document.querySelector('#target-graph .js-plotly-plot').data.length"
            )
            browser.close()
    finally:
        server.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"traces: {traces}")
    print(f"target_page_24h_render_cold_s: {cold:.2f}")
    print(f"target_page_24h_render_warm_s: {statistics.median(warm):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
