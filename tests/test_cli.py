"""The command line: one package, scrape-once output, clear config errors with exit 2."""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

import pytest

from app.cli import COMMANDS, main
from tests.fixtures_path import FIXTURES

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
    assert out == {"streams": [], "metrics_disabled": True, "parse_errors": out["parse_errors"]}


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
        "rules", "ui",
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
