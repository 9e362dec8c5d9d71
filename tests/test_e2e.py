"""End to end: a loopback vLLM page that changes per scrape → the service → the JSON API."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
import uvicorn

from app.config import load_settings
from app.main import create_app
from tests.pages import page
from tests.waiting import wait_for


class PageServer:
    """Serves ``page(n)`` with n growing by one per request; other paths misbehave."""

    def __init__(self) -> None:
        self.n = 0
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/metrics":
                    with outer.lock:
                        outer.n += 1
                        body = page(outer.n).encode()
                    ctype = "text/plain; version=0.0.4; charset=utf-8"
                elif self.path == "/html":
                    body, ctype = b"<html><body>502 Bad Gateway</body></html>", "text/html"
                else:
                    body, ctype = b"\x00\x01\x02binary\xff" * 50, "application/octet-stream"
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class ServiceThread:
    """Runs the real app under uvicorn on a free loopback port in a thread."""

    def __init__(self, app: object) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")  # type: ignore[arg-type]
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        wait_for(lambda: self.server.started, 60, "the service started", every=0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def vllm() -> Iterator[PageServer]:
    srv = PageServer()
    yield srv
    srv.close()


def wait_rounds(base_url: str, n: int = 3, timeout: float = 60.0) -> None:
    """Wait until the service has finished ``n`` more alert evaluations and ``n`` more
    outbox send rounds: what "nothing more happens" checks wait on, instead of a sleep
    that a busy machine can outrun."""

    def rounds() -> tuple[int, int]:
        body = httpx.get(base_url + "/healthz", timeout=10).json()
        return int(body["evaluations"]), int(body["send_rounds"])

    ev0, send0 = rounds()

    def done() -> bool:
        ev, send = rounds()
        return ev >= ev0 + n and send >= send0 + n

    wait_for(done, timeout=timeout)


def test_service_scrapes_and_api_returns_hand_computed_quantiles(
    vllm: PageServer, tmp_path: Path
) -> None:
    settings = load_settings(
        None,
        {
            "targets": [
                {"name": "good", "url": vllm.url + "/metrics"},
                {"name": "html", "url": vllm.url + "/html"},
                {"name": "junk", "url": vllm.url + "/junk"},
                {"name": "dead", "url": "http://127.0.0.1:9/metrics"},
            ],
            "scrape": {"interval": 0.25, "timeout": 5.0},
            "storage": {"path": str(tmp_path / "pw.db")},
        },
    )
    t0 = time.time()
    svc = ServiceThread(create_app(settings))
    try:
        wait_for(lambda: vllm.n >= 6)
        base = svc.url

        def every_target_scraped() -> bool:
            rows = httpx.get(base + "/api/v1/targets").json()
            return all(t["last_scrape"] is not None for t in rows) and any(
                t["name"] == "good" and t["up"] for t in rows
            )

        wait_for(every_target_scraped)
        targets = {t["name"]: t for t in httpx.get(base + "/api/v1/targets").json()}
        assert targets["good"]["up"] is True and targets["good"]["last_error"] is None
        assert targets["html"]["up"] is False
        assert targets["html"]["last_error_kind"] == "not_prometheus"
        assert targets["junk"]["last_error_kind"] == "not_prometheus"
        assert targets["dead"]["last_error_kind"] in ("refused", "connect")
        assert isinstance(targets["good"]["last_scrape"], float)

        end = time.time()
        windows = httpx.get(
            base + "/api/v1/windows",
            params={"target": "good", "start": t0, "end": end, "window": end - t0 + 1, "step": 1},
        ).json()
        assert windows, "no windows"
        w = windows[-1]
        assert w["model_name"] == "llama"
        # Every interval adds the same increments, so any window's quantiles equal the
        # quantiles of one step's buckets. TTFT: 10 obs; p50 rank 5 in (0, 0.1] holding 6
        # → 0.1·5/6; p90 rank 9 in (0.1, 0.5] holding 3 → 0.5; p99 rank 9.9 in (0.5, 1] → 0.95.
        assert w["ttft_p50"] == pytest.approx(0.1 * 5 / 6, rel=1e-12)
        assert w["ttft_p90"] == pytest.approx(0.5, rel=1e-12)
        assert w["ttft_p99"] == pytest.approx(0.95, rel=1e-12)
        assert w["ttft_mean"] == pytest.approx(0.3, rel=1e-12)
        # ITL: 100 obs; p50 rank 50 = top of (0.01, 0.025]; p90 rank 90 = top of
        # (0.025, 0.05]; p99 rank 99 > 98 falls in +Inf → highest finite bound, flagged.
        assert w["itl_p50"] == pytest.approx(0.025, rel=1e-12)
        assert w["itl_p90"] == pytest.approx(0.05, rel=1e-12)
        assert w["itl_p99"] == pytest.approx(0.1, rel=1e-12)
        assert "itl_p99" in w["ge_top_bucket"] and "ttft_p99" not in w["ge_top_bucket"]
        assert w["running_avg"] == 4 and w["waiting_max"] == 1 and w["kv_max"] == 0.5
        # every interval adds 1000 prompt tokens; the rate is over the covered seconds
        assert w["prompt_tokens_per_s"] == pytest.approx(
            1000 * w["intervals"] / w["covered_s"], rel=1e-9
        )
        assert w["reset"] is False
        assert "tpot" in w["missing"]

        health = httpx.get(base + "/healthz").json()
        assert health["status"] == "ok" and health["targets"] == 4
        metrics = httpx.get(base + "/metrics").text
        assert 'phasewatch_scrapes_total{outcome="ok",target="good"}' in metrics
        assert 'outcome="not_prometheus"' in metrics
        assert httpx.get(base + "/docs").status_code == 200
        bad = httpx.get(base + "/api/v1/windows", params={"target": "nope"})
        assert bad.status_code == 404
    finally:
        svc.close()
