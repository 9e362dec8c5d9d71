"""The PromQL rules and example configs in dashboards/, checked with Prometheus' own tools.

``promtool check rules`` / ``check config``, ``promtool test rules`` (one synthetic stream
per class → exactly its alert; a healthy stream → silence; transfer-bound decode and
prefill instances of P/D fleets and the client-TTFT estimate; tests/promtool/) and
``amtool check-config``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.realbins import require_binary

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "dashboards" / "prometheus" / "phasewatch-rules.yml"


def _run(*cmd: str) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    return out


def test_promtool_check_rules_accepts_the_rule_file() -> None:
    out = _run(require_binary("promtool"), "check", "rules", str(RULES))
    assert "SUCCESS: 42 rules found" in out


def test_promtool_unit_tests_fire_one_alert_per_class_and_none_when_healthy() -> None:
    test_file = ROOT / "tests" / "promtool" / "phasewatch-rules.test.yml"
    out = _run(require_binary("promtool"), "test", "rules", str(test_file))
    assert "SUCCESS" in out


def test_example_prometheus_config_is_valid() -> None:
    config = ROOT / "dashboards" / "prometheus" / "prometheus.yml"
    out = _run(require_binary("promtool"), "check", "config", str(config))
    assert "is valid prometheus config file syntax" in out


def test_example_alertmanager_config_is_valid() -> None:
    config = ROOT / "dashboards" / "alertmanager" / "alertmanager.yml"
    out = _run(require_binary("amtool"), "check-config", str(config))
    assert "SUCCESS" in out
