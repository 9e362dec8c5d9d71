"""The PromQL rules on SGLang's families, checked with promtool: a queue-bound SGLang
server with two data-parallel ranks, one under KV pressure, a prefill-bound and a
decode-bound one fire their Sglang* alerts and no Vllm* alert, a healthy one none
(tests/promtool/phasewatch-rules-sglang.test.yml); and each Sglang* alert speaks in
SGLang's flags where its Vllm* twin names vLLM's (``app.diagnose.engine_flags``)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from app.diagnose.engine_flags import in_words_of
from tests.realbins import require_binary

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests" / "promtool" / "phasewatch-rules-sglang.test.yml"
RULES = ROOT / "dashboards" / "prometheus" / "phasewatch-rules.yml"


def test_promtool_rules_fire_on_sglang_streams() -> None:
    cmd = [require_binary("promtool"), "test", "rules", str(TESTS)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout + proc.stderr


def _alerts() -> dict[str, dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return {r["alert"]: r for g in groups for r in g["rules"] if "alert" in r}


def test_each_sglang_alert_names_sglangs_flags_where_its_vllm_twin_names_vllms() -> None:
    alerts = _alerts()
    twins = {name: "Vllm" + name[len("Sglang") :] for name in alerts if name.startswith("Sglang")}
    assert set(twins.values()) == set(alerts) - set(twins) - {"VllmKVTransferBound"}
    for sglang, vllm in twins.items():
        ours, theirs = alerts[sglang], alerts[vllm]
        assert ours["labels"] == theirs["labels"], sglang
        text = ours["annotations"]["description"]
        assert "vLLM" not in text and "preempt" not in text, sglang
        for flag in re.findall(r"--[a-z][a-z-]*", text):
            assert in_words_of("sglang", flag) == flag, (sglang, flag)  # no vLLM-only flag
        for flag in re.findall(r"--[a-z][a-z-]*", theirs["annotations"]["description"]):
            assert in_words_of("sglang", flag) in text, (sglang, flag)
        # The same class: the SGLang alert is its twin's record on SGLang streams only.
        assert ours["expr"].split()[0] == theirs["expr"].split()[0], sglang
        assert "and on (model_name, instance) phasewatch:sglang_stream:1m" in ours["expr"]
        assert "unless on (model_name, instance) phasewatch:sglang_stream:1m" in theirs["expr"]
