"""The command line: one package, scrape-once output, clear config errors with exit 2."""

from __future__ import annotations

import argparse
import ast
import contextlib
import http.server
import json
import re
import socket
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.cli import COMMANDS, main
from tests.fixtures_path import FIXTURES
from tests.waiting import wait_for

GEN_033 = FIXTURES / "vllm-generated" / "v0.33.0_V1_1engine_singleproc_GENERATED.prom"


def test_scrape_once_prints_one_stream_per_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scrape-once", str(GEN_033), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["metrics_disabled"] is False
    (stream,) = out["streams"]
    assert set(stream) >= {
        "model_name",
        "running",
        "waiting",
        "kv_usage",
        "ttft_count",
        "itl_count",
        "missing",
    }
    assert stream["missing"] == []
    assert isinstance(stream["ttft_count"], float)


def test_scrape_once_reports_metrics_disabled(capsys: pytest.CaptureFixture[str]) -> None:
    page = FIXTURES / "vllm-captured" / "http_metrics_docs-design-metrics-md_example.prom"
    assert main(["scrape-once", str(page), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {
        "streams": [],
        "metrics_disabled": True,
        "engine_kind": "",
        "parse_errors": out["parse_errors"],
    }


def test_scrape_once_rejects_html(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "x.prom"
    p.write_text("<html><body>oops</body></html>")
    assert main(["scrape-once", str(p)]) == 1
    assert "not_prometheus" in capsys.readouterr().err


def test_serve_with_bad_config_exits_2_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "targets: [{name: a, url: 'http://127.0.0.1:1/metrics'}]\nscrape: {timeout: 0}\n"
    )
    assert main(["serve", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "scrape.timeout" in err and err.count("\n") == 1


def test_serve_without_targets_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve"]) == 2
    assert "no targets" in capsys.readouterr().err


def test_serve_rejects_malformed_target_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--target", "just-a-name"]) == 2
    assert "NAME=URL" in capsys.readouterr().err


def test_config_check_accepts_good_and_names_bad_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("targets: [{name: a, url: 'http://127.0.0.1:8000/metrics'}]\n")
    assert main(["config", "check", str(good)]) == 0
    assert "ok" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text("log: {level: LOUD}\n")
    assert main(["config", "check", str(bad)]) == 2
    assert "log.level" in capsys.readouterr().err


def test_each_command_module_registers_its_own_commands_alone() -> None:
    names: list[str] = []
    for command in COMMANDS:
        sub = argparse.ArgumentParser().add_subparsers(dest="command", required=True)
        command.register(sub)
        names += sub.choices
    assert names == [
        "serve", "scrape-once", "demo", "config", "sim", "review", "kv", "diagnose", "replay",
        "whatif", "rules", "ui",
    ]  # fmt: skip


def test_nothing_outside_the_cli_package_imports_it() -> None:
    app = Path(__file__).resolve().parents[1] / "app"
    for path in app.rglob("*.py"):
        if app / "cli" in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            for name in names:
                assert name != "app.cli" and not name.startswith("app.cli."), (path, name)


def test_the_demo_runs_a_fleet_of_three_beside_single_servers_of_other_models(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from app.cli.demo import DEMO, start_servers, stop_servers

    servers, targets = start_servers(DEMO)
    try:
        models = {
            t["name"]: set(re.findall(r'model_name="([^"]+)"', httpx.get(t["url"]).text))
            for t in targets
        }
    finally:
        stop_servers(servers)
    assert all(len(m) == 1 for m in models.values()), models  # one model per server
    per_model = Counter(m for ms in models.values() for m in ms)
    (fleet,) = [m for m, n in per_model.items() if n > 1]
    assert per_model[fleet] == 3 and len(per_model) >= 3  # singles of other models beside
    replicas = sorted(t for t, ms in models.items() if fleet in ms)
    assert replicas == ["sim-chat-0", "sim-chat-1", "sim-chat-2"]
    (chat,) = [s for s in DEMO if s.replicas > 1]
    assert chat.replica_set == {2: {"workload.rate_multiplier": 2.5}}  # one bad replica
    assert {"incident", "kv_pressure", "prefill_interference"} <= {s.scenario for s in DEMO}
    out = capsys.readouterr().out
    assert "at 1 min spike (queue_bound)" in out  # what the demo runs, said by the demo


def test_sim_list_and_the_demo_each_say_when_their_incident_spikes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from app.cli.demo import INCIDENT_SPIKE_AT_S, scenario_of
    from app.cli.sim import timeline_text

    assert main(["sim", "--list"]) == 0
    listed = capsys.readouterr().out
    assert "at 5 min spike (queue_bound); at 10 min recovery (healthy)" in listed
    demo = timeline_text(scenario_of("incident", "m")) or ""
    assert f"at {INCIDENT_SPIKE_AT_S / 60:g} min spike (queue_bound)" in demo
    assert "at 6 min recovery" in demo and "repeats every 15 min" in demo


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_serve_links_its_alerts_to_the_port_it_listens_on(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "rules:\n  - alert: Down\n    expr: target_up == 0\n"
        '    annotations: {ui_url: "{{ ui_url }}"}\n'
    )
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "targets: [{name: dead, url: 'http://127.0.0.1:9/metrics'}]\n"
        "scrape: {interval: 1, timeout: 0.5}\n"
        f"alerts: {{default_rules: false, rules_file: {rules}, evaluation_interval: 1}}\n"
    )
    port = _free_port()  # not 8321: the links must follow --port, not a default
    cmd = [sys.executable, "-m", "app.cli", "serve", "--config", str(cfg), "--port", str(port)]
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [*cmd, "--db", str(tmp_path / "pw.db")], stdout=out, stderr=subprocess.STDOUT
        )
    try:
        alerts: list[dict[str, object]] = []

        def alerting() -> bool:
            nonlocal alerts
            assert proc.poll() is None, log.read_text(errors="replace")[-2000:]
            with contextlib.suppress(httpx.HTTPError):  # not listening yet
                alerts = httpx.get(f"http://127.0.0.1:{port}/api/v1/alerts", timeout=5).json()
            return bool(alerts)

        wait_for(alerting, timeout=90)  # a bound for a busy machine, not a timing claim
        ui_url = str(alerts[0]["annotations"]["ui_url"])  # type: ignore[index]
        assert ui_url.startswith(f"http://127.0.0.1:{port}/ui/targets/dead?"), ui_url
    finally:
        proc.terminate()
        proc.wait(30)


@contextlib.contextmanager
def _serving(body: bytes) -> Iterator[str]:
    """A loopback HTTP server on port 0 answering every GET with ``body``; its /metrics URL."""

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def _diagnose(url: str, *flags: str) -> int:
    return main(["diagnose", url, "--duration", "0.2", "--interval", "0.1", "--quiet", *flags])


def test_diagnose_a_refused_port_says_connection_refused_and_exits_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    dead = f"http://127.0.0.1:{_free_port()}/metrics"  # bound, then closed: nothing listens
    assert _diagnose(dead) == 1
    out = capsys.readouterr().out
    assert f"{dead}: 3 scrapes (none usable)" in out
    assert "cannot diagnose: connection refused — nothing listens" in out
    assert "class:" not in out and " @ " not in out  # no diagnosis block to contradict it
    assert _diagnose(dead, "--json") == 1
    got = json.loads(capsys.readouterr().out)
    assert got["error"]["kind"] == "refused"
    assert got["error"]["message"].startswith("connection refused")
    assert got["errors"] == [{"kind": "refused", "message": "connection refused", "count": 3}]
    assert got["diagnoses"] == [] and got["failed_scrapes"] == 3


def test_diagnose_a_page_without_vllm_metrics_says_so_and_exits_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    page = b"# TYPE up gauge\nup 1\n# TYPE process_cpu_seconds_total counter\n"
    page += b"process_cpu_seconds_total 3.5\n"
    with _serving(page) as url:
        assert _diagnose(url) == 1
        out = capsys.readouterr().out
        assert "cannot diagnose: no vLLM metrics on this page" in out
        assert "class:" not in out
        assert _diagnose(url, "--json") == 1
    got = json.loads(capsys.readouterr().out)
    assert got["error"]["kind"] == "metrics_disabled"
    assert got["error"]["message"].startswith("no vLLM metrics on this page")
    assert [e["kind"] for e in got["errors"]] == ["metrics_disabled"]
    assert got["diagnoses"] == []


def test_diagnose_a_vllm_page_names_its_model_and_reports_no_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with _serving(GEN_033.read_bytes()) as url:
        assert _diagnose(url, "--json") == 0
        got = json.loads(capsys.readouterr().out)
        assert got["error"] is None and got["errors"] == []
        assert got["diagnoses"] and all(d["model_name"] for d in got["diagnoses"])
        # One scrape shows the model but no interval: said, not diagnosed as stream "".
        assert main(["diagnose", url, "--duration", "0", "--quiet"]) == 1
        out = capsys.readouterr().out
        assert "1 scrape (1 ok)" in out and "cannot diagnose: 1 usable scrape(s)" in out


def test_replay_text_lists_the_alerts_and_never_cuts_a_model_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.sim.record import record

    long = "meta-llama/Llama-3.1-70B-Instruct-FP8-dynamic"  # longer than any fixed column
    folder = record(
        "kv_pressure",
        tmp_path / "kv",
        duration=300,
        seed=2,
        overrides={"engine.served_model_name": long},
    )
    assert main(["replay", str(folder), "--json"]) == 0
    alerts = json.loads(capsys.readouterr().out)["alerts"]
    assert main(["replay", str(folder)]) == 0
    out = capsys.readouterr().out
    windows = out.split("\n\n")[0].splitlines()  # the timeline, before the problems
    assert windows and all(f"  {long}  kv_pressure" in line for line in windows)
    listed = out.split("\nalerts the rules would have fired:\n")[1]
    for a in alerts:  # every transition --json carries, in the text too
        assert re.search(rf"\b{a['state']} +{a['alertname']} +{re.escape(long)}$", listed, re.M)
    assert "firing    PhasewatchKVCachePressure" in listed
    assert "KV cache 100% full on" in listed  # a firing alert's summary


def test_a_reader_that_goes_away_stops_the_output_quietly(tmp_path: Path) -> None:
    """``phasewatch replay --json | head -1``: no traceback, the status a shell reports
    for a tool stopped by SIGPIPE."""
    from app.sim.record import record

    # Far more output than a pipe holds (64 KiB), so the writer is still writing when its
    # reader goes away, whatever the size of a window's JSON.
    rec = record("healthy", tmp_path / "rec", duration=600, seed=1)
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "replay", str(rec), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline()  # the reader takes one line, then goes away
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
