"""Recordings (docs/architecture.md): pages plus truth.jsonl, written faster than real time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.cli import main
from app.sim.record import DEFAULT_EPOCH, record
from app.sim.truth import window_truth


def test_recording_has_a_page_every_5_s_and_a_truth_line_per_interval(tmp_path: Path) -> None:
    out = record("incident", tmp_path / "rec", duration=60, seed=3)
    pages = sorted(p.name for p in out.glob("*.prom"))
    assert len(pages) == 13
    assert pages[0] == "1764403200.000.prom" and pages[-1] == "1764403260.000.prom"
    rows = [json.loads(line) for line in (out / "truth.jsonl").read_text().splitlines()]
    assert len(rows) == 12
    assert [r["t0"] for r in rows] == [DEFAULT_EPOCH + 5 * k for k in range(12)]
    assert all(r["t1"] - r["t0"] == 5.0 for r in rows)
    assert {r["class"] for r in rows} <= {"healthy", "decode_bound"}
    meta = json.loads((out / "sim.json").read_text())
    assert meta["scenario"] == "incident" and meta["phases"][1]["name"] == "spike"
    page = (out / pages[-1]).read_text()
    names = {f.name for f in text_string_to_metric_families(page)}
    assert "vllm:time_to_first_token_seconds" in names
    assert window_truth(rows, DEFAULT_EPOCH, DEFAULT_EPOCH + 60).cls == "healthy"


def test_same_seed_same_recording(tmp_path: Path) -> None:
    a = record("kv_pressure", tmp_path / "a", duration=40, seed=7)
    b = record("kv_pressure", tmp_path / "b", duration=40, seed=7)
    for page in a.glob("*.prom"):
        assert page.read_bytes() == (b / page.name).read_bytes()
    assert (a / "truth.jsonl").read_text() == (b / "truth.jsonl").read_text()


def test_cli_records(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["sim", "--scenario", "queue_overload", "--record", str(tmp_path / "r"),
                 "--duration", "30", "--seed", "2", "--vllm-version", "0.6"])  # fmt: skip
    assert code == 0
    assert "6 intervals" in capsys.readouterr().out
    page = (tmp_path / "r" / "1764403230.000.prom").read_text()
    assert "vllm:time_per_output_token_seconds_bucket" in page and "engine=" not in page


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--scenario", "nope"], "unknown scenario"),
        (["--scenario", "healthy", "--device", "tpu"], "unknown device"),
        (["--scenario", "healthy", "--model", "gpt-9"], "unknown model"),
        (["--scenario", "healthy", "--rate", "-1"], "must not be negative"),
        (
            ["--scenario", "healthy", "--device", "a10g", "--max-model-len", "131072"],
            "fewer than max_model_len",
        ),
        (["--scenario", "healthy", "--model-params", "70"], "do not fit"),
        (["--scenario", "healthy", "--set", "engine.max_num_seqs=0"], "max_num_seqs"),
        (["--scenario", "healthy", "--set", "engine.bogus=1"], "unknown engine setting"),
        (["--scenario", "healthy", "--record", "x", "--duration", "-5"], "positive"),
    ],
)
def test_bad_input_exits_2_with_a_clear_message(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = [a if a != "x" else str(tmp_path / "x") for a in args]
    assert main(["sim", *args]) == 2
    assert message in capsys.readouterr().err
