"""The simulator's KV-connector families are vLLM's own: checked against vLLM 0.32's code.

Where ``make test-vllm`` installed vLLM (``.venv/vllm``), its ``NixlPromMetrics`` is run
with prometheus_client's own classes and fed one transfer, one failure and one expired
request; the simulator's families fed the same must print the same lines. The consumer's
``vllm:num_requests_kv_fetch_by_stage`` and the prompt-token sources are read from
vLLM's source (``v1/metrics/loggers.py``, ``v1/metrics/stats.py``). Skipped without it.
"""

from __future__ import annotations

import ast
import os
import subprocess
from pathlib import Path

import pytest

from app.sim.connector import KV_FETCH_HELP, KV_FETCH_STAGES, ConnectorState, connector_families
from app.sim.exposition import TextWriter

ROOT = Path(__file__).resolve().parent.parent
VLLM_PYTHON = ROOT / ".venv" / "vllm" / "bin" / "python"
SITE = ROOT / ".venv" / "vllm" / "lib" / "python3.11" / "site-packages" / "vllm"

pytestmark = pytest.mark.skipif(
    not VLLM_PYTHON.exists() or not SITE.is_dir(), reason="vLLM is not installed (make test-vllm)"
)

# vLLM's NixlPromMetrics with prometheus_client's classes on a registry of its own.
_SCRIPT = """
import sys
from functools import partial
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from vllm.distributed.kv_transfer.kv_connector.v1.nixl.stats import NixlPromMetrics

class _Config:
    kv_transfer_config = None

registry = CollectorRegistry()
kinds = {cls: partial(cls, registry=registry) for cls in (Gauge, Counter, Histogram)}
prom = NixlPromMetrics(_Config(), kinds, ["model_name", "engine"], {0: ["m", "0"]})
prom.observe({"transfer_duration": [0.3], "post_duration": [0.0002],
    "bytes_transferred": [3.4e8], "num_descriptors": [10000], "num_failed_transfers": [1],
    "num_failed_notifications": [], "num_failed_handshakes": [], "num_kv_expired_reqs": [1],
    "num_notifications_after_expiry": []}, 0)
sys.stdout.write(generate_latest(registry).decode())
"""


def _lines(text: str) -> list[str]:
    """The page's lines without the ``_created`` families (their values are clock times)."""
    out = []
    for line in text.splitlines():
        name = line.split(" ", 3)[2] if line.startswith("#") else line.split("{", 1)[0]
        if not name.endswith("_created"):
            out.append(line)
    return out


def test_nixl_families_print_as_vllm_prints_them() -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
    proc = subprocess.run(
        [str(VLLM_PYTHON), "-c", _SCRIPT], capture_output=True, text=True, timeout=300, env=env
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    state = ConnectorState()
    state.transferred(0.3, 0.0002, 3.4e8, 10000)
    state.failed_transfers += 1
    state.kv_expired += 1
    fams = connector_families(state, {"engine": "0", "model_name": "m"})
    ours = TextWriter(fams, 0.0).render().decode()
    assert _lines(ours) == _lines(proc.stdout)


def _call_keywords(tree: ast.AST, name: str) -> dict[str, ast.expr]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            kw = {k.arg: k.value for k in node.keywords if k.arg}
            if isinstance(kw.get("name"), ast.Constant) and kw["name"].value == name:
                return kw
    raise AssertionError(f"{name} not registered")


def _assigned(tree: ast.AST, target: str) -> ast.expr:
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == target for t in targets):
                assert node.value is not None
                return node.value
    raise AssertionError(f"{target} not assigned")


def test_the_consumer_gauge_and_prompt_sources_are_vllms() -> None:
    loggers = ast.parse((SITE / "v1" / "metrics" / "loggers.py").read_text())
    kw = _call_keywords(loggers, "vllm:num_requests_kv_fetch_by_stage")
    assert ast.literal_eval(kw["documentation"]) == KV_FETCH_HELP
    stats = ast.parse((SITE / "v1" / "metrics" / "stats.py").read_text())
    stages = [ast.literal_eval(_assigned(stats, n)) for n in ("KV_FETCH_WAITING_TO_START",
              "KV_FETCH_IN_PROGRESS", "KV_FETCH_COMPLETED_WAITING")]  # fmt: skip
    assert tuple(stages) == KV_FETCH_STAGES
    sources = ast.literal_eval(_assigned(stats, "ALL_SOURCES"))
    assert sources == ("local_compute", "local_cache_hit", "external_kv_transfer")
