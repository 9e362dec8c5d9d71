"""Two versions of phasewatch side by side on one simulator: the CPU each spends a scrape.

A change's cost at scale is a few per cent, and on a shared two-core machine two runs of
``bench/scale.py`` one after the other differ by more than that (the load moves between
them). Here both versions run at once — ``--before`` (another checkout, e.g. ``git
worktree add /tmp/before HEAD~1``) and ``--after`` (this one by default) — each a
``phasewatch serve`` scraping the same ``--targets`` pages of one simulator (started as
``bench/scale.py`` starts it) every ``--interval`` seconds, so whatever else the machine
does falls on both alike. After ``--warmup`` seconds it measures ``--duration``:

* ``cpu_core_fraction``: each process's CPU seconds (utime + stime, all threads) over
  wall seconds; ``scrapes``: the scrapes it made (``phasewatch_scrapes_total``, all
  outcomes), ``cpu_ms_per_scrape`` the first over the second — what is compared, as a
  round either misses under load is a round's work it did not do;
* ``missed_intervals`` (rounds missed plus per-target gaps) and ``scrape_lag_p99_s`` of
  each, from its own ``/metrics``;
* ``after_vs_before``: the ratio of ``cpu_ms_per_scrape`` (and of the CPU fractions).

    python bench/scale_ab.py --before /tmp/before [--after .] --targets 1000
        --duration 300 [--interval 5] [--warmup 25]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import (  # noqa: E402
    ROOT,
    cpu_seconds,
    free_port,
    lag_p99,
    memory_mb,
    self_metrics,
    simulator,
    started,
    wait_for,
)


def _config(tmp: Path, name: str, args: argparse.Namespace, sim_url: str) -> tuple[Path, str]:
    """A service config scraping every replica (as bench/scale.py writes it); its URL."""
    port = free_port()
    config = {
        "targets": [
            {"name": f"replica-{i:04d}", "url": f"{sim_url}/replica/{i}/metrics"}
            for i in range(args.targets)
        ],
        "scrape": {"interval": args.interval},
        "storage": {"path": str(tmp / f"{name}.db")},
        "server": {"host": "127.0.0.1", "port": port},
        "log": {"level": "WARNING"},
        "whatif": {"hint_effects": True},
    }
    cfg = tmp / f"{name}.yaml"
    cfg.write_text(yaml.safe_dump(config))
    return cfg, f"http://127.0.0.1:{port}"


def _scrapes(m: dict[str, object]) -> float:
    return float(m["ok"]) + float(m["errors"])  # type: ignore[arg-type]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--before", type=Path, required=True, help="the other checkout's root")
    ap.add_argument("--after", type=Path, default=ROOT, help="this checkout by default")
    ap.add_argument("--targets", type=int, default=1000)
    ap.add_argument("--duration", type=float, default=300.0, help="measured seconds")
    ap.add_argument("--interval", type=float, default=5.0)
    ap.add_argument("--warmup", type=float, default=25.0, help="seconds before measuring")
    ap.add_argument("--engines", type=int, default=20, help="simulated engines behind the pages")
    args = ap.parse_args()
    args.scenario, args.shared_model = "healthy", False  # what simulator() reads
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    for name, tree in trees.items():
        if not (tree / "app" / "cli").is_dir():
            sys.exit(f"--{name} {tree}: no app/cli there")

    with tempfile.TemporaryDirectory(prefix="pw-scale-ab-") as tmpname, ExitStack() as stack:
        tmp = Path(tmpname)
        _, sim_url = stack.enter_context(simulator(args, tmp))
        procs, bases = {}, {}
        for name, tree in trees.items():
            cfg, bases[name] = _config(tmp, name, args, sim_url)
            log = tmp / f"{name}.log"
            argv = [sys.executable, "-m", "app.cli", "serve", "--config", str(cfg)]
            procs[name] = stack.enter_context(started(argv, log, cwd=tree))
            wait_for(f"{bases[name]}/healthz", procs[name], log)
        time.sleep(args.warmup)
        m0 = {n: self_metrics(f"{b}/metrics") for n, b in bases.items()}
        c0 = {n: cpu_seconds(p.pid) for n, p in procs.items()}
        t0 = time.monotonic()
        time.sleep(args.duration)
        c1 = {n: cpu_seconds(p.pid) for n, p in procs.items()}
        wall = time.monotonic() - t0
        m1 = {n: self_metrics(f"{b}/metrics") for n, b in bases.items()}
        rss = {n: memory_mb(p.pid)[0] for n, p in procs.items()}
        for name, proc in procs.items():
            if proc.poll() is not None:
                sys.exit(f"{name} exited:\n{(tmp / f'{name}.log').read_text()[-3000:]}")

    print(f"targets: {args.targets}")
    print(f"interval_s: {args.interval:g}")
    print(f"measured_s: {wall:.0f}")
    per_scrape, fraction = {}, {}
    for name, tree in trees.items():
        before, after = m0[name], m1[name]

        def delta(
            key: str, before: dict[str, object] = before, after: dict[str, object] = after
        ) -> float:
            return float(after.get(key, 0.0)) - float(before.get(key, 0.0))  # type: ignore[arg-type]

        scrapes = _scrapes(after) - _scrapes(before)
        fraction[name] = (c1[name] - c0[name]) / wall
        per_scrape[name] = (c1[name] - c0[name]) / max(scrapes, 1.0) * 1000
        missed = delta("phasewatch_scrape_rounds_missed_total") + delta(
            "phasewatch_scrape_gaps_total"
        )
        print(f"{name}_tree: {tree}")
        print(f"{name}_scrapes: {scrapes:.0f} (errors {delta('errors'):.0f})")
        print(f"{name}_missed_intervals: {missed:.0f}")
        print(f"{name}_scrape_lag_p99_s: {lag_p99(before, after)[0]:.3f}")
        print(f"{name}_rss_mb: {rss[name]:.0f}")
        print(f"{name}_cpu_core_fraction: {fraction[name]:.3f}")
        print(f"{name}_cpu_ms_per_scrape: {per_scrape[name]:.3f}")
    ratio = per_scrape["after"] / per_scrape["before"]
    print(f"after_vs_before_cpu_core_fraction: {fraction['after'] / fraction['before']:.3f}")
    print(f"after_vs_before_cpu_per_scrape: {ratio:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
