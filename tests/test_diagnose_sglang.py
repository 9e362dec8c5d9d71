"""SGLang streams diagnosed in the same class vocabulary, with hints in SGLang's flags
(app.diagnose.engine_flags), on simulated SGLang recordings."""

from __future__ import annotations

import io
import json
from collections import Counter
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.diagnose.engine_flags import UNSUPPORTED, for_engine, in_words_of
from app.diagnose.records import Hint
from app.diagnose.server import ServerSettings, resolve

VLLM_WORDS = ("--max-num-seqs", "--max-num-batched-tokens", "--gpu-memory-utilization")
VLLM_WORDS += ("vllm:", "vLLM", "vllm serve")


def replay(folder: Path, *extra: str) -> list[dict[str, Any]]:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["replay", str(folder), "--json", *extra]) == 0
    windows: list[dict[str, Any]] = json.loads(out.getvalue())["windows"]
    return windows


def recorded(tmp: Path, scenario: str, seconds: int) -> Path:
    folder = tmp / scenario
    with redirect_stdout(io.StringIO()):
        args = ["sim", "--scenario", scenario, "--engine", "sglang", "--record", str(folder)]
        assert main([*args, "--duration", str(seconds)]) == 0
    return folder


@pytest.fixture(scope="module")
def queue_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return recorded(tmp_path_factory.mktemp("sglang"), "queue_overload", 300)


def test_queue_bound_on_sglang_with_sglang_flags(queue_run: Path) -> None:
    windows = replay(queue_run, "--server", "max_num_seqs=32")
    classes = Counter(w["class"] for w in windows)
    assert classes.most_common(1)[0][0] == "queue_bound"
    last = windows[-1]
    assert last["server"]["engine"] == "sglang"
    hints = {h["id"]: h for h in last["hints"]}
    assert hints["max-num-seqs-up"]["title"] == "Raise --max-running-requests"
    assert hints["max-num-seqs-up"]["action"].startswith("--max-running-requests 64")
    assert "--dp N" in hints["more-replicas"]["action"]
    assert "sglang:num_queue_reqs" in hints["more-replicas"]["action"]
    for hint in last["hints"]:
        text = " ".join((hint["title"], hint["action"], hint["why"], hint["evidence"]))
        assert not any(word in text for word in VLLM_WORDS), text


def test_sglang_assumes_no_vllm_default(queue_run: Path) -> None:
    """Without a configured limit there is no --max-running-requests value to raise."""
    last = replay(queue_run)[-1]
    assert last["class"] == "queue_bound"
    assert last["server"]["max_num_seqs"] == {"value": None, "source": None}
    assert "max-num-seqs-up" not in {h["id"] for h in last["hints"]}


def test_kv_pressure_on_sglang_reads_token_usage_and_retractions(tmp_path: Path) -> None:
    windows = replay(recorded(tmp_path, "kv_pressure", 300))
    kv = [w for w in windows if w["class"] == "kv_pressure"]
    assert len(kv) > len(windows) // 2
    for hint in kv[-1]["hints"]:
        text = " ".join((hint["title"], hint["action"], hint["why"]))
        assert not any(word in text for word in VLLM_WORDS), text


def test_server_view_of_an_sglang_page() -> None:
    view = resolve(ServerSettings(), {"engine_kind": "sglang"})
    assert view.engine == "sglang"
    assert view.max_num_seqs.value is None and view.max_num_batched_tokens.value is None
    assert view.gpu_memory_utilization.value is None
    assert view.block_size.value == 1 and view.enable_prefix_caching.value is True
    assert view.to_dict()["engine"] == "sglang"
    configured = resolve(ServerSettings(max_num_seqs=48), {"engine_kind": "sglang"})
    assert (configured.max_num_seqs.value, configured.max_num_seqs.source) == (48, "configured")
    assert resolve(ServerSettings()).engine == "vllm"


def test_hint_words_per_engine() -> None:
    hint = Hint(
        "batched-tokens-down",
        "Lower --max-num-batched-tokens",
        "--max-num-batched-tokens 1024 (now 4096)",
        "why; max_num_batched_tokens 4096",
        "max_num_batched_tokens 4096",
    )
    assert for_engine(hint, "vllm") is hint
    sg = for_engine(hint, "sglang")
    assert sg is not None
    assert sg.title == "Lower --chunked-prefill-size"
    assert sg.action.startswith("--chunked-prefill-size 1024 (now 4096); or --enable-mixed-chunk")
    assert sg.evidence == "chunked_prefill_size 4096"
    assert in_words_of("sglang", "--gpu-memory-utilization 0.92") == "--mem-fraction-static 0.92"
    assert in_words_of("sglang", "--kv-cache-dtype fp8") == "--kv-cache-dtype fp8_e4m3"
    for hint_id in UNSUPPORTED["sglang"]:
        assert for_engine(Hint(hint_id, "t", "a", "w"), "sglang") is None
