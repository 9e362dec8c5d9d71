"""How fast the read side answers: the windows API over a day, the overview of a fleet,
and the diagnosis itself.

* ``windows_api_24h_*``: ``GET /api/v1/windows`` for one stream over 24 h of 5 s
  intervals (the day ``bench/ui.py`` builds: a 15-minute ``incident`` recording repeated
  96 times), 60 s windows every 60 s (1,440 windows), through the real app under uvicorn
  and a real HTTP client. ``first``: the first request, which decodes and windows the
  whole day; then ``--runs`` requests of the same day, p50 and p95 — what a dashboard
  refreshing that view gets: windows that can no longer change are kept encoded
  (``app.read.windows.WindowCache``) and only the newest are computed.
* ``overview_1000_*``: what the overview computes for 1,000 targets with 10 minutes of
  data each — every stream's card (``UiData.cards``: latest window, diagnosis and figures,
  worst first), then the class strip of the page's 24 cards (``UiData.with_recent``) —
  cold (first call of a fresh ``UiData``) and warm (p95 of the later calls).
  ``overview_1000_fleets_first_ms``: the rest of the overview's first answer outside the
  service — the fleet list (every fleet's imbalance in its latest window); the budgets
  are counted in a thread beside it (``…_budgets_counted_s``: until they are there).
  ``overview_1000_fleets_cold_ms``: the same, waiting for the budgets (every stream's
  SLO counts computed).
  ``overview_1000_cold_in_service_ms``: the same first call inside the service, once its
  evaluation round has run (the round's latest windows order the cards; measured on a
  fresh ``UiData`` fed by a real ``Evaluator``'s round over the same store); and
  ``GET /api/v1/targets``.
* ``overview_1000_after_restart_*``: the first view of a fresh process started on a
  store a stopped service left its last rounds in (``app.evaluate.resume``): a fleet
  with 16 minutes of data, evaluation rounds over its last 15 (as a service that ran
  that long judged them; one every 2 minutes), kept as ``Service.stop`` keeps them; then
  ``--restarts`` fresh Python processes each take them back as ``Service.start`` does
  (``resume_ms``) and time the overview's first call, fed as ``app.ui.mount`` feeds it
  (median and p95 over the processes), with the fleets' part of the answer: the budgets
  of the SLO evaluation kept and the fleet list on the kept round's windows
  (``…_cards_and_fleets_ms``). ``keep_ms``/``kept_kb``: the stop's cost.
* ``diagnosis_windows_per_s``: ``diagnose()`` over the day's 1,440 windows, pure CPU.

Reproduce: ``.venv/bin/python bench/queries.py [--runs 20] [--restarts 5]``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ui import DAY, FLEET, TARGET, Server, build_day, build_fleet, fleet_targets  # noqa: E402

from app.config import Settings, load_settings  # noqa: E402
from app.diagnose import diagnose  # noqa: E402
from app.evaluate import round as round_module  # noqa: E402
from app.evaluate.resume import NAME, keep, resume  # noqa: E402
from app.evaluate.round import Evaluator  # noqa: E402
from app.evaluate.settings import diagnosis_config  # noqa: E402
from app.fleet.specs import slo_specs  # noqa: E402
from app.main import create_app  # noqa: E402
from app.read.fleetpage import FleetData  # noqa: E402
from app.read.fleetpoints import FleetOptions  # noqa: E402
from app.read.source import StoreSource, TargetInfo  # noqa: E402
from app.read.target import UiData  # noqa: E402
from app.store.resume import ResumeStore  # noqa: E402
from app.store.sqlite import Store  # noqa: E402
from app.ui.pages.overview import CARDS_PER_PAGE  # noqa: E402
from app.windows.aggregate import windows  # noqa: E402


def fleet_evaluator(settings: Settings, store: Store, *, background_slo: bool = False) -> Evaluator:
    """The service's evaluator over the fleet's store (no live targets: every stream is read
    from the store)."""
    return Evaluator.from_settings(
        settings,
        store,
        diagnosis_config(settings),
        targets=dict,
        ui_base_url="http://127.0.0.1",
        background_slo=background_slo,
    )


def p95(xs: list[float]) -> float:
    return sorted(xs)[max(0, math.ceil(0.95 * len(xs)) - 1)]


def bench_windows(tmp: Path, now: float, runs: int) -> None:
    db = tmp / "day.db"
    t0 = time.perf_counter()
    model, _ = build_day(db, now)
    print(f"build_day_s: {time.perf_counter() - t0:.1f}")
    settings = load_settings(
        None,
        {
            "targets": [{"name": TARGET, "url": "http://127.0.0.1:9/metrics"}],
            "storage": {"path": str(db)},
        },
    )
    store = Store(db)
    deltas = store.intervals(TARGET, model, now - DAY, now)
    ws = windows(
        deltas, start=now - DAY, end=now, length=60.0, step=60.0, target=TARGET, model_name=model
    )
    config = diagnosis_config(settings)
    t0 = time.perf_counter()
    for w in ws:
        diagnose(w, config)
    took = time.perf_counter() - t0
    store.close()
    print(f"diagnosis_windows: {len(ws)}")
    print(f"diagnosis_windows_per_s: {len(ws) / took:.0f}")

    server = Server(create_app(settings, start_jobs=False))
    params: dict[str, str | float] = {
        "target": TARGET,
        "model": model,
        "start": now - DAY,
        "end": now,
        "window": 60,
        "step": 60,
    }
    times = []
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            for _ in range(runs + 1):
                t0 = time.perf_counter()
                resp = client.get("/api/v1/windows", params=params)
                times.append(time.perf_counter() - t0)
                resp.raise_for_status()
            got = len(resp.json())
    finally:
        server.close()
    print(f"windows_api_24h_windows: {got}")
    print(f"windows_api_24h_first_ms: {times[0] * 1e3:.0f}")
    print(f"windows_api_24h_p50_ms: {statistics.median(times[1:]) * 1e3:.0f}")
    print(f"windows_api_24h_p95_ms: {p95(times[1:]) * 1e3:.0f}")


def bench_overview(tmp: Path, now: float, runs: int) -> None:
    db = tmp / "fleet.db"
    t0 = time.perf_counter()
    build_fleet(db, now, FLEET)
    print(f"build_fleet_s: {time.perf_counter() - t0:.1f}")
    targets = fleet_targets(FLEET)
    settings = load_settings(None, {"targets": targets, "storage": {"path": str(db)}})
    store = Store(db)
    data, fleets = _fleet_ui(store, settings, now, None)
    times = []
    for _ in range(runs + 1):
        t0 = time.perf_counter()
        page = data.with_recent(data.cards()[:CARDS_PER_PAGE])
        times.append(time.perf_counter() - t0)
        assert len(page) == CARDS_PER_PAGE
    t0 = time.perf_counter()
    fleets.budgets(wait=False)
    fleets.summaries(wait=False)
    print(
        f"overview_1000_fleets_first_ms: {(time.perf_counter() - t0) * 1e3:.0f}"
        " (the fleet list, as the overview asks: the budgets counted beside it)"
    )
    fleets.wait_counted(600.0)  # the count the overview started, in a thread of its own
    print(f"overview_1000_budgets_counted_s: {time.perf_counter() - t0:.1f}")
    _, alone = _fleet_ui(store, settings, now, None)
    t0 = time.perf_counter()
    alone.budgets()
    alone.summaries()
    print(
        f"overview_1000_fleets_cold_ms: {(time.perf_counter() - t0) * 1e3:.0f}"
        " (the budgets waited for and the fleet list: every stream's SLO counts)"
    )
    print(f"overview_1000_cards: {len(data.cards())}")
    print(f"overview_1000_cold_ms: {times[0] * 1e3:.0f}")
    print(f"overview_1000_warm_p95_ms: {p95(times[1:]) * 1e3:.0f}")
    # Inside the service: an evaluation round has run (what it computes every round).
    evaluator = fleet_evaluator(settings, store)
    evaluator.run(now)
    fed, _ = _fleet_ui(store, settings, now, evaluator)
    t0 = time.perf_counter()
    shown = fed.with_recent(fed.cards()[:CARDS_PER_PAGE])
    assert len(shown) == CARDS_PER_PAGE
    print(f"overview_1000_cold_in_service_ms: {(time.perf_counter() - t0) * 1e3:.0f}")
    store.close()

    server = Server(create_app(settings, start_jobs=False))
    api = []
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            for _ in range(runs):
                t0 = time.perf_counter()
                client.get("/api/v1/targets").raise_for_status()
                api.append(time.perf_counter() - t0)
    finally:
        server.close()
    print(f"targets_api_1000_p95_ms: {p95(api) * 1e3:.0f}")


def _fleet_ui(
    store: Store, settings: Settings, now: float, evaluator: Evaluator | None
) -> tuple[UiData, FleetData]:
    """The overview's data over ``store`` (its cards, its fleets), fed by ``evaluator``
    as ``app.ui.mount`` feeds them inside the service; None: a process without one."""
    infos = [
        TargetInfo(t.name, t.url, True, None, None, (m,))
        for t, (_, m) in zip(settings.targets, sorted(store.streams()), strict=True)
    ]
    data = UiData(
        StoreSource(lambda: store, targets=lambda: infos, clock=lambda: now, settled=0.0),
        diagnosis_config(settings),
    )
    options = FleetOptions.from_config(
        settings.fleet, settings.storage, slo_specs(settings), settings.targets
    )
    if evaluator is None:
        return data, FleetData(data.source, data.config, options)
    fleets = FleetData(data.source, data.config, options, tracker=lambda: evaluator.tracker)
    data.latest = fleets.round_windows = lambda: evaluator.latest_streams
    data.wait_latest = evaluator.wait_judged
    data.recent_of = evaluator.recent.get
    return data, fleets


def restart_child(db: str, now: float) -> int:
    """A fresh process after a restart: take back the kept rounds, time the first view."""
    settings = load_settings(None, {"targets": fleet_targets(FLEET), "storage": {"path": db}})
    store = Store(Path(db))
    evaluator = fleet_evaluator(settings, store)
    t0 = time.perf_counter()
    resumed = resume(evaluator, now)
    took_resume = time.perf_counter() - t0
    data, fleets = _fleet_ui(store, settings, now, evaluator)
    # What the overview's callback computes (``app.ui.pages.overview.register``).
    t0 = time.perf_counter()
    cards = data.cards()
    fleets.budgets()
    fleets.summaries()
    t1 = time.perf_counter()
    page = data.with_recent(cards[:CARDS_PER_PAGE])
    took = time.perf_counter() - t0
    from_rounds = sum(1 for c in page if c.recent and all(p.requests == 0.0 for p in c.recent))
    store.close()
    print(
        json.dumps(
            {
                "resumed": resumed,
                "resume_s": took_resume,
                "first_s": took,
                "cards_fleets_s": t1 - t0,
                "from_rounds": from_rounds,
            }
        )
    )
    return 0


def bench_restart(tmp: Path, now: float, restarts: int) -> None:
    db = tmp / "fleet16.db"
    t0 = time.perf_counter()
    build_fleet(db, now, FLEET, duration=960)
    print(f"build_fleet_16min_s: {time.perf_counter() - t0:.1f}")
    settings = load_settings(None, {"targets": fleet_targets(FLEET), "storage": {"path": str(db)}})
    store = Store(db)
    # As the service: SLO counts refreshed beside the rounds.
    evaluator = fleet_evaluator(settings, store, background_slo=True)
    # The rounds are the set-up here, not what is timed: unpaced (no scrape loop to leave
    # room for), every 2 minutes (the strips' reach: ``app.read.points.MAX_ROUND_SPACING_S``)
    # where a service runs one every 15 s — its rings hold 64 classes a stream, these 9.
    round_module.BACKGROUND_SHARE = 1.0
    t0 = time.perf_counter()
    ends = [now - 900 + 120 * k for k in range(8)] + [now]
    for end in ends:
        evaluator.run(end)
    # The SLO budgets as of the last round (the service's stream-metrics job keeps them
    # fresh every window step; a round refreshes them in the background).
    evaluator.slo_statuses(now)
    print(f"rounds_s: {time.perf_counter() - t0:.1f} ({len(ends)} rounds over 15 minutes)")
    t0 = time.perf_counter()
    kept = keep(evaluator, now)
    print(f"overview_1000_keep_ms: {(time.perf_counter() - t0) * 1e3:.0f} ({kept} streams)")
    state = ResumeStore(store).take(NAME)
    assert state is not None
    print(f"overview_1000_kept_kb: {len(state.payload) / 1e3:.0f}")
    evaluator.slos.stop(60.0)  # its SLO refresh thread reads the store: it ends first
    store.close()
    firsts, resumes, fleets_part = [], [], []
    for _ in range(restarts):
        store = Store(db)
        ResumeStore(store).put(NAME, state)  # as the stop left it
        store.close()
        out = subprocess.run(
            [sys.executable, __file__, "--restart-child", str(db), str(now)],
            check=True,
            capture_output=True,
            text=True,
        )
        got = json.loads(out.stdout.strip().splitlines()[-1])
        assert got["resumed"] == FLEET and got["from_rounds"] == CARDS_PER_PAGE, got
        firsts.append(got["first_s"])
        fleets_part.append(got["cards_fleets_s"])
        resumes.append(got["resume_s"])
    first_ms = [x * 1e3 for x in firsts]
    resume_ms = [x * 1e3 for x in resumes]
    print(
        f"overview_1000_after_restart_ms: median {statistics.median(first_ms):.0f}, "
        f"p95 {p95(first_ms):.0f} over {restarts} processes"
    )
    print(
        "overview_1000_after_restart_cards_and_fleets_ms: median "
        f"{statistics.median(fleets_part) * 1e3:.0f} (cards, budgets, the fleet list)"
    )
    print(
        f"overview_1000_resume_ms: median {statistics.median(resume_ms):.0f}, "
        f"p95 {p95(resume_ms):.0f}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20, help="timed requests per query")
    ap.add_argument(
        "--only", choices=["overview", "restart", "windows"], help="one of the three benches"
    )
    ap.add_argument("--restarts", type=int, default=5, help="fresh processes after a restart")
    ap.add_argument("--restart-child", nargs=2, metavar=("DB", "NOW"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.restart_child:
        return restart_child(args.restart_child[0], float(args.restart_child[1]))
    now = math.floor(time.time() / 60) * 60
    with tempfile.TemporaryDirectory(prefix="pw-bench-q-") as name:
        tmp = Path(name)
        if args.only in (None, "overview"):
            bench_overview(tmp, now, args.runs)
        if args.only in (None, "restart"):
            bench_restart(tmp, now, args.restarts)
        if args.only in (None, "windows"):
            bench_windows(tmp, now, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
