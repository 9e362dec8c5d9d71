"""The what-if twin on recordings of a real vLLM (CPU, a tiny random Llama; how they were
made: ``tests/data/vllm_real/README.md``): the same open-loop load at --max-num-seqs 4,
where requests queue, and at 16, where they do not."""

from __future__ import annotations

import copy
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.twin.frontend import PRIOR_SIGMA

DATA = Path(__file__).parent / "data" / "vllm_real"


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("vllm_real")
    for name in ("maxseqs4", "maxseqs16"):
        with tarfile.open(DATA / f"{name}.tar.gz") as tar:
            tar.extractall(root, filter="data")
    return root


# Each distinct ``whatif`` is run once for the module: two tests read the same A → B
# prediction and the same replay of B (a twin run is seconds of CPU).
_RUNS: dict[tuple[str, ...], dict[str, Any]] = {}


def _whatif(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    if args not in _RUNS:
        assert main(["whatif", *args, "--json", "--quiet", "--seeds", "2"]) == 0
        _RUNS[args] = json.loads(capsys.readouterr().out)
    return copy.deepcopy(_RUNS[args])


def test_more_sequences_on_a_real_vllm_drain_its_queue(
    recordings: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _whatif(
        capsys, str(recordings / "maxseqs4"), "--set", "max_num_seqs=16", "--server",
        "max_num_seqs=4",
    )  # fmt: skip
    fit = out["fit"]
    assert fit["sources"]["num_gpu_blocks"] == "cache_config_info"  # the real page says it
    assert fit["sources"]["max_num_seqs"] == "configured"
    assert fit["replay_error"] is not None and fit["replay_error"] < 0.5
    base, pred = out["baseline"], out["predicted"]
    assert base["waiting_avg"] > 1 and pred["waiting_avg"] < 0.5
    assert pred["ttft_p99"] < base["ttft_p99"] / 5
    # The real server at 16 (the same load): its queue is gone too.
    measured_b = _whatif(capsys, str(recordings / "maxseqs16"), "--server", "max_num_seqs=16")
    assert measured_b["baseline"]["ttft_p99"] < base["ttft_p99"] / 5
    assert measured_b["baseline"]["waiting_avg"] < 0.5


def test_fewer_sequences_on_a_real_vllm_build_a_queue(
    recordings: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _whatif(
        capsys, str(recordings / "maxseqs16"), "--set", "max_num_seqs=4", "--server",
        "max_num_seqs=16",
    )  # fmt: skip
    assert out["predicted"]["waiting_avg"] > out["baseline"]["waiting_avg"]
    assert out["predicted"]["ttft_p99"] > 5 * out["baseline"]["ttft_p99"]
    assert out["effect"]["ttft_p99"] > 5


def test_the_api_servers_share_of_ttft_is_measured_and_predicted(
    recordings: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """vLLM's TTFT includes the API server; the engine's queue + prefill do not. The twin
    measures the difference (e2e − queue − prefill − decode, the same requests) and adds it:
    B's queue-free TTFT p50 is that delay plus a prefill, not a prefill alone."""
    out = _whatif(
        capsys, str(recordings / "maxseqs4"), "--set", "max_num_seqs=16", "--server",
        "max_num_seqs=4",
    )  # fmt: skip
    fe = out["fit"]["frontend"]
    assert 0.001 < fe["mean_s"] < 0.02  # a few ms on this CPU server
    assert "e2e − queue − prefill − decode" in fe["source"]
    # The engine's wait for the step in flight is in the twin's engine TTFT, not twice.
    assert "less the replay's wait for the step in flight" in fe["source"]
    # A queues throughout: its tail is the queue's, so the spread is the prior, said so.
    assert fe["sigma"] == PRIOR_SIGMA and "prior" in fe["source"]
    assert any("prior spread" in w for w in out["warnings"])
    measured_b = _whatif(capsys, str(recordings / "maxseqs16"), "--server", "max_num_seqs=16")
    b50 = measured_b["baseline"]["ttft_p50"]
    assert abs(out["predicted"]["ttft_p50"] - b50) / b50 < 0.5
    # B has no queue: its own spread is fitted, and its replay meets its TTFT p99.
    assert "fitted" in measured_b["fit"]["frontend"]["source"]
    assert measured_b["fit"]["replay_errors"]["ttft_p99"] < 0.25
