"""The overview's first view after a start with nothing kept (a crash, a kill -9): 1,000
targets, 16 minutes of data, minute roll-ups written up to a minute before the crash (as
the service's roll-up job leaves them), no ``resume_state`` row.

Each of ``--starts`` fresh Python processes does what the service does on such a start:
the first evaluation round runs in a thread of its own (its windows, then its SLO
counts, paced as in the service), while the overview is asked what its callback computes
(cards, the budgets and the fleet list without waiting for a count, the page's strips;
fed as ``app.ui.mount`` feeds them):

* ``first_answer``: asked at once, while the round runs beside it;
* ``windows_at``: when the round's windows reach the pages, and the answer then;
* ``budgets_at``: when the SLO budgets are at hand (the round's first count), and the
  answer then, budgets included.

Times from the process's first line that builds the store's reader. Reproduce:
``.venv/bin/python bench/crash_start.py [--starts 5]``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from queries import _fleet_ui, fleet_evaluator, p95  # noqa: E402
from ui import FLEET, build_fleet, fleet_targets  # noqa: E402

from app.config import load_settings  # noqa: E402
from app.read.fleetpage import FleetData  # noqa: E402
from app.read.target import UiData  # noqa: E402
from app.store.sqlite import Store  # noqa: E402
from app.ui.pages.overview import CARDS_PER_PAGE  # noqa: E402

WAIT_S = 600.0  # a child that sees neither the windows nor the budgets by then fails


def _answer(data: UiData, fleets: FleetData) -> dict[str, float | int]:
    """What the overview's callback computes (``app.ui.pages.overview.register``)."""
    t0 = time.perf_counter()
    cards = data.cards()
    budgets = fleets.budgets(wait=False)
    fleets.summaries(wait=False)
    data.with_recent(cards[:CARDS_PER_PAGE])
    return {"s": time.perf_counter() - t0, "budgets": len(budgets)}


def _until(check: Callable[[], bool], started: float) -> float:
    """Seconds from ``started`` until ``check()`` holds (asked every 10 ms)."""
    deadline = time.monotonic() + WAIT_S
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"not ready after {WAIT_S:g} s")
        time.sleep(0.01)
    return time.perf_counter() - started


def child(db: str, now: float) -> int:
    started = time.perf_counter()
    settings = load_settings(None, {"targets": fleet_targets(FLEET), "storage": {"path": db}})
    store = Store(Path(db))
    evaluator = fleet_evaluator(settings, store, background_slo=True)
    data, fleets = _fleet_ui(store, settings, now, evaluator)
    first_round = threading.Thread(target=evaluator.run, args=(now,), daemon=True)
    first_round.start()
    first = _answer(data, fleets)
    windows_at = _until(lambda: bool(evaluator.latest_streams), started)
    then = _answer(data, fleets)
    budgets_at = _until(lambda: bool(fleets.statuses(wait=False)), started)
    full = _answer(data, fleets)
    first_round.join(WAIT_S)
    evaluator.slos.stop(60.0)
    store.close()
    out = {
        "first": first,
        "windows_at": windows_at,
        "then": then,
        "budgets_at": budgets_at,
        "full": full,
    }
    print(json.dumps(out))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--starts", type=int, default=5, help="fresh processes")
    ap.add_argument("--child", nargs=2, metavar=("DB", "NOW"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child[0], float(args.child[1]))
    now = math.floor(time.time() / 60) * 60
    with tempfile.TemporaryDirectory(prefix="pw-bench-crash-") as name:
        db = Path(name) / "fleet16.db"
        t0 = time.perf_counter()
        build_fleet(db, now, FLEET, duration=960)
        store = Store(db)
        store.roll_up(now - 60)  # the roll-up job's last run before the crash
        store.close()
        print(f"build_fleet_16min_s: {time.perf_counter() - t0:.1f}")
        runs = []
        for _ in range(args.starts):
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(db), str(now)],
                check=True,
                capture_output=True,
                text=True,
            )
            got = json.loads(out.stdout.strip().splitlines()[-1])
            assert got["full"]["budgets"] == FLEET, got
            runs.append(got)
            print(json.dumps(got))

    def figures(pick: Callable[[dict[str, Any]], float]) -> str:
        xs = [pick(r) for r in runs]
        return f"median {statistics.median(xs):.2f}, p95 {p95(xs):.2f}"

    print(f"first_answer_s (the round beside it): {figures(lambda r: r['first']['s'])}")
    print(f"windows_at_s: {figures(lambda r: r['windows_at'])}")
    print(f"answer_then_s: {figures(lambda r: r['then']['s'])}")
    print(f"budgets_at_s: {figures(lambda r: r['budgets_at'])}")
    print(f"answer_with_budgets_s: {figures(lambda r: r['full']['s'])}")
    print(f"over {len(runs)} fresh processes, {FLEET} targets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
