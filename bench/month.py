"""A month of history: the service's memory per stream at day 1, 7 and 30.

Writes the history of a sample of ``--streams`` streams through the store's own API —
the last two days as raw 5 s deltas (``Store.write_round``, rolled up as the service
does), the days before as minute and hour roll-ups only (``Store.import_rollups``:
what retention leaves of raw deltas older than ``storage.retention_days``) — from a
15-minute simulator recording (``healthy``) repeated, ending now. Three stores: a day
(the raw part cut to one day), 7 and 30 days — and an empty one, day 0. Then, for each
store:

* **the service**: ``phasewatch serve`` on that store, scraping the simulator's
  replicas (``phasewatch sim --replicas N --model-per-replica``: each sample stream is
  live and continues its history) with the default rules and SLOs (30-day budget; SLO
  evaluations every ``--slo-every`` seconds so the budget's fill is seen in a minute),
  until every SLO's budget covers its whole period (``/api/v1/slos``: ``budget.from``),
  then one more SLO evaluation: its ``VmRSS`` (``rss_mb``) and peak (``VmHWM``), and
  what the age added per stream: ``(rss − rss at day 0) / N`` (``base_rss_mb``: the
  same service with no target at all);
* **the tracker**: the service's SLO tracker (``SloTracker`` with the same SLOs) on
  the same store in this process, evaluated every minute over the last two hours, then
  the bytes of every object its count caches hold (``sys.getsizeof`` over the object
  graph, the store and the SLOs left out) per stream.

The projection for 1,000 streams starts from the scale run's 1,000 targets
(``bench/scale.py``: 441 MB after five minutes on a fresh store, BENCHMARKS.md "Scale")
and adds 1,000 × what the age added per stream: the tracker's bytes at that age
(exact), or the sample's RSS growth over day 0 (within the noise of a few MB of a
process's RSS, divided by N). Targets at 1,000 streams, day 30: RSS ≤ 500 MB, tracker
≤ 300 MB. Prints ``name: value`` lines and the load average beside the figures (the
machine is shared).

Reproduce: ``.venv/bin/python bench/month.py [--streams 12] [--keep DIR]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import math
import os
import shutil
import sys
import tempfile
import time
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from scale import free_port, memory_mb, started, wait_for  # noqa: E402

from app.config import load_settings  # noqa: E402
from app.fleet.specs import slo_specs  # noqa: E402
from app.fleet.tracker import SloTracker  # noqa: E402
from app.model import IntervalDelta  # noqa: E402
from app.sim.record import record  # noqa: E402
from app.sources.recording import read_scrapes  # noqa: E402
from app.store.sqlite import ScrapeRecord, Store  # noqa: E402
from app.windows.rollup import Rollup, rollups_of  # noqa: E402

DAY = 86400.0
LOOP = 900.0  # the recording's length, s
RAW_DAYS = 2.0
AGES = (0, 1, 7, 30)
SCALE_RSS_1000_MB = 441.0  # bench/scale.py --targets 1000, BENCHMARKS.md "Scale"


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# -- the history ------------------------------------------------------------------------------
def recording() -> tuple[str, list[IntervalDelta], list[Rollup]]:
    """A 15-minute ``healthy`` recording from 0: its model, deltas and minute roll-ups."""
    with tempfile.TemporaryDirectory() as tmp:
        rec = read_scrapes(record("healthy", Path(tmp), duration=LOOP, seed=1, start_unix=0))
    ((model, deltas),) = rec.deltas.items()
    return model, deltas, rollups_of(deltas, 60.0)


def streams(n: int, served: str) -> list[tuple[str, str]]:
    """The sample's streams as the simulator serves them (a model per replica)."""
    return [(f"replica-{i:03d}", f"{served}-{i}") for i in range(n)]


def write_raw(
    db: Path, sample: list[tuple[str, str]], loop: list[IntervalDelta], end: float
) -> None:
    """The last ``RAW_DAYS`` days of every stream as raw deltas, rolled up hourly."""
    store = Store(db, recent_s=2 * 3600.0)
    first = end - RAW_DAYS * DAY
    for k in range(int(RAW_DAYS * DAY / LOOP)):
        off = first + k * LOOP
        for target, model in sample:
            deltas = [
                dataclasses.replace(
                    d, target=target, model_name=model, start=d.start + off, end=d.end + off
                )
                for d in loop
            ]
            scrapes = [
                ScrapeRecord(target, d.end, True, None, None, 0.01, 50_000, 0) for d in deltas
            ]
            store.write_round(scrapes, deltas, [])
        if k % 4 == 3:
            store.roll_up(off + LOOP)
    store.roll_up(end)
    store.checkpoint()
    store.close()


def import_old(
    db: Path, sample: list[tuple[str, str]], minutes: list[Rollup], start: float, end: float
) -> None:
    """Minute and hour roll-ups of every stream over ``(start, end]``, no raw deltas."""
    store = Store(db)
    per_loop = len(minutes)
    for target, model in sample:
        out = []
        t = start
        i = 0
        while t < end:
            r = minutes[i % per_loop]
            shift = t - r.start
            out.append(
                dataclasses.replace(
                    r,
                    start=t,
                    end=t + 60.0,
                    first_end=r.first_end + shift,
                    last_end=r.last_end + shift,
                )
            )
            t += 60.0
            i += 1
        store.import_rollups(target, model, out)
    store.checkpoint()
    store.close()


def build(tmp: Path, n: int) -> tuple[dict[int, Path], list[tuple[str, str]], float]:
    """The three stores (by age in days), the sample, and the end of their history."""
    t0 = time.monotonic()
    model, loop, minutes = recording()
    sample = streams(n, model)
    end = math.floor(time.time() / 3600.0) * 3600.0  # a whole hour: loops and hours align
    base = tmp / "raw.db"
    write_raw(base, sample, loop, end)
    print(f"build_raw_s: {time.monotonic() - t0:.0f} (load {load()})", flush=True)
    dbs = {0: tmp / "day0.db"}  # day 0: an empty store, the service makes it
    for age in AGES[1:]:
        db = dbs[age] = tmp / f"day{age}.db"
        shutil.copy(base, db)
        if age > RAW_DAYS:
            import_old(db, sample, minutes, end - age * DAY, end - RAW_DAYS * DAY)
        elif age < RAW_DAYS:
            store = Store(db)
            store.enforce_retention(end, age * DAY, age * DAY)
            store.checkpoint()
            store.close()
    base.unlink()
    print(f"build_s: {time.monotonic() - t0:.0f} (load {load()})", flush=True)
    return dbs, sample, end


# -- the service --------------------------------------------------------------------------------
@contextmanager
def simulator(n: int, tmp: Path) -> Iterator[str]:
    log = tmp / "sim.log"
    argv = [sys.executable, "-m", "app.cli", "sim", "--scenario", "healthy", "--port", "0"]
    argv += ["--replicas", str(n), "--model-per-replica", "--page-tick", "1"]
    with started(argv, log, cwd=ROOT) as proc:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            first = log.read_text().partition("\n")[0].strip()
            if first.startswith("listening on "):
                yield first.removeprefix("listening on ")
                return
            time.sleep(0.1)
        sys.exit(f"simulator did not start:\n{log.read_text()[-3000:]}")


def config(tmp: Path, db: Path, sim_url: str | None, n: int, slo_every: float) -> Path:
    port = free_port()
    empty = tmp / "no-targets.json"  # the base: a service with no target (an empty file_sd)
    empty.write_text("[]")
    cfg = {
        "targets": [
            {"name": f"replica-{i:03d}", "url": f"{sim_url}/replica/{i}/metrics"} for i in range(n)
        ],
        "file_sd": [] if sim_url else [{"files": [str(empty)]}],
        "scrape": {"interval": 5},
        "storage": {"path": str(db), "retention_days": RAW_DAYS, "rollup_retention_days": 90},
        "server": {"host": "127.0.0.1", "port": port},
        "alerts": {"slo_evaluation_interval": slo_every},
        "log": {"level": "WARNING"},
    }
    path = tmp / f"{db.stem}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def budget_complete(base: str, period_start: float) -> tuple[bool, int]:
    """Whether every SLO status's budget covers its whole period, and how many there are."""
    try:
        got = httpx.get(f"{base}/api/v1/slos", timeout=30).json()
    except (httpx.HTTPError, ValueError):
        return False, 0
    if not got:
        return False, 0
    return all(s["budget"]["from"] <= period_start + 3600.0 for s in got), len(got)


def serve(cfg: Path, tmp: Path, expect: int, timeout: float, slo_every: float) -> dict[str, float]:
    port = yaml.safe_load(cfg.read_text())["server"]["port"]
    base = f"http://127.0.0.1:{port}"
    log = tmp / f"{cfg.stem}.log"
    argv = [sys.executable, "-m", "app.cli", "serve", "--config", str(cfg)]
    with started(argv, log, cwd=ROOT) as proc:
        wait_for(f"{base}/healthz", proc, log)
        t0 = time.monotonic()
        filled = None
        while time.monotonic() - t0 < timeout:
            done, count = budget_complete(base, time.time() - 30 * DAY)
            if expect == 0 or (done and count >= expect):
                filled = time.monotonic() - t0
                break
            time.sleep(2.0)
        if expect:
            time.sleep(slo_every + 5.0)  # one more evaluation: the steady shape
        else:
            time.sleep(20.0)
        rss, hwm = memory_mb(proc.pid)
        if proc.poll() is not None:
            sys.exit(f"phasewatch exited:\n{log.read_text()[-3000:]}")
    return {"rss": rss, "hwm": hwm, "fill_s": math.nan if filled is None else filled}


# -- the tracker ----------------------------------------------------------------------------------
def deep_size(root: object, skip: list[object]) -> int:
    """Bytes of every object reachable from ``root`` (``skip`` and types left out)."""
    seen = {id(o) for o in skip}
    stack = [root]
    total = 0
    while stack:
        o = stack.pop()
        if id(o) in seen or isinstance(o, type | types.ModuleType | types.FunctionType):
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        stack.extend(gc.get_referents(o))
    return total


def tracker_bytes(cfg: Path, sample: list[tuple[str, str]]) -> tuple[int, float]:
    """The SLO tracker's caches on the store of ``cfg`` after two hours of evaluations
    every minute, ending now; and the CPU of an evaluation per stream (ms; the mean of
    the last 30)."""
    settings = load_settings(cfg)
    store = Store(settings.storage.path)
    specs = slo_specs(settings)
    retention = max(settings.storage.retention_days, settings.storage.rollup_retention_days)
    tracker = SloTracker(store, specs, retention_s=retention * DAY)
    now = time.time()
    t = now - 2 * 3600.0
    cpu: list[float] = []
    while t <= now:
        c0 = time.process_time()
        tracker.evaluate(t, sample, {})
        cpu.append(time.process_time() - c0)
        t += 60.0
    size = deep_size(tracker._caches, [store, *specs])
    store.close()
    return size, sum(cpu[-30:]) / len(cpu[-30:]) / len(sample) * 1e3  # the last 30


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=int, default=12, help="streams in the sample")
    ap.add_argument("--slo-every", type=float, default=15.0, help="SLO evaluation interval, s")
    ap.add_argument("--timeout", type=float, default=180.0, help="longest wait for a budget, s")
    ap.add_argument("--keep", metavar="DIR", help="build the stores in DIR and keep them")
    args = ap.parse_args()
    n = args.streams
    tmp = Path(args.keep or tempfile.mkdtemp(prefix="pw-month-"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        print(f"streams: {n} (load {load()})", flush=True)
        dbs, sample, _ = build(tmp, n)
        base = serve(config(tmp, tmp / "empty.db", None, 0, args.slo_every), tmp, 0, 0, 0)
        print(f"base_rss_mb: {base['rss']:.0f} (load {load()})", flush=True)
        results: dict[int, tuple[dict[str, float], int]] = {}
        with simulator(n, tmp) as sim_url:
            for age, db in dbs.items():
                cfg = config(tmp, db, sim_url, n, args.slo_every)
                got = serve(cfg, tmp, n, args.timeout, args.slo_every)
                size, ms = tracker_bytes(cfg, sample)
                results[age] = (got, size)
                grew = (got["rss"] - results[0][0]["rss"]) / n
                print(
                    f"day_{age}: rss_mb {got['rss']:.0f} (peak {got['hwm']:.0f}), "
                    f"{grew:+.2f} MB per stream over day 0; tracker {size / n / 1e3:.1f} kB "
                    f"per stream ({ms:.1f} ms of CPU a steady evaluation); budget filled "
                    f"in {got['fill_s']:.0f} s (load {load()})",
                    flush=True,
                )
        for age, (got, size) in results.items():
            tracker = size / n * 1000 / 1e6
            grew = max(0.0, got["rss"] - results[0][0]["rss"]) / n * 1000
            print(
                f"projection_1000_day_{age}: tracker_mb {tracker:.0f}; rss_mb "
                f"{SCALE_RSS_1000_MB + tracker:.0f} (scale run + tracker), "
                f"{SCALE_RSS_1000_MB + grew:.0f} (scale run + the sample's growth)"
            )
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
