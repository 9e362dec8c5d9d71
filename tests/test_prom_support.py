"""Helpers for the tests that run a real Prometheus (no tests here).

* :func:`prometheus` — start ``/usr/bin/prometheus`` on a free loopback port with a given
  configuration and data directory; stop it afterwards.
* :class:`Lockstep` — a simulated vLLM whose clock advances a fixed number of sim seconds
  per page served to Prometheus, keeping every page, so another client can fetch
  exactly the bytes Prometheus scraped (``/page/{k}``).
* :func:`backfill` — turn a simulator recording into OpenMetrics with timestamps and
  load it into a TSDB with ``promtool tsdb create-blocks-from openmetrics``.
"""

from __future__ import annotations

import re
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from app.sim.exposition import CONTENT_TYPE
from app.sim.scenario import load
from app.sim.server import Fleet
from tests.realbins import free_port, require_binary, running


@contextmanager
def prometheus(
    tmp: Path,
    *,
    scrape: list[dict[str, Any]] | None = None,
    interval: str = "500ms",
    data: Path | None = None,
    rule_files: list[str] | None = None,
) -> Iterator[str]:
    """Run Prometheus on 127.0.0.1; yields its base URL."""
    binary = require_binary("prometheus")
    port = free_port()
    config: dict[str, Any] = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "scrape_configs": scrape or [],
    }
    if rule_files:
        config["rule_files"] = rule_files
    cfg = tmp / "prometheus.yml"
    cfg.write_text(yaml.safe_dump(config))
    url = f"http://127.0.0.1:{port}"
    cmd = [
        binary,
        f"--config.file={cfg}",
        f"--storage.tsdb.path={data or tmp / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--storage.tsdb.retention.time=30d",
    ]
    with running(cmd, log=tmp / "prometheus.log", ready_url=f"{url}/-/ready"):
        yield url


class Lockstep:
    """One simulated replica served in lockstep with Prometheus' scrapes.

    The ``k``-th request to ``/prometheus`` renders the page at sim time ``t0 + k*dt``
    and keeps it; after ``pages`` pages it answers 503 (Prometheus records ``up == 0``
    and marks the series stale). ``/page/{k}`` serves page ``k`` again, byte for byte.
    """

    def __init__(self, scenario: str, *, seed: int, t0: float, dt: float, pages: int) -> None:
        self._now = 0.0
        self.fleet = Fleet(load(scenario), seed=seed, speed=1.0, clock=lambda: self._now)
        self.t0, self.dt, self.limit = t0, dt, pages
        self.pages: list[bytes] = []
        self.lock = threading.Lock()
        self._now = t0
        self.fleet.page(0)  # simulate up to t0 now, not inside Prometheus' scrape timeout
        self.done = threading.Event()

    def next_page(self) -> bytes | None:
        with self.lock:
            k = len(self.pages)
            if k >= self.limit:
                self.done.set()
                return None
            self._now = self.t0 + k * self.dt
            page = self.fleet.page(0)
            self.pages.append(page)
            return page

    @contextmanager
    def serve(self) -> Iterator[str]:
        """Serve on a free loopback port; yields ``host:port``."""
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                body: bytes | None
                if self.path == "/prometheus":
                    body = owner.next_page()
                else:
                    m = re.fullmatch(r"/page/(\d+)", self.path)
                    k = int(m.group(1)) if m else -1
                    body = owner.pages[k] if 0 <= k < len(owner.pages) else None
                if body is None:
                    self.send_response(503)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            server.server_close()


def to_openmetrics(
    recording: Path, out: Path, *, labels: dict[str, str], spelling: str = "vllm:"
) -> int:
    """A recording folder (``<unix>.prom`` pages) → one OpenMetrics file with timestamps.

    Extra ``labels`` are added to every series (what Prometheus adds when it scrapes:
    ``instance``, ``job``); ``spelling="vllm_"`` (or ``"sglang_"``) stores the names as
    an OpenMetrics scrape by prometheus-client ≥ 0.23 would. Returns the number of samples.
    """
    extra = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    rows: list[tuple[str, float, str]] = []
    for page in sorted(recording.glob("*.prom")):
        ts = float(page.name[: -len(".prom")])
        for line in page.read_text().splitlines():
            if not line or line.startswith("#"):
                continue
            series, value = line.rsplit(" ", 1)
            name, _, rest = series.partition("{")
            if name.endswith("_created"):
                continue
            if spelling.endswith("_") and name.startswith(spelling[:-1] + ":"):
                name = spelling + name[len(spelling) :]
            body = rest[:-1] if rest else ""
            series = name + "{" + ",".join(x for x in (body, extra) if x) + "}"
            rows.append((series, ts, value))
    rows.sort()
    with out.open("w") as f:
        for series, ts, value in rows:
            f.write(f"{series} {value} {ts:.3f}\n")
        f.write("# EOF\n")
    return len(rows)


def backfill(openmetrics: Path, data: Path) -> None:
    """Write TSDB blocks for an OpenMetrics file into ``data`` (promtool)."""
    promtool = require_binary("promtool")
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(openmetrics), str(data)],
        check=True,
        capture_output=True,
        timeout=120,
    )
