"""Source mode at scale: phasewatch reading 1,000 or 5,000 streams from a Prometheus.

A live Prometheus (Debian's ``/usr/bin/prometheus``, 127.0.0.1, temporary storage)
scrapes ``--streams / --models`` targets, each page carrying ``--models`` models — a
vLLM fleet as Prometheus holds it, without 5,000 processes to scrape: an exporter in its
own process serves every page from a simulator recording (``phasewatch sim --record``,
``healthy``, 30 minutes), each model its own model name and its own place in the
recording, the cumulative counters continuing from page to page. Every
``--interval`` seconds Prometheus scrapes them all and phasewatch (``phasewatch serve``
with ``source: {kind: prometheus}``, ``step`` = ``scrape.interval`` = ``--interval``,
the default rules and SLOs) reads what arrived. After ``--warmup`` seconds it measures
``--duration`` seconds:

* ``queries_per_s``: requests Prometheus answered on ``/api/v1/query_range`` and
  ``/api/v1/query`` (its own ``prometheus_http_requests_total``), per second — all of
  them phasewatch's; ``query_s_per_round``: Prometheus' time answering them per round;
* ``round_s``: a read round's time (query, normalise, deltas, store; the service's
  ``phasewatch_scrape_round_duration_seconds``); ``missed_rounds``; ``--round R``
  reads every R seconds instead (``scrape.interval``: each round R / step steps);
* ``evaluation_lag_s``: how old the newest data the service holds is — the wall clock
  minus the newest stored page of a target, sampled every second on eight targets
  (p50, p99, max); an alert round evaluates up to ``now − source.lag`` (5 s), so this is
  what it sees: the source's lag, the step, the round's own time;
* ``cpu_core_fraction`` and ``rss_mb`` (end; peak) of phasewatch, and of Prometheus
  and the exporter for information.

Prints ``name: value`` lines and the load average (the machine has 2 cores shared with
other work). Reproduce:

    .venv/bin/python bench/source_scale.py --streams 1000 --models 50 --interval 5
    .venv/bin/python bench/source_scale.py --streams 5000 --models 50 --interval 30
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from scale import cpu_seconds, free_port, memory_mb, py_spy, started, wait_for  # noqa: E402

RECORDING_S = 1800.0  # the recording's length: 360 pages at 5 s
PLACE = "\x00"  # where a model's name goes in a page's lines


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# -- the exporter (a process of its own) --------------------------------------------------------
def split_page(text: str, model: str) -> list[tuple[str, str, bool]]:
    """A page as (family header, sample lines with the model's name as ``PLACE``,
    whether the lines name a model) per family, in the page's order."""
    out: list[tuple[str, str, bool]] = []
    header: list[str] = []
    lines: list[str] = []
    quoted = f'model_name="{model}"'

    def flush() -> None:
        if header or lines:
            body = "".join(lines)
            out.append(
                ("".join(header), body.replace(quoted, f'model_name="{PLACE}"'), quoted in body)
            )

    for line in text.splitlines(keepends=True):
        if line.startswith("# HELP"):
            flush()
            header, lines = [line], []
        elif line.startswith("#"):
            header.append(line)
        elif line.strip():
            lines.append(line)
    flush()
    return out


class Pages:
    """Every target's page at scrape ``k``: each of its models at its own place in the
    recording (``offset``), named ``{model}-{target}-{j}``; lines without a model
    (``cache_config_info``) once."""

    def __init__(self, rec: Path, models: int, interval: float, pages_needed: int) -> None:
        files = sorted(rec.glob("*.prom"), key=lambda p: float(p.name[: -len(".prom")]))
        first = files[0].read_text()
        model = re.search(r'model_name="([^"]+)"', first)
        assert model is not None
        self.model = model.group(1)
        self.pages = [split_page(f.read_text(), self.model) for f in files]
        self.models = models
        self.interval = interval
        room = max(1, len(self.pages) - pages_needed)
        self.offsets = [(j * 37) % room for j in range(models)]  # no model wraps around
        self.t0 = time.time()

    def render(self, target: int) -> bytes:
        k = int((time.time() - self.t0) / self.interval)
        n = len(self.pages)
        parts: list[str] = []
        base = self.pages[k % n]
        for f, (header, _, _) in enumerate(base):
            parts.append(header)
            for j in range(self.models):
                _, body, named = self.pages[(k + self.offsets[j]) % n][f]
                if not named:
                    if j == 0:
                        parts.append(body)
                    continue
                parts.append(body.replace(PLACE, f"{self.model}-{target}-{j}"))
        return "".join(parts).encode()


def exporter(rec: Path, models: int, interval: float, pages_needed: int, port_file: Path) -> None:
    pages = Pages(rec, models, interval, pages_needed)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            m = re.fullmatch(r"/t/(\d+)/metrics", self.path)
            if m is None:
                self.send_error(404)
                return
            body = pages.render(int(m.group(1)))
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.request_queue_size = 1024
    port_file.write_text(str(server.server_address[1]))
    server.serve_forever()


@contextmanager
def exporting(args: argparse.Namespace, tmp: Path, targets: int) -> Iterator[tuple[int, int]]:
    """The exporter in its own process: (PID, port)."""
    rec = tmp / "rec"
    if not rec.exists():
        argv = [sys.executable, "-m", "app.cli", "sim", "--scenario", "healthy"]
        argv += ["--record", str(rec), "--duration", str(RECORDING_S)]
        with started(argv, tmp / "record.log", cwd=ROOT) as proc:
            proc.wait(timeout=300)
    port_file = tmp / "exporter.port"
    port_file.unlink(missing_ok=True)
    needed = math.ceil((args.warmup + args.duration + 120.0) / args.interval)
    argv = [sys.executable, __file__, "--exporter", str(rec), str(args.models)]
    argv += [str(args.interval), str(needed), str(port_file)]
    with started(argv, tmp / "exporter.log", cwd=ROOT) as proc:
        deadline = time.monotonic() + 60
        while not port_file.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        if not port_file.exists():
            sys.exit(f"exporter did not start:\n{(tmp / 'exporter.log').read_text()[-2000:]}")
        port = int(port_file.read_text())
        httpx.get(f"http://127.0.0.1:{port}/t/0/metrics", timeout=30).raise_for_status()
        yield proc.pid, port


# -- Prometheus ------------------------------------------------------------------------------------
@contextmanager
def prometheus(
    args: argparse.Namespace, tmp: Path, targets: int, exporter_port: int
) -> Iterator[tuple[int, str]]:
    binary = shutil.which("prometheus")
    if binary is None:
        sys.exit("prometheus is not installed (Debian package prometheus)")
    port = free_port()
    groups = [
        {
            "targets": [f"127.0.0.1:{exporter_port}"],
            "labels": {"__metrics_path__": f"/t/{i}/metrics", "instance": f"vllm-{i:04d}"},
        }
        for i in range(targets)
    ]
    timeout = min(args.interval, 10.0)
    config = {
        "global": {"scrape_interval": f"{args.interval:g}s", "scrape_timeout": f"{timeout:g}s"},
        "scrape_configs": [{"job_name": "vllm", "static_configs": groups}],
    }
    cfg = tmp / "prometheus.yml"
    cfg.write_text(yaml.safe_dump(config))
    shutil.rmtree(tmp / "tsdb", ignore_errors=True)  # a kept folder's last run: not its series
    argv = [binary, f"--config.file={cfg}", f"--storage.tsdb.path={tmp / 'tsdb'}"]
    argv += [f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=2h"]
    log = tmp / "prometheus.log"
    url = f"http://127.0.0.1:{port}"
    with started(argv, log) as proc:
        wait_for(f"{url}/-/ready", proc, log)
        yield proc.pid, url


def prom_queries(url: str) -> tuple[float, float]:
    """Query requests Prometheus answered so far, and the seconds it spent on them."""
    text = httpx.get(f"{url}/metrics", timeout=30).text
    count = total = 0.0
    for line in text.splitlines():
        if not line.startswith("prometheus_http_request_duration_seconds_"):
            continue
        if 'handler="/api/v1/query_range"' not in line and 'handler="/api/v1/query"' not in line:
            continue
        name, _, value = line.rpartition(" ")
        if name.startswith("prometheus_http_request_duration_seconds_count"):
            count += float(value)
        elif name.startswith("prometheus_http_request_duration_seconds_sum"):
            total += float(value)
    return count, total


def series_count(url: str) -> float:
    """The series in Prometheus' head block (its own ``/metrics``)."""
    for line in httpx.get(f"{url}/metrics", timeout=30).text.splitlines():
        if line.startswith("prometheus_tsdb_head_series "):
            return float(line.rpartition(" ")[2])
    return math.nan


def up_count(url: str) -> float:
    got = httpx.get(f"{url}/api/v1/query", params={"query": "sum(up)"}, timeout=30).json()
    result = got["data"]["result"]
    return float(result[0]["value"][1]) if result else 0.0


# -- phasewatch ------------------------------------------------------------------------------------
def self_metrics(url: str) -> dict[str, float]:
    text = httpx.get(f"{url}/metrics", timeout=60).text
    out: dict[str, float] = {}
    for line in text.splitlines():
        for name in (
            "phasewatch_scrape_round_duration_seconds_count",
            "phasewatch_scrape_round_duration_seconds_sum",
            "phasewatch_scrape_rounds_missed_total",
        ):
            if line.startswith(name + " "):
                out[name] = float(line.rpartition(" ")[2])
    return out


class Ages:
    """Samples, every second, the age of the newest page stored for a few targets."""

    def __init__(self, db: Path, targets: list[str]) -> None:
        self.db = db
        self.targets = targets
        self.ages: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        con = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=10)
        try:
            while not self.stop.wait(1.0):
                newest = []
                for t in self.targets:
                    row = con.execute(
                        "SELECT MAX(ts) FROM scrapes WHERE target = ?", (t,)
                    ).fetchone()
                    if row and row[0] is not None:
                        newest.append(float(row[0]))
                if newest:
                    self.ages.append(time.time() - min(newest))
        finally:
            con.close()


def quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))] if s else math.nan


def run(args: argparse.Namespace, tmp: Path) -> dict[str, float]:
    targets = max(1, args.streams // args.models)
    with (
        exporting(args, tmp, targets) as (exp_pid, exp_port),
        prometheus(args, tmp, targets, exp_port) as (prom_pid, prom_url),
    ):
        deadline = time.monotonic() + 3 * args.interval + 30
        while up_count(prom_url) < targets and time.monotonic() < deadline:
            time.sleep(1.0)
        port = free_port()
        db = tmp / "pw.db"
        config = {
            "source": {"kind": "prometheus", "url": prom_url, "step": args.interval},
            "scrape": {"interval": args.round or args.interval},
            "storage": {"path": str(db)},
            "server": {"host": "127.0.0.1", "port": port},
            "log": {"level": "WARNING"},
        }
        cfg = tmp / "phasewatch.yaml"
        cfg.write_text(yaml.safe_dump(config))
        log = tmp / "phasewatch.log"
        base = f"http://127.0.0.1:{port}"
        argv = [sys.executable, "-m", "app.cli", "serve", "--config", str(cfg)]
        with started(argv, log, cwd=ROOT) as proc:
            wait_for(f"{base}/healthz", proc, log, timeout=120)
            time.sleep(args.warmup)
            ages = Ages(db, [f"vllm-{i:04d}" for i in range(0, targets, max(1, targets // 8))])
            ages.thread.start()
            m0, q0 = self_metrics(base), prom_queries(prom_url)
            pids = {"pw": proc.pid, "prom": prom_pid, "exp": exp_pid}
            c0 = {k: cpu_seconds(p) for k, p in pids.items()}
            t0 = time.monotonic()
            spy = py_spy(proc.pid, args.duration, args.profile) if args.profile else None
            time.sleep(args.duration)
            wall = time.monotonic() - t0
            if spy is not None:
                spy.wait(timeout=60)
            c1 = {k: cpu_seconds(p) for k, p in pids.items()}
            m1, q1 = self_metrics(base), prom_queries(prom_url)
            ages.stop.set()
            ages.thread.join(10)
            rss, hwm = memory_mb(proc.pid)
            prss, phwm = memory_mb(prom_pid)
            series = series_count(prom_url)
            if proc.poll() is not None:
                sys.exit(f"phasewatch exited:\n{log.read_text()[-3000:]}")
        warnings = [x for x in log.read_text().splitlines() if "WARNING" in x or "ERROR" in x]
        for x in warnings[:5]:
            print(f"phasewatch log: {x[:200]}", file=sys.stderr)

    def d(name: str) -> float:
        return m1.get(name, 0.0) - m0.get(name, 0.0)

    rounds = d("phasewatch_scrape_round_duration_seconds_count")
    return {
        "targets": targets,
        "streams": targets * args.models,
        "prometheus_series": series,
        "queries_per_s": (q1[0] - q0[0]) / wall,
        "query_s_per_round": (q1[1] - q0[1]) / max(rounds, 1),
        "rounds": rounds,
        "expected_rounds": wall / (args.round or args.interval),
        "round_s": d("phasewatch_scrape_round_duration_seconds_sum") / max(rounds, 1),
        "missed_rounds": d("phasewatch_scrape_rounds_missed_total"),
        "evaluation_lag_p50_s": quantile(ages.ages, 0.5),
        "evaluation_lag_p99_s": quantile(ages.ages, 0.99),
        "evaluation_lag_max_s": max(ages.ages, default=math.nan),
        "cpu_core_fraction": (c1["pw"] - c0["pw"]) / wall,
        "rss_mb": rss,
        "peak_rss_mb": hwm,
        "prometheus_cpu_core_fraction": (c1["prom"] - c0["prom"]) / wall,
        "prometheus_rss_mb": prss,
        "prometheus_peak_rss_mb": phwm,
        "exporter_cpu_core_fraction": (c1["exp"] - c0["exp"]) / wall,
        "log_warnings": len(warnings),
    }


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--exporter":
        rec, models, interval, needed, port_file = sys.argv[2:7]
        exporter(Path(rec), int(models), float(interval), int(needed), Path(port_file))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=int, default=1000)
    ap.add_argument("--models", type=int, default=50, help="models on each target's page")
    ap.add_argument("--interval", type=float, default=5.0, help="scrape interval and step, s")
    ap.add_argument(
        "--round",
        type=float,
        help="phasewatch reads every ROUND seconds (scrape.interval; default: --interval), "
        "each read ROUND / step steps",
    )
    ap.add_argument("--warmup", type=float, default=60.0)
    ap.add_argument("--duration", type=float, default=180.0)
    ap.add_argument("--keep", metavar="DIR", help="work in DIR (the recording is reused)")
    ap.add_argument("--profile", metavar="FILE", help="py-spy raw stacks of phasewatch")
    args = ap.parse_args()
    tmp = Path(args.keep or tempfile.mkdtemp(prefix="pw-source-"))
    tmp.mkdir(parents=True, exist_ok=True)
    print(f"load_start: {load()}", flush=True)
    try:
        got = run(args, tmp)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    for k, v in got.items():
        print(f"{k}: {v:.3f}" if isinstance(v, float) else f"{k}: {v}")
    print(f"load_end: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
