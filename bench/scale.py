"""How phasewatch's cost grows with the number of vLLM targets it scrapes.

Starts the simulator's multi-replica mode in its own process (``phasewatch sim
--replicas N --engines K --model-per-replica``: K simulated engines drive the N pages,
and every page carries its own ``model_name``, so no two targets share a series text —
the worst case for the parser's caches), then ``phasewatch serve`` in another process
with a generated config scraping all N targets (``/replica/{i}/metrics``) every
``--interval`` seconds, with the default alert rules evaluated as in production. After a
warm-up it measures ``--duration`` seconds of steady state:

* ``cpu_core_fraction``: phasewatch's CPU seconds (``/proc/PID/stat`` utime + stime, all
  threads) over wall seconds; ``rss_mb``: its ``VmRSS`` at the end (``peak_rss_mb``:
  ``VmHWM``, over the whole run).
* ``missed_intervals``: scheduled rounds that did not run plus per-target gaps (a fetch
  starting more than 1.5 intervals after the target's previous one), from the service's
  own ``/metrics`` (``phasewatch_scrape_rounds_missed_total``,
  ``phasewatch_scrape_gaps_total``); failed scrapes are counted in ``scrape_errors``.
* ``scrape_lag_p99_s``: p99 over every target and round of (fetch start − the round's
  scheduled time), from ``phasewatch_scrape_lag_seconds`` (interpolated in its buckets
  as ``histogram_quantile`` does; ``scrape_lag_p99_bucket_s`` is the bucket's bound).
* ``store_mb_per_stream_day``: growth of the SQLite store (its logical size: pages in the
  file and the WAL) per stream, scaled to a day.

``--peer`` then stops phasewatch and runs Prometheus (``/usr/bin/prometheus``) on the
same simulator and targets for the same time (127.0.0.1, temporary storage), measured the
same way, for information. Prints ``name: value`` lines; the last is the headline.
Exit status 1 when a target (1,000 targets in 5 minutes: no missed interval, lag p99
< 1 s, ≤ 1 core, ≤ 500 MB, ≤ 10 MB per stream-day) is not met.

``--warmup 0`` measures from the first round (the cold start: parse templates, HTTP
connections and stream ids built while the rounds run); ``--noisy`` keeps one core busy
with another process the whole run (a neighbour on the host: the margin);
``--hint-effects off`` runs without the hints' predicted effects (``whatif.hint_effects``;
compare the two side by side for its cost; with the default ``healthy`` scenario no
stream has a hint to price, so give a problem ``--scenario``; with it on, the headroom of
8 targets spread over the fleet is asked at the end, and stderr says why a twin was not
fitted).

    python bench/scale.py --targets 1000 --duration 300 [--interval 5] [--peer]
        [--warmup S] [--noisy] [--hint-effects on|off] [--scenario NAME]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from app.windows.quantile import bucket_quantile  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
# --noisy: a process that keeps one core busy (pure Python, no I/O) until it is stopped.
BUSY_LOOP = "while True:\n    pass"
TARGETS = {
    "missed_intervals": 0,
    "scrape_lag_p99_s": 1.0,
    "cpu_core_fraction": 1.0,
    "rss_mb": 500.0,
    "store_mb_per_stream_day": 10.0,
}


# -- processes ------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def memory_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process, MB."""
    kb = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            kb[key] = int(value.split()[0])
    return kb["VmRSS"] / 1024, kb["VmHWM"] / 1024


@contextmanager
def started(argv: list[str], log: Path, **kw: object) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``argv`` with its output in ``log``; stop it (by PID) on the way out."""
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, **kw)  # type: ignore[call-overload]
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)


def wait_for(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"{proc.args!r} exited:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    sys.exit(f"{url} did not answer within {timeout:g} s:\n{log.read_text()[-3000:]}")


@contextmanager
def simulator(args: argparse.Namespace, tmp: Path) -> Iterator[tuple[int, str]]:
    """The simulator's fleet in its own process: (PID, base URL)."""
    log = tmp / "sim.log"
    argv = [sys.executable, "-m", "app.cli", "sim", "--scenario", args.scenario, "--port", "0"]
    argv += ["--replicas", str(args.targets), "--engines", str(min(args.engines, args.targets))]
    argv += ["--page-tick", "1"]  # each engine rendered once a second, not once a request
    if not args.shared_model:
        argv.append("--model-per-replica")
    with started(argv, log, cwd=ROOT) as proc:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            first = log.read_text().partition("\n")[0].strip()
            if first.startswith("listening on "):
                yield proc.pid, first.removeprefix("listening on ")
                return
            time.sleep(0.1)
        sys.exit(f"simulator did not start:\n{log.read_text()[-3000:]}")


def py_spy(pid: int, duration: float, out: str) -> subprocess.Popen[bytes]:
    """py-spy recording ``pid`` for ``duration`` seconds into ``out`` (raw stacks, 50 Hz)."""
    spy = shutil.which("py-spy", path=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    if spy is None:
        sys.exit("--profile needs py-spy (pip install py-spy)")
    return subprocess.Popen(
        [spy, "record", "-p", str(pid), "-d", str(int(duration))]
        + ["-r", "50", "--format", "raw", "-o", out, "--nonblocking"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


# -- reading phasewatch's own metrics ----------------------------------------------------
def self_metrics(url: str) -> dict[str, object]:
    """Counters and the lag histogram from the service's /metrics."""
    text = httpx.get(url, timeout=30).text
    out: dict[str, object] = {"errors": 0.0, "ok": 0.0}
    buckets: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "phasewatch_scrape_lag_seconds_bucket":
                buckets[float(s.labels["le"])] = s.value
            elif s.name in (
                "phasewatch_scrape_rounds_missed_total",
                "phasewatch_scrape_gaps_total",
                "phasewatch_scrape_round_duration_seconds_count",
                "phasewatch_scrape_round_duration_seconds_sum",
                "phasewatch_hint_effects_cpu_seconds_total",
                "phasewatch_hint_effects_priced_streams_total",
                "phasewatch_hint_effects_failed_streams_total",
                "phasewatch_hint_effects_queued_streams",
            ):
                out[s.name] = s.value
            elif s.name == "phasewatch_scrapes_total":
                outcome = s.labels["outcome"]
                key = "ok" if outcome == "ok" else "errors"
                out[key] = float(out[key]) + s.value  # type: ignore[arg-type]
                if key == "errors":
                    out[f"error:{outcome}"] = float(out.get(f"error:{outcome}", 0.0)) + s.value  # type: ignore[arg-type]
    out["lag_buckets"] = buckets
    return out


def lag_p99(before: dict[str, object], after: dict[str, object]) -> tuple[float, float]:
    """p99 of the lag observed between two readings: (interpolated, bucket bound)."""
    b0: dict[float, float] = before["lag_buckets"]  # type: ignore[assignment]
    b1: dict[float, float] = after["lag_buckets"]  # type: ignore[assignment]
    cum = sorted((le, b1[le] - b0.get(le, 0.0)) for le in b1)
    value, _, _ = bucket_quantile(0.99, cum)
    total = cum[-1][1]
    bound = next(le for le, c in cum if c >= 0.99 * total)
    return value, bound


def store_bytes(db: Path) -> int:
    """Logical size of the store: its pages, whether in the file or still in the WAL."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        (count,) = con.execute("PRAGMA page_count").fetchone()
        (size,) = con.execute("PRAGMA page_size").fetchone()
        (streams,) = con.execute("SELECT COUNT(*) FROM streams").fetchone()
    finally:
        con.close()
    return int(count) * int(size) if streams else 0


def stream_count(db: Path) -> int:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return int(con.execute("SELECT COUNT(*) FROM streams").fetchone()[0])
    finally:
        con.close()


# -- the two runs --------------------------------------------------------------------------
def measure(pid: int, sim_pid: int, duration: float) -> dict[str, float]:
    """CPU of ``pid`` and the simulator over ``duration`` seconds, RSS at the end."""
    c0, s0, t0 = cpu_seconds(pid), cpu_seconds(sim_pid), time.monotonic()
    time.sleep(duration)
    c1, s1, t1 = cpu_seconds(pid), cpu_seconds(sim_pid), time.monotonic()
    rss, hwm = memory_mb(pid)
    wall = t1 - t0
    return {
        "wall": wall,
        "cpu": (c1 - c0) / wall,
        "sim_cpu": (s1 - s0) / wall,
        "rss": rss,
        "hwm": hwm,
    }


def run_phasewatch(
    args: argparse.Namespace, tmp: Path, sim_url: str, sim_pid: int
) -> dict[str, float]:
    port = free_port()
    db = tmp / "pw.db"
    config = {
        "targets": [
            {"name": f"replica-{i:04d}", "url": f"{sim_url}/replica/{i}/metrics"}
            for i in range(args.targets)
        ],
        "scrape": {"interval": args.interval},
        "storage": {"path": str(db)},
        "server": {"host": "127.0.0.1", "port": port},
        "log": {"level": "WARNING"},
        "whatif": {"hint_effects": args.hint_effects == "on"},
    }
    cfg = tmp / "phasewatch.yaml"
    cfg.write_text(yaml.safe_dump(config))
    log = tmp / "phasewatch.log"
    base = f"http://127.0.0.1:{port}"
    argv = [sys.executable, "-m", "app.cli", "serve", "--config", str(cfg)]
    with started(argv, log, cwd=ROOT) as proc:
        wait_for(f"{base}/healthz", proc, log)
        time.sleep(args.warmup)
        m0, b0 = self_metrics(f"{base}/metrics"), store_bytes(db)
        profiler = py_spy(proc.pid, args.duration, args.profile) if args.profile else None
        try:
            got = measure(proc.pid, sim_pid, args.duration)
        finally:
            if profiler is not None:
                try:
                    profiler.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    profiler.kill()
                    profiler.wait(timeout=10)
        m1, b1 = self_metrics(f"{base}/metrics"), store_bytes(db)
        streams = stream_count(db)
        if proc.poll() is not None:
            sys.exit(f"phasewatch exited:\n{log.read_text()[-3000:]}")
        if args.hint_effects == "on":
            why_no_twin(base, args.targets)
    lines = log.read_text().splitlines()
    warnings = [line for line in lines if "WARNING" in line or "ERROR" in line]
    for i, line in enumerate(lines):  # an error's traceback, whole
        if " ERROR " in line:
            print("\n".join(lines[i : i + 40]), file=sys.stderr)
            break
    # What went wrong, on stderr (the figures stay on stdout): each kind of message once,
    # with how often it came and when first.
    kinds: dict[str, tuple[int, str]] = {}
    for line in warnings:
        kind = re.sub(r"[0-9][0-9:.,-]*", "#", line.partition(" ")[2].partition(" ")[2])[:160]
        n, first = kinds.get(kind, (0, line[:23]))
        kinds[kind] = (n + 1, first)
    for kind, (n, first) in kinds.items():
        print(f"phasewatch log: {n} x (first at {first}) {kind}", file=sys.stderr)

    def delta(name: str) -> float:
        return float(m1.get(name, 0.0)) - float(m0.get(name, 0.0))  # type: ignore[arg-type]

    p99, p99_bound = lag_p99(m0, m1)
    rounds = delta("phasewatch_scrape_round_duration_seconds_count")
    round_s = delta("phasewatch_scrape_round_duration_seconds_sum") / max(rounds, 1)
    stream_days = streams * got["wall"] / 86400.0
    return {
        **got,
        "rounds": rounds,
        "expected_rounds": got["wall"] / args.interval,
        "round_s": round_s,
        "missed_rounds": delta("phasewatch_scrape_rounds_missed_total"),
        "gaps": delta("phasewatch_scrape_gaps_total"),
        "errors": delta("errors"),
        **{k: delta(k) for k in m1 if k.startswith("error:") and delta(k) > 0},
        "ok": delta("ok"),
        "lag_p99": p99,
        "lag_p99_bound": p99_bound,
        "streams": streams,
        "store_mb_day": (b1 - b0) / 1e6 / stream_days if stream_days else float("nan"),
        "log_warnings": len(warnings),
        # The hints' pricing job's own CPU (its thread's time), of the wall measured.
        "effects_cpu": delta("phasewatch_hint_effects_cpu_seconds_total") / got["wall"],
        "effects_priced": delta("phasewatch_hint_effects_priced_streams_total"),
        "effects_failed": delta("phasewatch_hint_effects_failed_streams_total"),
        "effects_queued": float(m1.get("phasewatch_hint_effects_queued_streams", 0.0)),  # type: ignore[arg-type]
    }


def why_no_twin(base: str, targets: int, sample: int = 8) -> None:
    """On stderr, after the measured time: why the twins of a few targets spread over the
    fleet could not be fitted (their headroom answers' ``error``; the pricing job shares
    their twin, so a twin it fitted or failed in this 5-minute bucket is answered from the
    cache)."""
    reasons: dict[str, int] = {}
    for i in range(0, targets, max(1, targets // sample)):
        resp = httpx.get(f"{base}/api/v1/targets/replica-{i:04d}/headroom", timeout=120)
        answer = resp.json() if resp.status_code == 200 else {"error": resp.text}
        why = str(answer.get("error") or "fitted")[:160]
        reasons[why] = reasons.get(why, 0) + 1
    for why, n in sorted(reasons.items(), key=lambda kv: -kv[1]):
        print(f"twin of sampled targets: {n} x {why}", file=sys.stderr)


def run_prometheus(
    args: argparse.Namespace, tmp: Path, sim_url: str, sim_pid: int
) -> dict[str, float] | None:
    binary = shutil.which("prometheus")
    if binary is None:
        print("peer: prometheus not installed, skipped")
        return None
    port = free_port()
    host = sim_url.removeprefix("http://")
    config = {
        "global": {"scrape_interval": f"{args.interval:g}s", "scrape_timeout": "4s"},
        # One job; every replica a target of its own through its metrics path.
        "scrape_configs": [
            {
                "job_name": "vllm",
                "static_configs": [
                    {
                        "targets": [host],
                        "labels": {"__metrics_path__": f"/replica/{i}/metrics", "replica": str(i)},
                    }
                    for i in range(args.targets)
                ],
            }
        ],
    }
    cfg = tmp / "prometheus.yml"
    cfg.write_text(yaml.safe_dump(config))
    log = tmp / "prometheus.log"
    argv = [
        binary,
        f"--config.file={cfg}",
        f"--storage.tsdb.path={tmp / 'prom-data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    with started(argv, log) as proc:
        wait_for(f"http://127.0.0.1:{port}/-/ready", proc, log)
        time.sleep(args.warmup)
        got = measure(proc.pid, sim_pid, args.duration)
        q = httpx.get(
            f"http://127.0.0.1:{port}/api/v1/query",
            params={"query": 'count(up{job=~"vllm"} == 1)'},
            timeout=30,
        ).json()
        result = q["data"]["result"]
        got["up"] = float(result[0]["value"][1]) if result else 0.0
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--targets", type=int, default=1000)
    ap.add_argument("--duration", type=float, default=300.0, help="measured seconds")
    ap.add_argument("--interval", type=float, default=5.0)
    ap.add_argument("--warmup", type=float, default=25.0, help="seconds before measuring")
    ap.add_argument("--scenario", default="healthy")
    ap.add_argument("--engines", type=int, default=20, help="simulated engines behind the pages")
    ap.add_argument(
        "--shared-model",
        action="store_true",
        help="one model name on every page (a fleet of one model) instead of one per target",
    )
    ap.add_argument("--peer", action="store_true", help="then run Prometheus the same way")
    ap.add_argument(
        "--noisy",
        action="store_true",
        help="another process keeps one core busy the whole run (a neighbour on the host)",
    )
    ap.add_argument(
        "--hint-effects",
        choices=("on", "off"),
        default="on",
        help="whatif.hint_effects: price problem streams' hints on the twin (default on)",
    )
    ap.add_argument("--profile", metavar="FILE", help="py-spy record phasewatch (raw stacks)")
    args = ap.parse_args()

    load0 = Path("/proc/loadavg").read_text().split()[:3]
    with tempfile.TemporaryDirectory(prefix="pw-scale-") as name:
        tmp = Path(name)
        noise = (
            started([sys.executable, "-c", BUSY_LOOP], tmp / "noise.log")
            if args.noisy
            else contextlib.nullcontext()
        )
        with noise, simulator(args, tmp) as (sim_pid, sim_url):
            pw = run_phasewatch(args, tmp, sim_url, sim_pid)
            peer = None
            if args.peer:
                try:
                    peer = run_prometheus(args, tmp, sim_url, sim_pid)
                except SystemExit as exc:  # phasewatch's figures still count
                    print(f"peer: Prometheus failed: {exc}"[:2000])
    load1 = Path("/proc/loadavg").read_text().split()[:3]

    missed = int(pw["missed_rounds"] + pw["gaps"])
    print(f"targets: {args.targets}")
    print(f"noisy: {'one core kept busy by another process' if args.noisy else 'no'}")
    print(f"interval_s: {args.interval:g}")
    print(f"measured_s: {pw['wall']:.0f}")
    print(f"loadavg_before: {' '.join(load0)}")
    print(f"loadavg_after: {' '.join(load1)}")
    print(f"streams: {pw['streams']:.0f}")
    print(f"rounds: {pw['rounds']:.0f} (expected {pw['expected_rounds']:.1f})")
    print(f"round_mean_s: {pw['round_s']:.3f}")
    print(f"missed_rounds: {pw['missed_rounds']:.0f}")
    print(f"target_gaps: {pw['gaps']:.0f}")
    print(f"scrapes_ok: {pw['ok']:.0f}")
    print(f"scrape_errors: {pw['errors']:.0f}")
    kinds = sorted((k.partition(":")[2], v) for k, v in pw.items() if k.startswith("error:"))
    if kinds:
        print("scrape_error_kinds: " + ", ".join(f"{k} {v:.0f}" for k, v in kinds))
    print(f"log_warnings: {pw['log_warnings']:.0f}")
    print(f"scrape_lag_p99_bucket_s: {pw['lag_p99_bound']:g}")
    print(f"sim_cpu_core_fraction: {pw['sim_cpu']:.3f}")
    print(f"peak_rss_mb: {pw['hwm']:.0f}")
    if peer is not None:
        print(f"peer_prometheus_cpu_core_fraction: {peer['cpu']:.3f}")
        print(f"peer_prometheus_rss_mb: {peer['rss']:.0f}")
        print(f"peer_prometheus_targets_up: {peer['up']:.0f}")
        print(f"peer_sim_cpu_core_fraction: {peer['sim_cpu']:.3f}")
    print(f"missed_intervals: {missed}")
    print(f"scrape_lag_p99_s: {pw['lag_p99']:.3f}")
    print(f"rss_mb: {pw['rss']:.0f}")
    print(f"store_mb_per_stream_day: {pw['store_mb_day']:.2f}")
    print(f"cpu_core_fraction: {pw['cpu']:.3f}")
    if args.hint_effects == "on":
        print(f"hint_effects_cpu_core_fraction: {pw['effects_cpu']:.4f}")
        print(f"hint_effects_priced_streams: {pw['effects_priced']:.0f}")
        print(f"hint_effects_failed_streams: {pw['effects_failed']:.0f} (no twin fitted)")
        print(f"hint_effects_queued_streams_end: {pw['effects_queued']:.0f}")
    met = (
        missed == 0
        and pw["errors"] == 0
        and pw["lag_p99"] < TARGETS["scrape_lag_p99_s"]
        and pw["cpu"] <= TARGETS["cpu_core_fraction"]
        and pw["rss"] <= TARGETS["rss_mb"]
        and pw["store_mb_day"] <= TARGETS["store_mb_per_stream_day"]
    )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
