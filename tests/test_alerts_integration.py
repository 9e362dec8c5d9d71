"""Alerting against real components: a real Alertmanager receives, shows and resolves a
phasewatch alert (and forwards it to a webhook, whose body we compare with ours); a
``phasewatch serve`` killed with SIGKILL while its receiver is down delivers after a
restart, exactly once."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.alerts.receivers.webhook import webhook_payload
from app.alerts.state import fingerprint
from app.config import Settings, load_settings
from app.service import Service
from tests.pages import page
from tests.realbins import START_TIMEOUT_S, free_port, require_binary, running, wait_http
from tests.test_e2e import wait_rounds
from tests.waiting import wait_for

RULES = """
rules:
  - alert: PhasewatchTestDown
    expr: target_up == 0
    severity: critical
    value: scrape_error_kind
    annotations:
      summary: "{{ labels.target }} does not answer ({{ value }})"
      ui_url: "{{ ui_url }}"
"""


class Sink:
    """A loopback HTTP receiver on a given port: records JSON bodies POSTed to it; can
    also serve a vLLM page on GET /metrics."""

    def __init__(self, port: int = 0) -> None:
        self.bodies: list[Any] = []
        self.n = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                outer.bodies.append(json.loads(self.rfile.read(length)))
                self.send_response(200)
                self.end_headers()

            def do_GET(self) -> None:
                outer.n += 1
                body = page(outer.n).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[tuple[str, Sink]]:
    """A real Alertmanager on a free loopback port that forwards to a webhook sink."""
    binary = require_binary("prometheus-alertmanager")
    sink = Sink()
    config = tmp_path / "alertmanager.yml"
    config.write_text(
        "route:\n  receiver: hook\n  group_wait: 1s\n  group_interval: 1s\n"
        f"receivers:\n  - name: hook\n    webhook_configs:\n      - url: {sink.url}/am\n"
        "        send_resolved: true\n"
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [
        binary,
        f"--config.file={config}",
        f"--storage.path={tmp_path / 'am-data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--cluster.listen-address=",
    ]
    try:
        with running(cmd, log=tmp_path / "alertmanager.log", ready_url=url + "/-/ready"):
            yield url, sink
    finally:
        sink.close()


def settings_for(tmp_path: Path, target_port: int, receivers: dict[str, list[str]]) -> Settings:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    return load_settings(
        None,
        {
            "targets": [{"name": "llama-a", "url": f"http://127.0.0.1:{target_port}/metrics"}],
            "scrape": {"interval": 1.0, "timeout": 1.0},
            "storage": {"path": str(tmp_path / "pw.db")},
            "alerts": {
                "default_rules": False,
                "rules_file": str(rules),
                "receivers": receivers,
            },
        },
    )


def test_real_alertmanager_receives_shows_and_resolves_the_alert(
    alertmanager: tuple[str, Sink], tmp_path: Path
) -> None:
    am_url, hook = alertmanager
    target_port = free_port()
    service = Service(settings_for(tmp_path, target_port, {"alertmanager": [am_url]}))

    async def round_trip() -> None:
        await service.scrape_job()
        await asyncio.to_thread(service.evaluate_alerts, time.time())
        assert await service.alerting.sender.run_once() == 1

    async def flow() -> tuple[list[Any], list[Any]]:
        try:
            await round_trip()  # the target refuses: the alert fires
            async with httpx.AsyncClient() as http:
                shown = (await http.get(am_url + "/api/v2/alerts")).json()
                # Alertmanager notifies its own receiver after group_wait.
                await asyncio.to_thread(wait_for, lambda: hook.bodies, 20.0, "AM webhook")
                target = Sink(target_port)  # the target comes back
                try:
                    await round_trip()
                finally:
                    target.close()
                after = (await http.get(am_url + "/api/v2/alerts")).json()
            return shown, after
        finally:
            await service.stop()

    shown, after = asyncio.run(flow())
    (alert,) = shown
    labels = {"alertname": "PhasewatchTestDown", "severity": "critical", "target": "llama-a"}
    assert alert["labels"] == labels
    assert alert["status"]["state"] == "active"
    assert alert["annotations"]["summary"] in (
        "llama-a does not answer (refused)",
        "llama-a does not answer (connect)",
    )
    assert alert["generatorURL"].startswith("http://127.0.0.1:8321/ui/targets/llama-a?at=")
    assert alert["fingerprint"] == fingerprint(labels)  # our fingerprint is Alertmanager's
    assert after == []  # resolved with endsAt: no longer active
    # Alertmanager forwarded firing then resolved to its webhook; our own webhook body
    # has every field its body has.
    wait_for(lambda: [b["status"] for b in hook.bodies][-1:] == ["resolved"], what="AM webhook")
    am_body = hook.bodies[0]
    assert am_body["status"] == "firing" and am_body["alerts"][0]["labels"] == labels
    engine = service.alerting.engine
    ours = webhook_payload(next(iter(engine.alerts.values())), "firing", external_url="x")
    assert set(am_body) <= set(ours)
    assert set(am_body["alerts"][0]) <= set(ours["alerts"][0])


def _serve(config: Path, log: Path) -> subprocess.Popen[bytes]:
    out = log.open("ab")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "app.cli", "serve", "--config", str(config)]
    return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)


def test_sigkill_with_undelivered_notifications_delivers_after_restart(tmp_path: Path) -> None:
    hook_port, target_port, api_port = free_port(), free_port(), free_port()
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    secret_path = "/hook/T000-SECRET-KEY"
    config = tmp_path / "phasewatch.yaml"
    config.write_text(
        f"""
targets:
  - {{name: llama-a, url: "http://127.0.0.1:{target_port}/metrics"}}
scrape: {{interval: 0.5, timeout: 0.5}}
storage: {{path: "{tmp_path / "pw.db"}"}}
server: {{port: {api_port}}}
alerts:
  default_rules: false
  rules_file: "{rules}"
  evaluation_interval: 0.5
  send_interval: 0.2
  retry_initial: 0.2
  retry_max: 1
  receivers:
    webhook: ["http://127.0.0.1:{hook_port}{secret_path}"]
"""
    )
    api = f"http://127.0.0.1:{api_port}/api/v1"
    log = tmp_path / "serve.log"

    def outbox() -> dict[str, Any]:
        rows: dict[str, Any] = httpx.get(api + "/alerts/outbox", timeout=2).json()["rows"]
        return rows

    first = _serve(config, log)
    try:
        wait_http(f"http://127.0.0.1:{api_port}/healthz", timeout=START_TIMEOUT_S)
        # The alert fires; its notification is written and fails (receiver down).
        wait_for(lambda: any(r.get("pending") for r in outbox().values()), what="a pending row")
        wait_for(lambda: "failed" in log.read_text(), what="a failed attempt")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    assert first.returncode == -signal.SIGKILL

    hook = Sink(hook_port)  # the receiver is back
    second = _serve(config, log)
    try:
        wait_http(f"http://127.0.0.1:{api_port}/healthz", timeout=START_TIMEOUT_S)
        wait_for(lambda: hook.bodies, what="delivery after restart")
        wait_rounds(f"http://127.0.0.1:{api_port}")  # nothing is sent twice
        history = httpx.get(api + "/alerts/history").json()
        counts = outbox()
    finally:
        second.terminate()
        second.wait(10)
        hook.close()
    (body,) = hook.bodies
    assert body["version"] == "4" and body["status"] == "firing"
    assert body["alerts"][0]["labels"]["alertname"] == "PhasewatchTestDown"
    # The restart resumed the firing alert: no second "firing" transition.
    assert [h["state"] for h in history] == ["firing"]
    assert list(counts.values()) == [{"sent": 1}]
    assert secret_path not in log.read_text()  # webhook URLs are never logged
