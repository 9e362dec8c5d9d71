"""``phasewatch sim`` runs a P/D fleet; ``phasewatch replay`` reads its recording by pool."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from app.cli import main
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parent.parent


def test_sim_lists_the_pd_fleets_with_their_pools(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "--list"]) == 0
    out = capsys.readouterr().out
    assert "pd_slow_transfer       2P2D fleet" in out
    assert "pd_prefill_starved     1P3D fleet" in out
    assert "at 5 min tcp_fallback (transfer_bound)" in out


def test_a_pd_recording_replays_by_pool_with_transfer_bound_and_its_hints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = tmp_path / "rec"
    args = ["sim", "--scenario", "pd_slow_transfer", "--record", str(rec), "--duration", "480"]
    assert main([*args, "--seed", "2"]) == 0
    assert "2P2D: one folder per replica" in capsys.readouterr().out
    assert sorted(p.name for p in rec.iterdir()) == [
        "client.jsonl", "decode-0", "decode-1", "fleet.json", "prefill-0", "prefill-1",
    ]  # fmt: skip
    assert main(["replay", str(rec)]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if "prefill(2)" in line]
    assert "prefill(2) Healthy · decode(2) Healthy · client TTFT ≈" in lines[0]
    assert "decode(2) Transfer-bound (slow transfer)" in lines[-1]
    assert "(estimate)" in lines[-1]
    assert "decode pool: Transfer-bound (slow transfer):" in out
    assert "1. Check the KV transfer backend" in out
    assert main(["replay", str(rec), "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["fleet"] is True and body["targets"] == [
        "decode-0", "decode-1", "prefill-0", "prefill-1",
    ]  # fmt: skip
    last = body["windows"][-1]["pd"]
    assert last["pools"]["decode"]["class"] == "transfer_bound"
    assert last["pools"]["decode"]["sub_cause"] == "slow_transfer"
    assert last["client_ttft"]["measured"] is False
    assert {r["source"] for r in last["roles"]} == {"page"}


def test_a_pool_imbalance_replays_with_the_ratio(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = tmp_path / "starved"
    assert main(["sim", "--scenario", "pd_prefill_starved", "--record", str(rec),
                 "--duration", "300"]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["replay", str(rec)]) == 0
    out = capsys.readouterr().out
    assert "prefill(1) Queue-bound (arrival surge)" in out
    assert "pools: move to 3P1D" in out
    assert "pool imbalance: move to 3P1D" in out
    assert "Move replicas to the prefill pool: run 3P1D instead of 1P3D" in out


def test_pd_fleets_refuse_the_flags_of_plain_replicas(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "--scenario", "pd_healthy", "--replicas", "3"]) == 2
    assert "pd.prefill.replicas" in capsys.readouterr().err
    assert main(["sim", "--scenario", "pd_healthy", "--set", "pd.transfer.bandwidth=1"]) == 2
    assert "unknown transfer setting" in capsys.readouterr().err


def test_phasewatch_sim_serves_a_pd_fleet(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "sim", "--scenario", "pd_healthy", "--port", "0",
         "--set", "pd.decode.replicas=3"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("listening on http://127.0.0.1:")
        url = first.split()[-1]
        lines = [proc.stdout.readline() for _ in range(6)]
        assert [line.split()[0] for line in lines] == ["prefill"] * 2 + ["decode"] * 3 + ["router"]
        assert "/replica/4/metrics" in lines[4]
        page: list[str] = []
        wait_for(lambda: page.append(httpx.get(url + "/replica/4/metrics").text) or True, 10)
        assert "vllm:nixl_xfer_time_seconds_bucket" in page[0]
        assert "vllm:num_requests_kv_fetch_by_stage" in page[0]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
