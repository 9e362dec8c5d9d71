"""The PromQL rules on SGLang's families, checked with promtool: a queue-bound SGLang
server with two data-parallel ranks and one under KV pressure fire their alerts, a
healthy one none (tests/promtool/phasewatch-rules-sglang.test.yml)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.realbins import require_binary

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests" / "promtool" / "phasewatch-rules-sglang.test.yml"


def test_promtool_rules_fire_on_sglang_streams() -> None:
    cmd = [require_binary("promtool"), "test", "rules", str(TESTS)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout + proc.stderr
