"""The open-loop load generator of the real-vLLM pairs (``bench/loadgen.py``) and the
capacity probe that sizes their loads (``tests/vllm_real/probe_capacity.py``), run against
the simulator's own streaming API server so the scripts cannot rot between real runs."""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.sim.server import SimHTTPServer, start_server
from tests.test_probes_sim import _model

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "vllm_real"))

from loadgen import LoadSpec, RequestClass, run_load, schedule  # noqa: E402
from probe_capacity import served_count  # noqa: E402

MIX = (RequestClass(8, 80, 128), RequestClass(2, 320, 512))


def test_the_same_seed_sends_the_same_arrivals_and_twice_the_rate_halves_the_offsets() -> None:
    a = schedule(LoadSpec(rate=5.5, duration=60, classes=MIX, seed=1))
    assert a == schedule(LoadSpec(rate=5.5, duration=60, classes=MIX, seed=1))
    assert a != schedule(LoadSpec(rate=5.5, duration=60, classes=MIX, seed=2))
    b = schedule(LoadSpec(rate=11, duration=60, classes=MIX, seed=1))
    assert len(b) > len(a) > 200
    for x, y in zip(a, b, strict=False):  # B's first arrivals are A's, twice as dense
        assert math.isclose(y.at, x.at / 2) and (y.cls, y.prompt) == (x.cls, x.prompt)


def test_a_probe_counts_the_requests_that_ended_in_the_measured_part() -> None:
    rows = [
        {"outcome": "ok", "send": 100.0, "total": 20.0},  # ended at 120: counted
        {"outcome": "ok", "send": 100.0, "total": 10.0},  # ended in the warm-up
        {"outcome": "ok", "send": 140.0, "total": 10.0},  # ended after the end
        {"outcome": "cancelled", "send": 110.0, "total": 5.0},
        {"outcome": "dropped", "send": 101.0},
    ]
    assert served_count(rows, 100.0, 15.0, 145.0) == 1


@pytest.fixture
def sim() -> Iterator[tuple[SimHTTPServer, str]]:
    server, _thread, url = start_server("healthy", port=0, overrides={"workload.rate": 0.0})
    try:
        yield server, url.removesuffix("/metrics")
    finally:
        server.shutdown()
        server.server_close()


def test_an_open_loop_run_sends_every_arrival_and_drops_past_its_cap(
    sim: tuple[SimHTTPServer, str],
) -> None:
    server, base = sim
    spec = LoadSpec(rate=20, duration=3, classes=(RequestClass(1, 8, 4),), seed=3)
    records: list[dict[str, Any]] = []
    summary = asyncio.run(run_load(base, spec, model=_model(server), on_record=records.append))
    arrivals = schedule(spec)
    assert summary.sent == summary.ok == len(arrivals) == len(records) > 20
    assert summary.failed == summary.dropped == 0
    assert all(r["ttft"] > 0 and r["chunks"] >= 1 for r in records)
    assert sorted(r["i"] for r in records) == list(range(len(arrivals)))
    # One request in flight at most: the arrivals that find it busy are dropped, counted
    # and logged, never delayed.
    capped = LoadSpec(
        rate=20, duration=3, classes=(RequestClass(1, 8, 64),), seed=3, max_in_flight=1
    )
    records.clear()
    summary = asyncio.run(run_load(base, capped, model=_model(server), on_record=records.append))
    assert summary.dropped > 0 and summary.ok + summary.dropped == len(arrivals)
    assert all("in_flight" in r for r in records if r["outcome"] == "dropped")


def test_the_capacity_probe_counts_what_a_server_serves(
    sim: tuple[SimHTTPServer, str], tmp_path: Path
) -> None:
    server, base = sim
    out = tmp_path / "capacity.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests/vllm_real/probe_capacity.py"), base,
         "--model", _model(server), "--rate", "40", "--warmup", "2", "--duration", "3",
         "--prompt-words", "8", "--output-tokens", "16", "--out", str(out)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    got = json.loads(out.read_text())
    assert got == json.loads(done.stdout.strip().splitlines()[-1])
    # The requests that ended in the 3 s measured, per second (the simulator's engine is
    # not saturated by this load; a real vLLM at 4 sequences is).
    assert got["completed"] > 0 and got["capacity_rps"] == round(got["completed"] / 3, 3)


def test_a_phased_load_sends_each_phase_at_its_own_rate_and_the_same_seed_repeats_it() -> None:
    from loadgen import parse_phase

    spec = LoadSpec(
        rate=20, duration=300, classes=MIX, seed=1, phases=((100, 5.0), (100, 20.0), (100, 2.0))
    )
    a = schedule(spec)
    assert a == schedule(spec)
    counts = [sum(lo <= x.at < lo + 100 for x in a) for lo in (0, 100, 200)]
    for n, rate in zip(counts, (5.0, 20.0, 2.0), strict=True):
        assert abs(n - 100 * rate) < 4 * math.sqrt(100 * rate)  # Poisson: within 4 sd
    assert [spec.rate_at(t) for t in (0, 150, 299, 300)] == [5.0, 20.0, 2.0, 0.0]
    assert all(x.at < 300 for x in a)
    assert parse_phase("90:16.5") == (90.0, 16.5)
    with pytest.raises(ValueError):
        parse_phase("90")
