"""How fast the UI's pages render in headless Chromium: the target page over a day of one
stream, and the overview and a target page of a fleet of 1,000 targets.

* ``target_page_24h_*``: 24 h of 5 s intervals for one stream (a 15-minute ``incident``
  recording from the simulator — healthy, ×4 spike, recovery — replayed through the
  collector and repeated 96 times, ending now), ``/ui/targets/<t>?from=<now-24h>&to=<now>``.
  Rendered: the five-metric figure holds the day's 1,440 windows with its diagnosis band,
  and the diagnosis card is shown.
* ``overview_1000_*``: 1,000 targets with 10 minutes of 5 s intervals each, a model each
  (``build_fleet``, the data ``bench/queries.py`` times ``UiData.cards`` on), ``/ui/``.
  Rendered (its first useful paint): the status counts 1,000 streams and the problem
  streams' cards are on the page (``CARDS_PER_PAGE`` at most); ``overview_*_table_*``:
  then the table of every stream shows its first rows (it comes in a request of its own).
* ``target_page_of_1000_*``: the target page of one stream among those 1,000 (its default
  1 h view, the 10 minutes of data). Rendered as the day's page, with the windows it has.

``*_cold_*``: nothing computed yet, and a fresh Chromium (the first view after a
restart, before the service's background warmer has filled the cache, with nothing
cached in the browser). ``*_warm_*``: the median of ``--runs`` reloads in that browser —
what a user sees while the service runs (the warmer keeps the 6 h and 24 h views of the
streams viewed in the last hour computed, up to 50; the overview keeps each stream's
latest diagnosis).
``overview_*_answer_*``: the server's side alone, the overview's cards callback from its
request to its answer (cold: the browser's first; warm: the same request sent again
with an HTTP client, no browser), and the answer's size. Each page is rendered by a
child process with its own Chromium, killed after ``--bound`` seconds (180) per render:
a page stuck in one long render cannot be interrupted from inside, and the run stays
bounded; such a render is reported as ``> 180 (not rendered)``.

The app is the real one (``create_app``, no scraping) under uvicorn on a loopback port;
progress goes to stderr, figures to stdout.

Reproduce: ``.venv/bin/python bench/ui.py [--runs N] [--targets N] [--only day|fleet]
[--bound S]``. Needs /usr/bin/chromium and the ``playwright`` package (no browser
download).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
import uvicorn  # noqa: E402

from app.config import load_settings  # noqa: E402
from app.evaluate.settings import diagnosis_config  # noqa: E402
from app.main import create_app  # noqa: E402
from app.read.source import StoreSource  # noqa: E402
from app.read.target import UiData  # noqa: E402
from app.sim.record import record  # noqa: E402
from app.sources.recording import read_scrapes  # noqa: E402
from app.store.sqlite import ScrapeRecord, Store  # noqa: E402
from app.ui.pages.overview import CARDS_PER_PAGE  # noqa: E402

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
    store.roll_up(now)  # as the service's roll-up job has done by now
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


FLEET = 1000
# A target page is rendered: its figure holds the band and the metrics, the status names
# the windows (``{windows}``: how many), the diagnosis card is shown.
TARGET_PAGE = (
    "(() => {{ const g = document.querySelector('#target-graph .js-plotly-plot');"
    " const s = document.querySelector('#target-status');"
    " return g && g.data && g.data.length > 8 && s && s.innerText.includes('{windows}')"
    " && document.querySelector('#target-graph .barlayer .point')"
    " && document.querySelector('.diagnosis-card'); }})()"
)
# The overview's first useful paint: the status counts every stream ({n}) and the problem
# cards are on the page (as many as the status counts problems and streams with
# insufficient data, {cards} at most: CARDS_PER_PAGE).
OVERVIEW = (
    "(() => {{ const s = document.querySelector('#overview-status');"
    " if (!s || !s.innerText.startsWith('{n} stream(s)')) return false;"
    " const p = s.innerText.match(/: (\\d+) with a problem/);"
    " const u = s.innerText.match(/, (\\d+) with insufficient data/);"
    " const want = Math.min({cards}, (p ? +p[1] : 0) + (u ? +u[1] : 0));"
    " return document.querySelectorAll('.card-link').length >= want; }})()"
)
# ...and then the table of every stream shows its first rows (its own request).
OVERVIEW_TABLE = (
    "document.querySelectorAll('#overview-grid .ag-center-cols-container .ag-row').length"
    " >= Math.min({n}, 5)"
)
T_START = time.perf_counter()


def progress(what: str) -> None:
    print(f"[{time.perf_counter() - T_START:6.1f} s] {what}", file=sys.stderr, flush=True)


def build_fleet(db: Path, now: float, n: int, duration: int = 600) -> None:
    """``duration`` s (10 minutes) of 5 s intervals ending at ``now`` for ``n`` targets, a
    model each (``replica-0000``…, model ``<model>-<i>``), written as the collector writes
    a round."""
    with tempfile.TemporaryDirectory() as tmp:
        rec = read_scrapes(record("healthy", Path(tmp), duration=duration, seed=3, start_unix=0))
    ((model, deltas),) = rec.deltas.items()
    off = now - deltas[-1].end
    store = Store(db)
    for i in range(n):
        name = f"replica-{i:04d}"
        moved = [
            dataclasses.replace(
                d, target=name, model_name=f"{model}-{i}", start=d.start + off, end=d.end + off
            )
            for d in deltas
        ]
        scrapes = [ScrapeRecord(name, d.end, True, None, None, 0.01, 50_000, 0) for d in moved]
        store.write_round(scrapes, moved, [])
    store.close()


def fleet_targets(n: int) -> list[dict[str, str]]:
    return [
        {"name": f"replica-{i:04d}", "url": f"http://127.0.0.1:9/replica/{i}/metrics"}
        for i in range(n)
    ]


def render_child(url: str, ready: str, runs: int, watch: str | None, then: str | None) -> int:
    """The browser side, run as a child process (``--render``): open ``url`` in a fresh
    Chromium, time until ``ready`` holds (cold), reload ``runs`` times (warm); each figure
    a JSON line on stdout as soon as it is known. With ``watch``, the first Dash callback
    whose request holds that text is reported too (its URL, body and answer time): the
    network events arrive while the page's main thread is still busy rendering."""
    from playwright.sync_api import sync_playwright

    def say(**what: Any) -> None:
        print(json.dumps(what), flush=True)

    seen: dict[str, float] = {}

    def watched(request: Any) -> bool:
        return (
            watch is not None
            and "/_dash-update-component" in request.url
            and watch in (request.post_data or "")
        )

    def on_request(request: Any) -> None:
        if watched(request) and "sent" not in seen:
            seen["sent"] = time.perf_counter()
            say(request={"url": request.url, "body": request.post_data})

    def on_response(response: Any) -> None:
        if watched(response.request) and "answered" not in seen:
            seen["answered"] = time.perf_counter()
            say(answer=seen["answered"] - seen["sent"])

    # Each render's phases: every request from the navigation on (the document, Dash's
    # layout and dependencies, each callback named by its outputs), when it was sent and
    # answered and its size, relative to the navigation; then when ``ready`` held.
    phases: list[dict[str, Any]] = []
    t0 = time.perf_counter()

    sent_at: dict[int, float] = {}  # id(request): Playwright hands the same object to each event

    def on_phase_request(request: Any) -> None:
        sent_at[id(request)] = time.perf_counter() - t0

    def on_phase_done(request: Any) -> None:
        sent = sent_at.pop(id(request), None)
        if sent is None:
            return
        size = request.sizes().get("responseBodySize", 0)
        phases.append(
            {
                "what": phase_name(request),
                "sent": sent,
                "done": time.perf_counter() - t0,
                "bytes": size,
            }
        )

    exe = shutil.which("chromium")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("request", on_request)
        page.on("response", on_response)
        page.on("request", on_phase_request)
        page.on("requestfinished", on_phase_done)
        for k in range(runs + 1):
            phases.clear()
            t0 = time.perf_counter()
            page.goto(url, timeout=0)
            page.wait_for_function(ready, timeout=0, polling=20)
            took = time.perf_counter() - t0
            full = None
            if then:  # the rest of the page, after its first useful paint
                page.wait_for_function(then, timeout=0, polling=20)
                full = time.perf_counter() - t0
            say(phases=sorted(phases, key=lambda e: e["sent"]), ready=took)
            say(**{"cold" if k == 0 else "warm": took, "full": full})
        browser.close()
    return 0


def phase_name(request: Any) -> str:
    """A request as a phase: a Dash callback by its outputs, anything else by its path."""
    path = request.url.split("?", 1)[0]
    if "/_dash-update-component" not in path:
        return path.rsplit("/", 1)[-1] or "document"
    try:
        body = json.loads(request.post_data or "{}")
    except ValueError:
        return "callback"
    return "callback " + str(body.get("output", "?"))[:60]


STATIC = (".js", ".css", ".map", ".ico", ".woff", ".woff2")


def say_phases(what: str, event: dict[str, Any]) -> None:
    """The phases of one render on stderr: each request's sent → answered (seconds from
    the navigation) and size, then the time from the last answer to ``ready`` — the
    browser's own share (rendering the answers)."""
    last = 0.0
    for e in event["phases"]:
        last = max(last, e["done"])
        static = e["what"].endswith(STATIC)
        if static and e["done"] - e["sent"] < 0.5:
            continue  # the bundles, served in parallel: named only when slow
        kb = e["bytes"] / 1000
        progress(f"{what}:   {e['sent']:6.2f} → {e['done']:6.2f} s  {kb:7.1f} kB  {e['what']}")
    progress(
        f"{what}:   last answer {last:.2f} s, ready {event['ready']:.2f} s: "
        f"{event['ready'] - last:.2f} s after the last answer"
    )


@dataclass
class Rendered:
    """What the browser saw of a page: the first render (None: not within the bound),
    the warm ones, and the watched callback's request and answer time."""

    cold: float | None = None
    warm: list[float] = field(default_factory=list)
    # With ``then``: when the whole page was there (cold, then each warm render).
    full: list[float] = field(default_factory=list)
    answer: float | None = None
    request: dict[str, str] | None = None


def browse(
    url: str,
    ready: str,
    runs: int,
    what: str,
    *,
    bound_s: float,
    watch: str | None = None,
    then: str | None = None,
) -> Rendered:
    """Render ``url`` in a child process's own Chromium (a fresh browser: nothing cached),
    cold then ``runs`` times warm. Each render gets ``bound_s``: past it the child and its
    browser are killed — a page whose main thread is stuck in a long render cannot be
    interrupted from inside, so the bound is kept from outside."""
    cmd = [sys.executable, __file__, "--render", url, "--ready", ready, "--runs", str(runs)]
    if watch:
        cmd += ["--watch", watch]
    if then:
        cmd += ["--then", then]
    got = Rendered()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "events.jsonl"
        with log.open("ab") as out:  # appended by the child, read here by path
            proc = subprocess.Popen(cmd, stdout=out, start_new_session=True)
        progress(f"{what}: cold render (bounded at {bound_s:.0f} s)")
        deadline, lines = time.monotonic() + bound_s, 0
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
            for line in log.read_text().splitlines()[lines:]:
                lines += 1
                event = json.loads(line)
                if "phases" in event:
                    say_phases(what, event)
                if "cold" in event or "warm" in event:
                    deadline = time.monotonic() + bound_s  # the next render's own bound
                    took = event.get("cold", event.get("warm"))
                    whole = (
                        "" if event.get("full") is None else f" (whole page {event['full']:.2f} s)"
                    )
                    progress(f"{what}: {'cold' if 'cold' in event else 'warm'} {took:.2f} s{whole}")
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the child's session: it and its browser
            proc.wait()
            progress(f"{what}: not rendered within {bound_s:.0f} s, stopped")
        for line in log.read_text().splitlines():
            event = json.loads(line)
            if event.get("full") is not None:
                got.full.append(event["full"])
            if "cold" in event:
                got.cold = event["cold"]
            elif "warm" in event:
                got.warm.append(event["warm"])
            elif "answer" in event:
                got.answer = event["answer"]
            elif "request" in event:
                got.request = event["request"]
    return got


def bench_day(tmp: Path, runs: int, bound_s: float) -> None:
    progress("day: building 24 h of one stream")
    now = math.floor(time.time() / 60) * 60
    t0 = time.perf_counter()
    model, _ = build_day(tmp / "day.db", now)
    print(f"build_day_s: {time.perf_counter() - t0:.1f}")
    settings = load_settings(
        None,
        {
            "targets": [{"name": TARGET, "url": "http://127.0.0.1:9/metrics"}],
            "storage": {"path": str(tmp / "day.db")},
        },
    )
    # Server side alone: the day's windows, diagnoses and points, from the store.
    store = Store(tmp / "day.db")
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
        ready = TARGET_PAGE.format(windows="1440 windows")
        day = browse(url, ready, runs, "day target page", bound_s=bound_s)
    finally:
        server.close()
    print(f"target_page_24h_render_cold_s: {_s(day.cold, bound_s)}")
    print(f"target_page_24h_render_warm_s: {_median(day.warm)}")


def _s(x: float | None, bound_s: float) -> str:
    return f"> {bound_s:.0f} (not rendered)" if x is None else f"{x:.2f}"


def _median(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f}" if xs else "n/a"


def answers(request: dict[str, str], runs: int, bound_s: float) -> tuple[list[float], int]:
    """A Dash callback's request sent again ``runs`` times: (seconds each, answer bytes)."""
    out, size = [], 0
    with httpx.Client(timeout=bound_s) as client:
        for _ in range(runs):
            t0 = time.perf_counter()
            resp = client.post(
                request["url"],
                content=request["body"],
                headers={"Content-Type": "application/json"},
            )
            out.append(time.perf_counter() - t0)
            resp.raise_for_status()
            size = len(resp.content)
    return out, size


def bench_fleet(tmp: Path, runs: int, n: int, bound_s: float) -> None:
    progress(f"fleet: building 10 minutes of {n:,} targets")
    now = time.time()
    t0 = time.perf_counter()
    build_fleet(tmp / "fleet.db", now, n)
    print(f"build_fleet_s: {time.perf_counter() - t0:.1f}")
    settings = load_settings(
        None, {"targets": fleet_targets(n), "storage": {"path": str(tmp / "fleet.db")}}
    )
    store = Store(tmp / "fleet.db")
    streams = sorted(store.streams())
    store.close()
    target, model = streams[len(streams) // 2]
    server = Server(create_app(settings, start_jobs=False))
    try:
        # The overview first, as the app starts (its board computed from the start on),
        # as an on-call engineer opens it; then a target page.
        cards = browse(
            f"{server.url}/ui/",
            OVERVIEW.format(n=n, cards=CARDS_PER_PAGE),
            runs,
            f"overview of {n}",
            bound_s=bound_s,
            watch="overview-cards",
            then=OVERVIEW_TABLE.format(n=n),
        )
        url = f"{server.url}/ui/targets/{target}?model={quote(model, safe='')}"
        ready = TARGET_PAGE.format(windows=" windows of 60 s")
        one = browse(url, ready, runs, f"target page of {n}", bound_s=bound_s)
        # The server's side alone, warm: the cards callback asked again, no browser.
        warm, size = answers(cards.request, runs, bound_s) if cards.request else ([], 0)
        progress(f"overview of {n}: warm answers {' '.join(f'{a:.2f}' for a in warm)} s")
    finally:
        server.close()
    print(f"overview_{n}_render_cold_s: {_s(cards.cold, bound_s)}")
    print(f"overview_{n}_render_warm_s: {_median(cards.warm)}")
    table = cards.full
    print(f"overview_{n}_table_cold_s: {f'{table[0]:.2f}' if table else 'n/a'}")
    print(f"overview_{n}_table_warm_s: {_median(table[1:])}")
    answer = "n/a" if cards.answer is None else f"{cards.answer:.2f}"
    print(f"overview_{n}_answer_cold_s: {answer}")
    print(f"overview_{n}_answer_warm_s: {_median(warm)}")
    print(f"overview_{n}_answer_kb: {size / 1000:.0f}")
    print(f"target_page_of_{n}_render_cold_s: {_s(one.cold, bound_s)}")
    print(f"target_page_of_{n}_render_warm_s: {_median(one.warm)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="warm renders to take the median of")
    ap.add_argument("--targets", type=int, default=FLEET, help="targets of the fleet")
    ap.add_argument("--only", choices=["day", "fleet"], help="one of the two benches")
    ap.add_argument(
        "--bound",
        type=float,
        default=180.0,
        metavar="S",
        help="give up on a render after S seconds (default 180)",
    )
    ap.add_argument("--render", metavar="URL", help=argparse.SUPPRESS)  # the child's side
    ap.add_argument("--ready", help=argparse.SUPPRESS)
    ap.add_argument("--watch", help=argparse.SUPPRESS)
    ap.add_argument("--then", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.render:
        return render_child(args.render, args.ready, args.runs, args.watch, args.then)
    if shutil.which("chromium") is None:
        print("chromium not installed (apt-get install chromium)", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="pw-bench-ui-"))
    try:
        if args.only in (None, "day"):
            bench_day(tmp, args.runs, args.bound)
        if args.only in (None, "fleet"):
            bench_fleet(tmp, args.runs, args.targets, args.bound)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    progress("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
