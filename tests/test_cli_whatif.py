"""``phasewatch whatif``: sources, output, and what bad input gets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from app.cli import main
from app.sim.record import record
from app.sources.recording import record_into
from app.store.sqlite import Store

START = 1_764_403_200.0


@pytest.fixture(scope="module")
def queued(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Chat traffic that queues at max_num_seqs=32 (the simulator's queue_overload)."""
    root = tmp_path_factory.mktemp("whatif")
    return record("queue_overload", root / "queued", duration=240, seed=2, start_unix=START)


def test_json_predicts_a_larger_batch_drains_the_queue(
    queued: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["whatif", str(queued), "--set", "max_num_seqs=128", "--server", "max_num_seqs=32"]
    assert main([*args, "--json", "--seeds", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["changes"] == {"max_num_seqs": 128}
    base, pred = out["baseline"], out["predicted"]
    for key in ("ttft_p50", "ttft_p99", "itl_p50", "itl_p99", "waiting_avg", "kv_usage_max"):
        assert key in base and key in pred
    assert pred["ttft_p99"] < base["ttft_p99"] / 10, "the queue is gone"
    assert pred["waiting_avg"] < base["waiting_avg"]
    assert set(out["interval"]) >= {"ttft_p99", "itl_p99"}
    fit = out["fit"]
    assert fit["engine"]["max_num_seqs"] == 32 and fit["sources"]["max_num_seqs"] == "configured"
    assert 0 <= fit["replay_error"] < 0.5
    # A simulated server is steady: every window at its mean speed, within a few per cent.
    speed = fit["speed_timeline"]
    assert len(speed) >= 2 and all(0.9 < k < 1.1 for _, k in speed), speed
    assert isinstance(out["warnings"], list)


def test_text_says_measured_replayed_predicted_and_the_fit(
    queued: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["whatif", str(queued), "--set", "rate_scale=0.5", "--seeds", "1", "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "what if rate_scale=0.5" in text
    for word in ("measured", "replayed", "predicted", "interval", "TTFT p99", "ITL p99"):
        assert word in text
    assert "step time: max(" in text and "replay error:" in text
    assert "server speed: ×" in text
    # Not given: read off the page (running pinned at 32 with requests waiting), not
    # vLLM's default of 256; a setting nobody states is still said.
    assert "engine: max_num_seqs 32," in text and "max_num_seqs not known" not in text
    assert "max_num_batched_tokens not known" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "rate=2"], "unknown key 'rate'"),
        (["--set", "max_num_seqs=many"], "is not an integer"),
        (["--set", "gpu_memory_utilization=0.95"], "needs the device's memory"),
        (["--server", "max_num_seqs=0"], "--server max_num_seqs"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    queued: Path, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["whatif", str(queued), *args, "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_no_source_and_a_missing_folder_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["whatif"]) == 2
    assert "give SOURCE" in capsys.readouterr().err
    assert main(["whatif", str(tmp_path / "nope")]) == 2
    assert "not a recording folder" in capsys.readouterr().err


def test_a_span_without_requests_exits_1_saying_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    idle = record("healthy", tmp_path / "idle", duration=90, overrides={"workload.rate": 0.0})
    assert main(["whatif", str(idle), "--json"]) == 1
    assert "no request finished" in json.loads(capsys.readouterr().out)["error"]


def test_old_vllm_pages_give_warnings_not_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = record("healthy", tmp_path / "v06", duration=180, seed=1, version="0.6")
    assert main(["whatif", str(old), "--set", "rate_scale=1.5", "--json", "--seeds", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["predicted"]["ttft_p99"] is not None
    assert out["warnings"], "what the old page lacks is said"


def test_a_target_from_the_store(
    queued: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "pw.db"
    store = Store(db)
    _, first, last = record_into(store, queued, "q1")
    store.close()
    cfg = tmp_path / "pw.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "targets": [
                    {
                        "name": "q1",
                        "url": "http://127.0.0.1:9/metrics",
                        "server": {"max_num_seqs": 32},
                    }
                ],
                "storage": {"path": str(db)},
            }
        )
    )
    args = ["whatif", "--config", str(cfg), "--target", "q1", "--start", str(first)]
    assert (
        main([*args, "--end", str(last), "--set", "max_num_seqs=64", "--json", "--seeds", "1"]) == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["target"] == "q1"
    assert out["fit"]["engine"]["max_num_seqs"] == 32  # from the target's server: block
    assert out["predicted"]["ttft_p99"] < out["baseline"]["ttft_p99"]
    assert main([*args, "--end", str(first + 20)]) == 1  # too short a span
    assert "at least 60 s" in capsys.readouterr().err
