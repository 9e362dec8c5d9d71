"""``phasewatch replay DIR --json`` carries ``alerts``; ``phasewatch rules check|replay``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from app.cli import main
from app.cli import replay as replay_command
from app.sim.record import record


@pytest.fixture(scope="module")
def kv_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(record("kv_pressure", tmp_path_factory.mktemp("rec") / "kv", duration=300, seed=2))


def test_replay_json_lists_the_alert_transitions(
    kv_recording: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", str(kv_recording), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["windows"] and out["target"] == "kv"
    states = {(a["alertname"], a["state"]) for a in out["alerts"]}
    assert ("PhasewatchKVCachePressure", "firing") in states
    for a in out["alerts"]:
        assert a["state"] in ("pending", "firing", "resolved")
        assert isinstance(a["at"], float) and out["start"] <= a["at"] <= out["end"]


def test_rules_replay_tries_a_rule_file(
    kv_recording: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = tmp_path / "mine.yaml"
    rules.write_text("rules:\n  - alert: Full\n    expr: kv_max >= 0.99\n    for: 1m\n")
    args = ["rules", "replay", str(kv_recording), "--rules", str(rules), "--no-default-rules"]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["rules"] == ["Full"]
    assert [a["state"] for a in out["alerts"]][:2] == ["pending", "firing"]
    assert main(args) == 0
    assert "firing    Full" in capsys.readouterr().out


def test_rules_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("rules:\n  - alert: Down\n    expr: target_up == 0\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules:\n  - alert: X\n    expr: kv_max >\n")
    assert main(["rules", "check", str(good)]) == 0
    assert "ok — 1 rule(s): Down" in capsys.readouterr().out
    assert main(["rules", "check", str(good), str(bad)]) == 2
    assert f"{bad}:3:19: rule 'X': expr: expected a value" in capsys.readouterr().err


def test_replay_of_a_folder_without_pages_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", str(tmp_path), "--json"]) == 2
    assert "no <unix-seconds>.prom pages" in capsys.readouterr().err


def test_replay_lists_alerts_with_no_other_command_registered(
    kv_recording: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    replay_command.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["replay", str(kv_recording), "--json"])
    assert args.func(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["windows"]
    assert any(a["alertname"] == "PhasewatchKVCachePressure" for a in out["alerts"])


def test_replay_takes_the_servers_settings_and_the_page_shows_its_own(
    kv_recording: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--server KEY=VALUE``: the settings the page lacks; what the page shows
    (cache_config_info: gpu_memory_utilization 0.6 in this scenario) is used, and a
    configured value that disagrees is named."""
    args = ["replay", str(kv_recording), "--json", "--server", "max_num_seqs=64"]
    assert main([*args, "--server", "gpu_memory_utilization=0.9"]) == 0
    out = json.loads(capsys.readouterr().out)
    kv = [w for w in out["windows"] if w["class"] == "kv_pressure"][-1]
    server = kv["server"]
    assert server["max_num_seqs"] == {"value": 64, "source": "configured"}
    assert server["gpu_memory_utilization"] == {"value": 0.6, "source": "page"}
    assert server["num_gpu_blocks"]["source"] == "page"
    assert any("configured as 0.9" in n for n in kv["notes"])
    memory = next(h for h in kv["hints"] if h["id"] == "gpu-memory-utilization")
    assert "(now 0.6, cache_config_info)" in memory["action"] and memory["evidence"]
    # Every shown hint quotes its evidence.
    assert all(h["evidence"] and h["why"].startswith(h["evidence"]) for h in kv["hints"])


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("max_num_seqs", "expected KEY=VALUE"),
        ("max_num_seq=8", "unknown key 'max_num_seq'"),
        ("gpu_memory_utilization=1.5", "--server gpu_memory_utilization=1.5"),
    ],
)
def test_a_bad_server_flag_exits_2_naming_it(
    kv_recording: Path, capsys: pytest.CaptureFixture[str], flag: str, message: str
) -> None:
    assert main(["replay", str(kv_recording), "--server", flag]) == 2
    assert message in capsys.readouterr().err
    assert main(["rules", "replay", str(kv_recording), "--server", flag]) == 2
