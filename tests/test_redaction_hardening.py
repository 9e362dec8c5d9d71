"""Hostile or secret text stays where it belongs: URL passwords never shown, scraped
values never Slack markup, one log record always one line, uvicorn's records redacted."""

from __future__ import annotations

import asyncio
import copy
import io
import json
import logging
import logging.config
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from app.alerts.receivers.alertmanager import alertmanager_alert
from app.alerts.receivers.slack import slack_message
from app.alerts.receivers.webhook import webhook_payload
from app.alerts.state import Alert, AlertState
from app.config import Settings, load_settings
from app.logs import UVICORN_LOGGERS, collect_secrets, setup_logging
from app.main import create_app
from app.redact import redact_url
from app.scrape.client import fetch
from app.service import Service
from tests.realbins import START_TIMEOUT_S, free_port, wait_http
from tests.waiting import wait_for

PASSWORD = "s3cret-pass"
RULES = """
rules:
  - alert: Down
    expr: target_up == 0
    severity: critical
    annotations: {summary: "{{ labels.target }} down ({{ scrape_error_kind }})"}
"""


def closed_port() -> int:
    """A loopback port nothing listens on: a connection is refused at once."""
    return free_port()


@contextmanager
def lifespan(app: FastAPI) -> Iterator[tuple[httpx.AsyncClient, asyncio.AbstractEventLoop]]:
    loop = asyncio.new_event_loop()
    life: AbstractAsyncContextManager[None] = app.router.lifespan_context(app)
    loop.run_until_complete(life.__aenter__())
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")
    try:
        yield http, loop
    finally:
        loop.run_until_complete(http.aclose())
        loop.run_until_complete(life.__aexit__(None, None, None))
        loop.close()


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """setup_logging changes process-wide loggers: put them back after the test."""
    root = logging.getLogger()
    names = (*UVICORN_LOGGERS, "apscheduler", "httpx", "httpcore")
    saved = {
        n: (lg.handlers[:], lg.propagate, lg.level)
        for n, lg in ((n, logging.getLogger(n)) for n in names)
    }
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:], root.level = handlers, level
    for n, (hs, propagate, lvl) in saved.items():
        lg = logging.getLogger(n)
        lg.handlers[:], lg.propagate, lg.level = hs, propagate, lvl


# --- 4. credentials in URLs --------------------------------------------------------------


def test_redact_url_hides_passwords_and_secret_query_values_only() -> None:
    assert redact_url(f"http://user:{PASSWORD}@h:9090/p?a=1") == "http://user:***@h:9090/p?a=1"
    assert redact_url("https://h/x?api_key=k3y&token=t0k&q=up") == (
        "https://h/x?api_key=***&token=***&q=up"
    )
    assert redact_url("http://u:p@ss@h/m") == "http://u:***@h/m"  # an unencoded @ in it
    text = f"GET http://a:{PASSWORD}@h1/x failed; retry http://b:{PASSWORD}@h2/y"
    assert PASSWORD not in redact_url(text) and redact_url(text).count(":***@") == 2
    for unchanged in ("http://h:8080/metrics", "http://user@h/x", "file:///tmp/p.prom"):
        assert redact_url(unchanged) == unchanged


def test_target_url_password_is_hidden_in_the_targets_api_and_the_alerts(
    tmp_path: Path,
) -> None:
    port = closed_port()
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    settings = load_settings(
        None,
        {
            "targets": [{"name": "a", "url": f"http://user:{PASSWORD}@127.0.0.1:{port}/metrics"}],
            "storage": {"path": str(tmp_path / "pw.db")},
            "alerts": {
                "default_rules": False,
                "rules_file": str(rules),
                "receivers": {
                    "webhook": ["http://127.0.0.1:9/hook"],
                    "slack": ["http://127.0.0.1:9/slack"],
                    "alertmanager": ["http://127.0.0.1:9"],
                },
            },
        },
    )
    app = create_app(settings, start_jobs=False)
    with lifespan(app) as (http, loop):
        svc: Service = app.state.service
        loop.run_until_complete(svc.source.read_round(time.time()))  # refused: the target is down
        svc.evaluate_alerts(time.time())
        targets = loop.run_until_complete(http.get("/api/v1/targets")).json()
        alerts = loop.run_until_complete(http.get("/api/v1/alerts")).text
        bodies = [r.payload for r in svc.alerting.outbox.undelivered()]
    (target,) = targets
    assert target["url"] == f"http://user:***@127.0.0.1:{port}/metrics"
    assert target["last_error_kind"] == "refused"
    assert PASSWORD not in json.dumps(targets)
    assert len(bodies) == 3 and "Down" in alerts  # fired, one body per receiver
    assert all(PASSWORD not in text for text in [alerts, *bodies])


def test_prometheus_source_password_is_hidden_in_the_ui_header_and_failed_read_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"http://user:{PASSWORD}@127.0.0.1:{closed_port()}"
    settings = load_settings(
        None,
        {
            "source": {"kind": "prometheus", "url": url, "timeout": 5},
            "storage": {"path": str(tmp_path / "pw.db")},
            "alerts": {"enabled": False},
        },
    )
    app = create_app(settings, start_jobs=False)
    with lifespan(app) as (http, loop):
        svc: Service = app.state.service
        layout = loop.run_until_complete(http.get("/ui/_dash-layout")).text
        with caplog.at_level(logging.WARNING):
            loop.run_until_complete(svc.source.read_round(time.time()))
        last_error = str(getattr(svc.source, "last_error", ""))
    assert "user:***@127.0.0.1" in layout and PASSWORD not in layout
    logged = [r.getMessage() for r in caplog.records if "reading Prometheus" in r.getMessage()]
    assert logged and "user:***@" in logged[0]
    assert PASSWORD not in "\n".join(logged) and PASSWORD not in last_error


def test_scrape_error_text_never_carries_the_url_password() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadError(f"connection to {request.url} broke")

    async def go() -> str | None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(refuse)) as client:
            url = f"http://user:{PASSWORD}@h/metrics"
            return (await fetch(client, url, timeout=2, max_bytes=1000)).error

    error = asyncio.run(go())
    assert error is not None and "user:***@h" in error and PASSWORD not in error


def test_log_filter_scrubs_configured_url_passwords_from_any_line(
    restore_logging: None,
) -> None:
    settings: Settings = load_settings(
        None,
        {
            "targets": [{"name": "a", "url": f"http://user:{PASSWORD}@h/metrics"}],
            "source": {"url": "http://prom:x-key-123456@p:9090"},
        },
    )
    secrets = collect_secrets(settings.model_dump())
    assert {PASSWORD, "x-key-123456"} <= secrets
    out = io.StringIO()
    setup_logging("INFO", json_lines=False, secrets=secrets, stream=out)
    log = logging.getLogger("test.redaction")
    log.warning("the password alone: %s", PASSWORD)
    log.warning("a URL: %s", f"http://other:{PASSWORD}-2@h/")
    try:
        raise RuntimeError("auth failed for x-key-123456 at http://u:pw-zz@h/")
    except RuntimeError:
        log.exception("read failed")
    text = out.getvalue()
    assert PASSWORD not in text and "x-key-123456" not in text and "pw-zz" not in text
    assert text.count("[redacted]") >= 2 and text.count(":***@") >= 2


# --- 5. Slack injection ------------------------------------------------------------------

HOSTILE = "<!channel> <https://evil.example|Open in phasewatch>"
UI_URL = "http://ui/targets/a?model=x&at=1"
HOSTILE_ALERT = Alert(
    fingerprint="0123456789abcdef",
    rule="PhasewatchKVCachePressure",
    labels={
        "alertname": "PhasewatchKVCachePressure",
        "severity": "critical",
        "target": "a",
        "model_name": HOSTILE,
        "team": "<!here>",
    },
    annotations={
        "summary": f"KV full on {HOSTILE}",
        "diagnosis": f"kv_pressure: {HOSTILE} & more",
        "hints": f"- lower --max-num-seqs for {HOSTILE}",
        "ui_url": UI_URL,
    },
    state=AlertState.FIRING,
    active_at=1764403200.0,
    last_eval=1764403320.0,
    fired_at=1764403320.0,
)


def test_slack_text_escapes_scraped_mentions_and_links_but_keeps_its_own_link() -> None:
    msg = slack_message(HOSTILE_ALERT, "firing")
    text, fallback = msg["text"], msg["attachments"][0]["fallback"]
    for shown in (text, fallback):
        assert "<!channel>" not in shown and "<https://evil" not in shown
        assert "&lt;!channel&gt; &lt;https://evil.example|Open in phasewatch&gt;" in shown
    assert "kv_pressure: &lt;!channel&gt;" in text and "&amp; more" in text
    # The one real link: phasewatch's own, its & written as Slack asks.
    assert re.findall(r"<[^<>]*>", text) == [
        "<http://ui/targets/a?model=x&amp;at=1|Open in phasewatch>"
    ]


def test_json_receivers_carry_scraped_values_as_data_and_link_only_the_ui_url() -> None:
    am = alertmanager_alert(HOSTILE_ALERT, "firing")
    hook = webhook_payload(HOSTILE_ALERT, "firing", external_url="http://ui")
    assert json.loads(json.dumps(am))["labels"]["model_name"] == HOSTILE
    assert am["generatorURL"] == UI_URL and hook["alerts"][0]["generatorURL"] == UI_URL
    assert hook["groupKey"].count(HOSTILE) == 0  # built from the rule name and fingerprint


# --- 11. log forging ---------------------------------------------------------------------


def test_control_characters_in_a_plain_text_record_stay_on_its_one_line(
    restore_logging: None,
) -> None:
    out = io.StringIO()
    setup_logging("INFO", json_lines=False, stream=out)
    log = logging.getLogger("test.forging")
    forged = "llama\n2026-01-01 00:00:00,000 ERROR app.alerts all targets down\r\x1b[2J\x85"
    log.warning("new model %s", forged)
    log.warning(f"formatted {forged}\u2028")
    try:
        raise ValueError(f"bad label {forged}")
    except ValueError:
        log.exception("scrape of %s failed", forged)
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    assert all(" WARNING test.forging " in line or " ERROR " in line for line in lines)
    assert "llama\\n2026-01-01" in lines[0] and "\\r\\x1b[2J\\x85" in lines[0]
    assert "\\u2028" in lines[1]
    assert "Traceback (most recent call last):\\n" in lines[2]


def test_json_lines_escape_c1_controls_and_line_separators(restore_logging: None) -> None:
    out = io.StringIO()
    setup_logging("INFO", json_lines=True, stream=out)
    logging.getLogger("test.forging").warning("a\x85b\u2028c\nd")
    (line,) = out.getvalue().splitlines()
    assert json.loads(line)["msg"] == "a\x85b\u2028c\nd"


# --- 12. uvicorn's loggers ---------------------------------------------------------------


def test_uvicorn_tracebacks_become_one_redacted_json_line(restore_logging: None) -> None:
    from uvicorn.config import LOGGING_CONFIG

    # As uvicorn leaves its loggers when it configured them: own handlers, no propagation.
    logging.config.dictConfig(copy.deepcopy(LOGGING_CONFIG))
    out = io.StringIO()
    setup_logging("INFO", json_lines=True, secrets={"tok-123456"}, stream=out)
    try:
        raise RuntimeError("upstream said: Bearer tok-123456\nsecond line")
    except RuntimeError:
        logging.getLogger("uvicorn.error").exception("Exception in ASGI application")
    logging.getLogger("uvicorn.access").warning("127.0.0.1 - GET /?token=tok-abcdef 500")
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    error, access = (json.loads(line) for line in lines)
    assert error["logger"] == "uvicorn.error" and "RuntimeError" in error["exc"]
    assert "tok-123456" not in lines[0] and "[redacted]" in error["exc"]
    assert access["logger"] == "uvicorn.access" and "token=***" in access["msg"]


def test_serve_writes_uvicorn_records_as_json_lines(tmp_path: Path) -> None:
    port = free_port()
    config = tmp_path / "phasewatch.yaml"
    config.write_text(
        f"""
targets: [{{name: a, url: "http://user:{PASSWORD}@127.0.0.1:{closed_port()}/metrics"}}]
storage: {{path: "{tmp_path / "pw.db"}"}}
server: {{port: {port}}}
log: {{json_lines: true}}
alerts: {{enabled: false}}
"""
    )
    log = tmp_path / "serve.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "app.cli", "serve", "--config", str(config)]
    with log.open("ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", timeout=START_TIMEOUT_S)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")
            sock.recv(1024)  # uvicorn answers 400 and logs a warning
        wait_for(lambda: "Invalid HTTP request" in log.read_text(), what="uvicorn's warning")
    finally:
        proc.terminate()
        proc.wait(20)
    lines = [line for line in log.read_text().splitlines() if "Invalid HTTP request" in line]
    (record,) = (json.loads(line) for line in lines)
    assert record["logger"] == "uvicorn.error" and record["level"] == "warning"
    assert PASSWORD not in log.read_text()
