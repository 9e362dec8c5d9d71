"""Churn: a fleet whose targets are replaced as autoscaling and deploys replace pods.

Starts the simulator's fleet in its own process (as ``bench/scale.py`` does: ``phasewatch
sim --replicas N --engines K --model-per-replica --page-tick 1``) and ``phasewatch
serve`` in another, its targets in a ``file_sd`` file: one target group per replica
(``__metrics_path__: /replica/{i}/metrics``), named by a ``name`` label. After a warm-up,
every ``--every`` seconds for ``--minutes`` minutes, ``--replace`` of the targets are
replaced: their groups get a new name (a new pod on the same replica's page), the file is
rewritten and renamed into place, as a ConfigMap or an operator would. Then it waits
``--settle`` seconds (a window and a step: the gone streams' gauges drop) and reads:

* ``survivors_with_gaps``: targets present from start to end whose stored interval deltas
  do not chain (a delta that does not start where the previous one ended: counts lost),
  and ``survivor_failed_scrapes``; ``missed_rounds`` and ``target_gaps`` from the
  service's own ``/metrics``;
* ``held_*``: what the service holds per target and stream (``phasewatch_held_entries``:
  target states, admitted streams, scrape clients, parse templates, streams held in the
  store's memory, fetch times, per-stream gauges) at the peak of the churn and at the
  end, against the live targets: each returns to the live count (templates: at most the
  live count plus the slack of 64). Alerts and the SLO count cache are history, printed
  beside them (``HISTORY_KINDS``);
* ``rss_mb`` after each replacement, its peak, and ``cpu_core_fraction`` over the churn;
  ``stored_streams``: the streams in the store (history, kept for the retention).

Prints ``name: value`` lines; exit 1 when a survivor lost data, a held count did not
return to the live count, or RSS went over ``--rss-bound``.

    python bench/churn.py --targets 1000 --minutes 10 [--replace 0.1] [--every 60]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import (  # noqa: E402
    ROOT,
    cpu_seconds,
    free_port,
    memory_mb,
    simulator,
    started,
    wait_for,
)

from app.store.sqlite import Store  # noqa: E402

TEMPLATE_SLACK = 64
# Held per stream of history, not per live target: alerts (resolved ones are kept
# ``alerts.resolved_retention``) and SLO counts (a budget counts removed replicas' requests
# for its period).
HISTORY_KINDS = ("held_alerts", "held_slo_count_streams")


def write_targets(path: Path, host: str, names: list[str]) -> None:
    """The file_sd file: replica ``i`` under ``names[i]``, renamed into place."""
    groups = [
        {"targets": [host], "labels": {"__metrics_path__": f"/replica/{i}/metrics", "name": n}}
        for i, n in enumerate(names)
    ]
    staged = path.with_name(".targets.json.tmp")
    staged.write_text(json.dumps(groups))
    os.replace(staged, path)


def held(url: str) -> dict[str, float]:
    """``phasewatch_held_entries`` by kind, and the service's counters that matter here."""
    text = httpx.get(url, timeout=30).text
    out = {
        f"held_{k}": float(v) for k, v in re.findall(r'held_entries\{kind="(\w+)"\} (\S+)', text)
    }
    for name in ("phasewatch_scrape_rounds_missed_total", "phasewatch_scrape_gaps_total"):
        found = re.search(rf"^{name} (\S+)$", text, re.M)
        out[name] = float(found.group(1)) if found else 0.0
    errors = re.findall(
        r'phasewatch_scrapes_total\{outcome="(?!ok)[^"]*",target="[^"]*"\} (\S+)', text
    )
    out["scrape_errors_now"] = sum(float(e) for e in errors)
    return out


def survivors_check(db: Path, survivors: list[str], since: float) -> tuple[int, int, float]:
    """(survivors whose deltas do not chain after ``since``, their failed scrapes, the
    shortest span a survivor's chain covers, seconds), read through the store (raw rows,
    blocks and roll-ups alike)."""
    store = Store(db)
    gaps, failed, shortest = 0, 0, float("inf")
    try:
        for name in survivors:
            models = [m for _, m in store.streams(name)]
            for model in models or [""]:
                deltas = store.intervals(name, model, since, 1e12) if models else []
                if not deltas or any(
                    b.start != a.end for a, b in zip(deltas, deltas[1:], strict=False)
                ):
                    gaps += 1
                if deltas:
                    shortest = min(shortest, deltas[-1].end - deltas[0].start)
            failed += sum(1 for r in store.scrapes(name, since, 1e12) if not r.ok)
    finally:
        store.close()
    return gaps, failed, shortest if survivors else 0.0


def stored_streams(db: Path) -> int:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return int(con.execute("SELECT COUNT(*) FROM streams").fetchone()[0])
    finally:
        con.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--targets", type=int, default=1000)
    ap.add_argument("--minutes", type=int, default=10, help="replacements, one per --every")
    ap.add_argument("--replace", type=float, default=0.1, help="share replaced each time")
    ap.add_argument("--every", type=float, default=60.0, help="seconds between replacements")
    ap.add_argument("--interval", type=float, default=5.0, help="scrape interval, seconds")
    ap.add_argument("--warmup", type=float, default=25.0)
    ap.add_argument("--settle", type=float, default=90.0, help="seconds after the last one")
    ap.add_argument("--engines", type=int, default=20)
    ap.add_argument("--scenario", default="healthy")
    ap.add_argument("--rss-bound", type=float, default=500.0, help="MB")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    args.shared_model = False  # every page its own model: no two streams share a series
    rng = random.Random(args.seed)

    with tempfile.TemporaryDirectory(prefix="pw-churn-") as name:
        tmp = Path(name)
        with simulator(args, tmp) as (sim_pid, sim_url):
            host = sim_url.removeprefix("http://")
            names = [f"r{i:04d}-g0" for i in range(args.targets)]
            sd = tmp / "sd"
            sd.mkdir()
            listing = sd / "targets.json"
            write_targets(listing, host, names)
            port = free_port()
            db = tmp / "pw.db"
            config = {
                "file_sd": [{"files": [str(sd / "*.json")], "name_label": "name"}],
                "scrape": {"interval": args.interval},
                "storage": {"path": str(db)},
                "server": {"host": "127.0.0.1", "port": port},
                "log": {"level": "WARNING"},
            }
            cfg = tmp / "phasewatch.yaml"
            cfg.write_text(yaml.safe_dump(config))
            base = f"http://127.0.0.1:{port}"
            log = tmp / "phasewatch.log"
            argv = [sys.executable, "-m", "app.cli", "serve", "--config", str(cfg)]
            with started(argv, log, cwd=ROOT) as proc:
                wait_for(f"{base}/healthz", proc, log)
                time.sleep(args.warmup)
                start_ts = time.time()
                before = held(f"{base}/metrics")
                c0, t0 = cpu_seconds(proc.pid), time.monotonic()
                rss: list[float] = []
                peak_held: dict[str, float] = {}
                replaced_ever: set[int] = set()
                for k in range(1, args.minutes + 1):
                    slots = rng.sample(range(args.targets), round(args.replace * args.targets))
                    for i in slots:
                        names[i] = f"r{i:04d}-g{k}"
                    replaced_ever.update(slots)
                    write_targets(listing, host, names)
                    time.sleep(args.every)
                    now = held(f"{base}/metrics")
                    for key, value in now.items():
                        peak_held[key] = max(peak_held.get(key, 0.0), value)
                    rss.append(memory_mb(proc.pid)[0])
                    print(f"minute {k}: rss_mb {rss[-1]:.0f}, held {_short(now)}", flush=True)
                cpu = (cpu_seconds(proc.pid) - c0) / (time.monotonic() - t0)
                time.sleep(args.settle)
                end = held(f"{base}/metrics")
                final_rss, hwm = memory_mb(proc.pid)
                if proc.poll() is not None:
                    sys.exit(f"phasewatch exited:\n{log.read_text()[-3000:]}")
            survivors = [names[i] for i in range(args.targets) if i not in replaced_ever]
            gaps, failed, shortest = survivors_check(db, survivors, start_ts)
            streams = stored_streams(db)

    live = args.targets
    kinds = sorted(k for k in end if k.startswith("held_"))
    returned = all(
        end[k] <= live + (TEMPLATE_SLACK if k == "held_parse_templates" else 0)
        for k in kinds
        if k not in HISTORY_KINDS
    )
    missed = (
        end["phasewatch_scrape_rounds_missed_total"]
        - before["phasewatch_scrape_rounds_missed_total"]
    )
    target_gaps = end["phasewatch_scrape_gaps_total"] - before["phasewatch_scrape_gaps_total"]
    print(f"targets: {live}")
    step = round(args.replace * live)
    print(f"replaced_per_step: {step} every {args.every:g} s, {args.minutes} times")
    print(f"interval_s: {args.interval:g}")
    print(f"survivors: {len(survivors)}")
    print(f"survivors_with_gaps: {gaps}")
    print(f"survivor_failed_scrapes: {failed}")
    print(f"survivor_shortest_chain_s: {shortest:.0f}")
    print(f"missed_rounds: {missed:.0f}")
    print(f"target_gaps: {target_gaps:.0f}")
    print(f"stored_streams: {streams}")
    for k in kinds:
        print(f"{k}: peak {peak_held.get(k, 0):.0f}, end {end[k]:.0f} (live {live})")
    print(f"rss_mb_per_minute: {' '.join(f'{r:.0f}' for r in rss)}")
    print(f"rss_mb_end: {final_rss:.0f}")
    print(f"peak_rss_mb: {hwm:.0f}")
    print(f"cpu_core_fraction: {cpu:.3f}")
    print(f"held_returned_to_live: {'yes' if returned else 'no'}")
    ok = gaps == 0 and returned and max(rss + [final_rss]) <= args.rss_bound
    return 0 if ok else 1


def _short(values: dict[str, float]) -> str:
    return " ".join(f"{k[5:]}={v:.0f}" for k, v in sorted(values.items()) if k.startswith("held_"))


if __name__ == "__main__":
    sys.exit(main())
