"""Soak: phasewatch scraping a faulty fleet for a long while, switching faults on and off.

Starts the simulator's multi-replica mode in its own process (``phasewatch sim
--replicas N``), loopback fault targets in this process (bench/soak_faults.py, on
tests/faults.py servers), a loopback webhook receiver, and
``phasewatch serve`` scraping all ``--targets`` of them every ``--interval`` seconds with
the default alert rules plus a ``target_up == 0`` rule without ``for`` (so that every
fault episode notifies). Every ``--switch-every`` seconds (jittered) faults switch: the
first time all at once (each fault target gets the next fault of a shuffled cycle, the
second server stops listening, the receiver answers 503), then a random
``--switch-share`` of them (a healthy target gets the next fault, a faulty one heals; the
second server heals at the next switch, the receiver once a send to it failed). Every
state lasts at least two intervals plus the timeout, so that a scrape shows it. After
``--duration`` seconds every fault heals, the outbox drains, the service stops, and it
prints ``name: value`` lines:

* ``rss_mb_start`` (the first 10 s after ``--warmup``), ``rss_mb_end`` (the last 10 s),
  each a median of 5 readings of ``VmRSS``; ``rss_growth_pct`` (must be < 10);
  ``rss_mb_max``;
* ``unhandled_exceptions``: tracebacks in the service log while it ran (must be 0);
* ``faults_injected``, ``faults_seen``, ``faults_missing`` (injected, never seen: must be
  none), ``faults_not_injected`` (must be none): a fault is seen when ``/api/v1/targets``
  shows its error kind for a target scraped after the switch (a restart: a window marked
  ``reset``; the receiver's 503: its kind in ``/api/v1/health/components``);
* ``notifications_sent`` (outbox rows marked sent), ``notifications_received``
  (distinct bodies the receiver got), ``notifications_duplicates`` (extra copies,
  allowed by the at-least-once rule), ``notifications_lost`` (sent, never received:
  must be 0), ``notifications_unknown`` (received, never sent: must be 0) and
  ``notifications_pending`` (still in the outbox at the stop);
* for information: ``scrape_rounds_missed`` and ``scrape_gaps`` (the service's own
  counters), ``api_failures`` (API calls that failed or timed out after 10 s).

Exit status 1 when a must is not met. Every process it starts is stopped (by PID) on the
way out, also on Ctrl-C or SIGTERM. The temporary folder (logs, store, ``trace.log``: each
switch and what health showed) goes unless ``--keep``.

    python bench/soak.py [--duration 600] [--targets 200] [--fault-targets 40]
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.soak_faults import KINDS, Soak  # noqa: E402
from tests.faults import FaultServer, gzip_bomb  # noqa: E402
from tests.realbins import free_port, running  # noqa: E402

RSS_SAMPLES = 5
RULES = """
rules:
  - alert: SoakTargetDown
    expr: target_up == 0
    severity: warning
    value: scrape_error_kind
    annotations: {summary: "{{ labels.target }} does not answer ({{ value }})"}
"""


def rss_mb(pid: int) -> float:
    """VmRSS of a process, MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def until(pred: Any, deadline: float, every: float = 2.0) -> bool:
    """Wait for ``pred()`` until ``deadline`` (monotonic); tell whether it came true."""
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(every)
    return False


class Stop(Exception):
    """SIGTERM: stop the soak, cleaning up as for Ctrl-C."""


def _sigterm(signum: int, frame: object) -> None:
    raise Stop


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    p.add_argument("--duration", type=float, default=600.0, help="seconds of soak")
    p.add_argument("--warmup", type=float, help="seconds before rss_mb_start (default 1/5)")
    p.add_argument("--targets", type=int, default=200, help="targets in all")
    p.add_argument("--fault-targets", type=int, help="of which fault targets (default 1/5)")
    p.add_argument("--interval", type=float, default=5.0, help="scrape interval, seconds")
    p.add_argument("--timeout", type=float, default=4.0, help="scrape timeout, seconds")
    p.add_argument("--switch-every", type=float, default=15.0, help="seconds between switches")
    p.add_argument("--switch-share", type=float, default=0.3, help="fault targets switched")
    p.add_argument("--scenario", default="healthy", help="simulator scenario")
    p.add_argument("--engines", type=int, default=8, help="simulated engines behind the fleet")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--keep", action="store_true", help="keep the temporary folder (logs, store)")
    args = p.parse_args()
    if args.warmup is None:
        args.warmup = args.duration / 5
    if args.fault_targets is None:
        args.fault_targets = max(4, args.targets // 5)
    if not 0 < args.warmup < args.duration:
        p.error("--warmup must be between 0 and --duration")
    if not 4 <= args.fault_targets <= args.targets - 2:
        p.error("--fault-targets must be at least 4 and leave 2 simulator replicas")
    return args


def config(args: argparse.Namespace, tmp: Path, sim_url: str, port: int, soak: Soak) -> Path:
    replicas = args.targets - args.fault_targets
    targets = [
        {"name": f"replica-{i:03d}", "url": f"{sim_url}/replica/{i}/metrics"}
        for i in range(replicas)
    ]
    targets += [{"name": s.name, "url": soak.srv.url(s.path)} for s in soak.slots]
    targets += [{"name": f"fault-gone-{i}", "url": soak.gone.url(f"/gone-{i}")} for i in range(2)]
    (tmp / "rules.yaml").write_text(RULES)
    cfg = {
        "targets": targets,
        "scrape": {"interval": args.interval, "timeout": args.timeout},
        "storage": {"path": str(tmp / "pw.db")},
        "server": {"host": "127.0.0.1", "port": port},
        "log": {"level": "INFO"},
        "alerts": {
            "rules_file": str(tmp / "rules.yaml"),
            "retry_initial": 1.0,
            "retry_max": 5.0,
            "receivers": {"webhook": [soak.hooks.url("/hook")]},
        },
    }
    path = tmp / "phasewatch.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def notifications(db: Path, received: list[Any]) -> dict[str, int]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT payload, outcome FROM outbox").fetchall()
    finally:
        con.close()
    sent = {json.dumps(json.loads(p), sort_keys=True) for p, o in rows if o == "sent"}
    got = Counter(json.dumps(b, sort_keys=True) for b in received)
    return {
        "notifications_sent": len(sent),
        "notifications_received": len(got),
        "notifications_duplicates": sum(got.values()) - len(got),
        "notifications_lost": len(sent - set(got)),
        "notifications_unknown": len(set(got) - sent),
        "notifications_pending": sum(1 for _, o in rows if o is None),
    }


def run(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    gzip_bomb()  # built once, before anything has a timeout
    replicas = args.targets - args.fault_targets
    sim_port, port = free_port(), free_port()
    sim_url, base = f"http://127.0.0.1:{sim_port}", f"http://127.0.0.1:{port}"
    sim = [sys.executable, "-m", "app.cli", "sim", "--scenario", args.scenario]
    sim += ["--port", str(sim_port), "--replicas", str(replicas)]
    sim += ["--engines", str(min(args.engines, replicas)), "--model-per-replica"]
    log = tmp / "phasewatch.log"
    rss: list[float] = []
    with FaultServer() as srv, FaultServer() as gone, FaultServer() as hooks:
        soak = Soak(args, srv, gone, hooks)
        soak.api = base + "/api/v1"
        cfg = config(args, tmp, sim_url, port, soak)
        serve = [sys.executable, "-m", "app.cli", "serve", "--config", str(cfg)]
        with (
            running(sim, log=tmp / "sim.log", ready_url=sim_url + "/replica/0/metrics"),
            running(serve, log=log, ready_url=base + "/healthz") as proc,
        ):
            t0 = time.monotonic()
            next_switch = t0 + args.switch_every
            # No switch in the last rounds: every fault switched on gets scraped and looked at.
            last_switch = t0 + args.duration - 3 * args.interval - 5.0
            while (now := time.monotonic()) < t0 + args.duration:
                if proc.poll() is not None:
                    raise RuntimeError(f"phasewatch exited:\n{log.read_text()[-3000:]}")
                if next_switch <= now <= last_switch:
                    soak.switch(time.time())
                    next_switch = now + args.switch_every * soak.rng.uniform(0.5, 1.5)
                soak.look()
                if now - t0 >= args.warmup:
                    rss.append(rss_mb(proc.pid))
                    soak.trace.append(f"{time.time():.2f} rss_mb {rss[-1]:.1f}")
                time.sleep(2.0)
            rss.append(rss_mb(proc.pid))
            soak.restarts_seen()
            rounds = soak.rounds(base)
            # Heal everything; once every target answers, two evaluation rounds (15 s by
            # default) resolve the alerts; then the outbox drains.
            soak.heal()
            deadline = time.monotonic() + 120

            def health() -> dict[str, Any]:
                return soak.get("/health/components") or {}

            until(lambda: health().get("targets", {}).get("up") == args.targets, deadline)
            time.sleep(30.0)
            until(lambda: health().get("outbox", {}).get("backlog") == 0, deadline)
            # Counted before the stop: a graceful stop may cancel a running job.
            exceptions = log.read_text().count("Traceback (most recent")
        sim_log = (tmp / "sim.log").read_text()
        (tmp / "trace.log").write_text("\n".join(soak.trace) + "\n")
    missing = soak.injected - soak.seen
    # Medians of the first and last RSS_SAMPLES readings (2 s apart): a page being read
    # (up to scrape.max_body_bytes) shows in one reading, not in a median.
    rss_start = statistics.median(rss[:RSS_SAMPLES])
    rss_end = statistics.median(rss[-RSS_SAMPLES:])
    out: dict[str, Any] = {
        "duration_s": round(args.duration),
        "warmup_s": round(args.warmup),
        "targets": args.targets,
        "fault_targets": args.fault_targets,
        "rss_mb_start": round(rss_start, 1),
        "rss_mb_end": round(rss_end, 1),
        "rss_mb_max": round(max(rss), 1),
        "rss_growth_pct": round(100 * (rss_end - rss_start) / rss_start, 1),
        "unhandled_exceptions": exceptions,
        "sim_exceptions": sim_log.count("Traceback (most recent"),
        "api_failures": soak.api_failures,
        **rounds,
        "faults_injected": ",".join(k for k in KINDS if k in soak.injected) or "none",
        "faults_seen": ",".join(k for k in KINDS if k in soak.seen) or "none",
        "faults_missing": ",".join(k for k in KINDS if k in missing) or "none",
        "faults_not_injected": ",".join(k for k in KINDS if k not in soak.injected) or "none",
    }
    out |= notifications(tmp / "pw.db", hooks.route("/hook").bodies)
    return out


def main() -> int:
    args = parse_args()
    signal.signal(signal.SIGTERM, _sigterm)
    tmp = Path(tempfile.mkdtemp(prefix="phasewatch-soak-"))
    try:
        out = run(args, tmp)
    except (KeyboardInterrupt, Stop):
        print("soak: interrupted; processes stopped", file=sys.stderr)
        return 130
    finally:
        if args.keep:
            print(f"soak: logs and store kept in {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    for name, value in out.items():
        print(f"{name}: {value}")
    failed = [
        name
        for name, bad in (
            ("rss_growth_pct", out["rss_growth_pct"] >= 10),
            ("unhandled_exceptions", out["unhandled_exceptions"] > 0),
            ("faults_missing", out["faults_missing"] != "none"),
            ("faults_not_injected", out["faults_not_injected"] != "none"),
            ("notifications_lost", out["notifications_lost"] > 0),
            ("notifications_unknown", out["notifications_unknown"] > 0),
        )
        if bad
    ]
    print(f"result: {'fail (' + ', '.join(failed) + ')' if failed else 'pass'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
