"""docker-compose.yml is valid, mounts only files that exist, and exposes nothing by accident."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from app.config import load_settings
from tests.realbins import require_binary

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"


def test_compose_file_validates_with_docker_compose() -> None:
    exe = require_binary("docker-compose")
    proc = subprocess.run(
        [exe, "-f", str(COMPOSE), "config", "-q"], capture_output=True, text=True, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr


def test_every_mounted_file_exists() -> None:
    spec = yaml.safe_load(COMPOSE.read_text())
    mounts = [
        v.split(":")[0]
        for svc in spec["services"].values()
        for v in svc.get("volumes", [])
        if v.startswith("./")
    ]
    assert mounts, "no bind mounts found"
    for m in mounts:
        assert (ROOT / m).exists(), f"{m} is mounted but missing"


def test_ports_are_published_on_loopback_only() -> None:
    spec = yaml.safe_load(COMPOSE.read_text())
    for name, svc in spec["services"].items():
        for port in svc.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"


def test_real_vllm_is_behind_the_gpu_profile() -> None:
    spec = yaml.safe_load(COMPOSE.read_text())
    vllm = spec["services"]["vllm"]
    assert vllm["profiles"] == ["gpu"]
    assert vllm["deploy"]["resources"]["reservations"]["devices"][0]["driver"] == "nvidia"


def test_compose_phasewatch_config_is_valid() -> None:
    settings = load_settings(ROOT / "deploy" / "compose" / "phasewatch.yaml")
    assert {t.name for t in settings.targets} == {"sim-healthy", "sim-incident"}


def test_dockerfile_runs_as_non_root_with_healthcheck() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert "USER phasewatch" in text and "HEALTHCHECK" in text and "/healthz" in text
