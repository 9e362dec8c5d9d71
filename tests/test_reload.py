"""Reloading the configuration: SIGHUP and ``POST /-/reload``, as Prometheus does.

A real ``phasewatch serve`` process scrapes the simulator; its file is broken, fixed,
and changed in what only a restart can change, and the process told each time. An
in-process service shows that changed rules apply from the next round while the other
alerts keep their state.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from app.cli.config import load_config
from app.config import load_settings
from app.main import create_app
from app.reload import restart_needed
from app.sim.server import start_server
from tests.test_e2e import ServiceThread
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "reload-token-0123456789"


def test_what_only_a_restart_can_change_is_named_and_the_rest_is_not() -> None:
    running = load_settings(None, {"ui_base_url": "http://pw/ui"})
    same = load_settings(
        None,
        {
            "ui_base_url": "http://pw/ui",
            "targets": [{"name": "a", "url": "http://127.0.0.1:1/metrics"}],
            "scrape": {"interval": 1},
            "slo": {"ttft_p99": 9},
            "log": {"level": "DEBUG"},
            "storage": {"retention_days": 1},
        },
    )
    assert restart_needed(running, same, hostname="h") == []
    moved = load_settings(
        None,
        {
            "server": {"port": 9999},
            "storage": {"path": "elsewhere.db"},
            "api_token": "t" * 12,
            "source": {"kind": "prometheus", "url": "http://prom:9090"},
            "ui_base_url": "http://other/ui",
        },
    )
    assert restart_needed(running, moved, hostname="h") == [
        "server",
        "storage.path",
        "api_token",
        "source",
        "ui_base_url",
    ]


@pytest.fixture(scope="module")
def sim() -> Iterator[str]:
    server, _, base = start_server("healthy", replicas=3)
    try:
        yield base
    finally:
        server.shutdown()
        server.server_close()


class Serve:
    """``phasewatch serve --config FILE`` in a process of its own, on a free port."""

    def __init__(self, config: Path) -> None:
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--config", str(config)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        threading.Thread(target=self._read, daemon=True).start()
        wait_for(lambda: self.proc.poll() is not None or any("API on" in x for x in self.lines))
        found = next(
            (re.search(r"http://[\d.]+:\d+", x) for x in self.lines if "API on" in x), None
        )
        assert found, "".join(self.lines)
        self.url = found.group(0)
        wait_for(self._answers)  # the address is printed just before uvicorn listens

    def _answers(self) -> bool:
        try:
            return httpx.get(self.url + "/healthz", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def hup(self) -> None:
        os.kill(self.proc.pid, signal.SIGHUP)

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


def write(path: Path, base: str, replicas: list[int], **extra: Any) -> None:
    config = {
        "targets": [{"name": f"r{i}", "url": f"{base}/replica/{i}/metrics"} for i in replicas],
        "scrape": {"interval": 0.5, "timeout": 2.0},
        "storage": {"path": str(path.parent / "pw.db")},
        "server": {"host": "127.0.0.1", "port": 0},
        "api_token": TOKEN,
        **extra,
    }
    staged = path.with_suffix(".tmp")
    staged.write_text(yaml.safe_dump(config))
    os.replace(staged, path)


def up(url: str) -> set[str]:
    rows = httpx.get(url + "/api/v1/targets", timeout=10).json()
    return {t["name"] for t in rows if t["up"]}


def last_reload_ok(url: str) -> float | None:
    text = httpx.get(url + "/metrics", timeout=10).text
    found = re.search(r"^phasewatch_config_last_reload_successful (\S+)$", text, re.M)
    return None if found is None else float(found.group(1))


def test_sighup_with_a_broken_config_keeps_the_old_one_and_a_good_one_applies(
    sim: str, tmp_path: Path
) -> None:
    config = tmp_path / "phasewatch.yaml"
    write(config, sim, [0])
    svc = Serve(config)
    components = svc.url + "/api/v1/health/components"
    try:
        wait_for(lambda: up(svc.url) == {"r0"})
        assert last_reload_ok(svc.url) == 1.0

        write(config, sim, [0, 1], scrape={"interval": -1})
        svc.hup()
        wait_for(lambda: last_reload_ok(svc.url) == 0.0)
        body = httpx.get(components, timeout=10).json()
        assert body["status"] == "degraded"
        assert body["config"]["successful"] is False and body["config"]["trigger"] == "SIGHUP"
        assert "scrape.interval" in body["config"]["error"]
        rounds = httpx.get(svc.url + "/healthz", timeout=10).json()["rounds"]
        wait_for(lambda: httpx.get(svc.url + "/healthz", timeout=10).json()["rounds"] > rounds + 2)
        assert up(svc.url) == {"r0"}  # the old configuration still runs: r1 is not added

        write(config, sim, [0, 1], log={"level": "DEBUG"})
        svc.hup()
        wait_for(lambda: up(svc.url) == {"r0", "r1"})
        wait_for(lambda: last_reload_ok(svc.url) == 1.0)
        assert httpx.get(components, timeout=10).json()["status"] == "ok"
        assert any("config reloaded (SIGHUP)" in line for line in svc.lines)
        assert any("config reload (SIGHUP) refused" in line for line in svc.lines)
    finally:
        svc.close()


def test_post_reload_needs_the_token_and_refuses_what_needs_a_restart(
    sim: str, tmp_path: Path
) -> None:
    config = tmp_path / "phasewatch.yaml"
    write(config, sim, [2])
    svc = Serve(config)
    reload = svc.url + "/-/reload"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        wait_for(lambda: up(svc.url) == {"r2"})
        assert httpx.post(reload, timeout=10).status_code == 401
        assert httpx.post(reload, headers={"Authorization": "Bearer nope"}).status_code == 401

        write(config, sim, [2], storage={"path": str(tmp_path / "other.db")})
        refused = httpx.post(reload, headers=auth, timeout=30)
        assert refused.status_code == 422
        assert "restart is needed to change storage.path" in refused.json()["message"]
        assert last_reload_ok(svc.url) == 0.0

        rules = tmp_path / "rules.yaml"
        rules.write_text("rules:\n  - alert: X\n    expr: kv_mx > 1\n")
        write(config, sim, [2], alerts={"rules_file": str(rules)})
        refused = httpx.post(reload, headers=auth, timeout=30)
        assert refused.status_code == 422 and "kv_mx" in refused.json()["message"]

        write(config, sim, [2], slo={"ttft_p99": 5.0})
        done = httpx.post(reload, headers=auth, timeout=30)
        assert done.status_code == 200, done.text
        assert done.json()["status"] == "success" and done.json()["changed"] == ["slo"]
        assert last_reload_ok(svc.url) == 1.0
    finally:
        svc.close()


def test_changed_rules_apply_from_the_next_round_and_other_alerts_keep_their_state(
    sim: str, tmp_path: Path
) -> None:
    rules = tmp_path / "rules.yaml"

    def rules_named(*names: str) -> None:
        rules.write_text(
            "rules:\n"
            + "".join(
                f"  - alert: {n}\n    expr: target_up == 1\n    severity: info\n" for n in names
            )
        )

    rules_named("Kept", "Dropped")
    config = tmp_path / "phasewatch.yaml"
    settings_file: dict[str, Any] = {
        "targets": [{"name": "r0", "url": f"{sim}/replica/0/metrics"}],
        # A timeout far past a loopback answer: Kept must not flap on a slow scrape (a busy
        # machine), or its activeAt is a new one for a reason this test is not about.
        "scrape": {"interval": 0.25, "timeout": 10.0},
        "storage": {"path": str(tmp_path / "pw.db")},
        "alerts": {"evaluation_interval": 0.25, "default_rules": False, "rules_file": str(rules)},
        "api_token": TOKEN,
    }
    config.write_text(yaml.safe_dump(settings_file))
    settings = load_config(config)
    app = create_app(settings, reload_config=lambda: load_config(config))
    svc = ServiceThread(app)

    def alerts() -> dict[str, dict[str, Any]]:
        rows = httpx.get(svc.url + "/api/v1/alerts", params={"include_resolved": True}, timeout=10)
        return {a["alertname"]: a for a in rows.json()}

    try:
        wait_for(
            lambda: (
                {n for n, a in alerts().items() if a["state"] == "firing"} == {"Kept", "Dropped"}
            )
        )
        kept_since = alerts()["Kept"]["activeAt"]
        rules_named("Kept", "Added")
        settings_file["slo"] = {"ttft_p99": 3.5}
        settings_file["scrape"]["interval"] = 0.5
        config.write_text(yaml.safe_dump(settings_file))
        done = httpx.post(
            svc.url + "/-/reload", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
        )
        assert done.status_code == 200, done.text
        # The rule file keeps its name: its rules are read again all the same.
        assert set(done.json()["changed"]) == {"scrape", "slo", "rules"}
        wait_for(lambda: alerts().get("Added", {}).get("state") == "firing")
        wait_for(lambda: alerts()["Dropped"]["state"] == "inactive")
        assert alerts()["Kept"]["state"] == "firing"
        assert alerts()["Kept"]["activeAt"] == kept_since
        service = app.state.service
        assert service.diagnosis_config.slo_ttft_p99 == 3.5
        assert service.scheduler.get_job("scrape").trigger.interval.total_seconds() == 0.5
    finally:
        svc.close()
