"""A simulated fleet with one overloaded replica, end to end over loopback HTTP.

Three ``healthy`` replicas served by the simulator's own HTTP server (``Fleet`` with
``replica_scenarios``: replica 2 gets three times the traffic, as ``phasewatch sim
--replicas 3 --replica-set 2:workload.rate_multiplier=3`` does), scraped by the service's
``ScrapeSource`` every 5 s of a stepped clock into a SQLite store, then read back through the
real API and the service's ``/metrics`` gauges. The expected numbers come from elsewhere:
the fleet p99 from the raw pages parsed by prometheus_client (summed by ``le``, then
``histogram_quantile``), the attainment from the simulator's per-request truth.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from app.cli.sim import replica_overrides_from
from app.config import Settings, load_settings
from app.main import create_app
from app.service import Service
from app.sim.errors import SimConfigError
from app.sim.scenario import load
from app.sim.server import Fleet, SimHTTPServer
from app.sources.live import ScrapeSource
from app.store.sqlite import Store
from app.windows.quantile import histogram_quantile
from tests.test_e2e import ServiceThread
from tests.waiting import wait_for

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
REPLICAS = 3
BAD = 2
ROUNDS = 120  # ten minutes of 5 s scrapes
WINDOW = 60.0
TTFT = "vllm:time_to_first_token_seconds"


class SteppedClock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@dataclass
class Run:
    settings: Settings
    end: float
    pages: dict[float, list[str]]  # scrape time -> each replica's page
    truth: list[list[dict[str, Any]]]  # each replica's truth rows


def _settings(base: str, db: Path) -> Settings:
    return load_settings(
        None,
        {
            "targets": [
                {"name": f"r{i}", "url": f"{base}/replica/{i}/metrics"} for i in range(REPLICAS)
            ],
            "storage": {"path": str(db)},
            # The "latest window" of /slos and the gauges ends now, a little after the data.
            "window": {"length": 300, "step": 15},
        },
    )


async def _scrape(settings: Settings, clock: SteppedClock, keep: set[float]) -> Run:
    store = Store(settings.storage.path)
    pages: dict[float, list[str]] = {}
    base = settings.targets[0].url.rsplit("/replica/", 1)[0]
    async with httpx.AsyncClient() as client:
        collector = ScrapeSource(settings.scrape, settings.targets, store, client)
        start = clock.t
        for k in range(ROUNDS + 1):
            clock.t = start + 5.0 * k
            outcomes = await collector.read_round(clock.t)
            assert all(o.record.ok for o in outcomes), [o.record for o in outcomes]
            if clock.t in keep:  # the same sim time renders the same page again
                got = [await client.get(f"{base}/replica/{i}/metrics") for i in range(REPLICAS)]
                pages[clock.t] = [r.text for r in got]
        end = clock.t
        clock.t = end + 30.0  # the intervals ending at ``end`` close once a step passes it
        truth = [(await client.get(f"{base}/replica/{i}/truth")).text for i in range(REPLICAS)]
    store.close()
    rows = [[json.loads(line) for line in t.splitlines() if line] for t in truth]
    return Run(settings, end, pages, rows)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    # Ends on the 15 s grid a little before now, so "now" queries still see the data.
    start = math.floor(time.time() / 15.0) * 15.0 - 5.0 * ROUNDS
    end = start + 5.0 * ROUNDS
    clock = SteppedClock(start)
    overloaded = load("healthy", {"workload.rate_multiplier": 3.0})
    fleet = Fleet(
        load("healthy"), replicas=REPLICAS, seed=5, clock=clock, replica_scenarios={BAD: overloaded}
    )
    server = SimHTTPServer(("127.0.0.1", 0), fleet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        settings = _settings(base, tmp_path_factory.mktemp("fleet") / "pw.db")
        yield asyncio.run(_scrape(settings, clock, {end - WINDOW, end}))
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def api(run: Run) -> Iterator[str]:
    svc = ServiceThread(create_app(run.settings, start_jobs=False))
    try:
        yield svc.url + "/api/v1"
    finally:
        svc.close()


def _latest_fleet_window(api: str, end: float) -> dict[str, Any]:
    r = httpx.get(
        f"{api}/fleets/{quote(MODEL)}/windows",
        params={"start": end - 15, "end": end, "window": WINDOW, "step": 15},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    (w,) = r.json()
    assert w["end"] == end and w["start"] == end - WINDOW
    return dict(w)


def _summed_buckets(pages: list[str]) -> dict[float, float]:
    """Cumulative TTFT bucket counts by ``le``, summed over the replicas' pages."""
    out: dict[float, float] = {}
    for text in pages:
        for fam in text_string_to_metric_families(text):
            if fam.name != TTFT:
                continue
            for s in fam.samples:
                if s.name == TTFT + "_bucket":
                    le = float(s.labels["le"])
                    out[le] = out.get(le, 0.0) + s.value
    return out


def test_fleet_p99_is_histogram_quantile_of_the_summed_bucket_increases(run: Run, api: str) -> None:
    w = _latest_fleet_window(api, run.end)
    before, after = (
        _summed_buckets(run.pages[run.end - WINDOW]),
        _summed_buckets(run.pages[run.end]),
    )
    les = sorted(after)
    increase = [after[le] - before.get(le, 0.0) for le in les]
    bounds = [le for le in les if math.isfinite(le)]
    for label, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        expected = histogram_quantile(q, bounds, increase)
        assert expected.value is not None
        assert w[f"ttft_{label}"] == pytest.approx(expected.value, rel=1e-9), label
    assert w["ttft_count"] == pytest.approx(increase[-1])
    # Not the mean of the replicas' p99s: the overloaded replica dominates the tail.
    p99s = [r["ttft_p99"] for r in w["replicas"]]
    assert w["ttft_p99"] != pytest.approx(sum(p99s) / len(p99s), rel=0.05)
    running = sum(r["running_avg"] for r in w["replicas"])
    assert w["running_avg"] == pytest.approx(running)
    assert w["kv_max"] == max(r["kv_max"] for r in w["replicas"])


def test_the_overloaded_replica_is_flagged_with_evidence_and_hints(run: Run, api: str) -> None:
    w = _latest_fleet_window(api, run.end)
    imb = w["imbalance"]
    assert imb["flagged"] == [f"r{BAD}"]
    kinds = {o["kind"] for o in imb["outliers"] if o["replica"] == f"r{BAD}"}
    assert {"load", "queue", "ttft"} <= kinds
    queue = next(o for o in imb["outliers"] if o["kind"] == "queue")
    assert "r0, r1 have none and spare slots" in queue["summary"]
    load_ev = next(o for o in imb["outliers"] if o["kind"] == "load")["evidence"]
    share = next(e for e in load_ev if e["signal"] == "running_share")
    assert share["value"] > 0.5 and share["threshold"] == pytest.approx(1 / 3)
    assert [h["id"] for h in imb["hints"]][:2] == ["lb_least_request", "sticky_sessions"]
    assert "prefix_routing" in [h["id"] for h in imb["hints"]]
    # The fleet diagnosis sits beside each replica's own.
    by_replica = {r["target"]: r for r in w["replicas"]}
    assert by_replica[f"r{BAD}"]["flagged"] and not by_replica["r0"]["flagged"]
    assert by_replica[f"r{BAD}"]["diagnosis"]["class"] == "queue_bound"
    assert {by_replica[t]["diagnosis"]["class"] for t in ("r0", "r1")} == {"healthy"}
    assert w["diagnosis"]["class"] == "queue_bound"


def _truth_in(rows: list[dict[str, Any]], start: float, end: float) -> dict[str, int]:
    picked = [r for r in rows if r["t0"] >= start and r["t1"] <= end]
    assert len(picked) == int((end - start) / 5)
    return {k: sum(r[k] for r in picked) for k in ("ttft_ok", "first_tokens", "tpot_ok")}


def test_attainment_per_replica_and_fleet_matches_the_simulators_count(run: Run, api: str) -> None:
    w = _latest_fleet_window(api, run.end)
    truths = [_truth_in(rows, run.end - WINDOW, run.end) for rows in run.truth]
    fleet = {k: sum(t[k] for t in truths) for k in truths[0]}
    parts = [(w, fleet)] + [
        (next(r for r in w["replicas"] if r["target"] == f"r{i}"), truths[i])
        for i in range(REPLICAS)
    ]
    for window, truth in parts:
        (block,) = window["slo"]
        ttft = block["counts"]["objectives"]["ttft"]
        assert ttft["total"] == truth["first_tokens"]
        # 2 s lies inside vLLM's (1 s, 2.5 s] bucket: the count is bracketed by its edges.
        assert ttft["good_min"] <= truth["ttft_ok"] <= ttft["good_max"], window["target"]
    bad_ttft = parts[BAD + 1][0]["slo"][0]["attainment"]["ttft"]
    assert bad_ttft < 0.5 < parts[1][0]["slo"][0]["attainment"]["ttft"]


def test_slo_api_and_gauges_carry_the_fleets_budget(run: Run, api: str) -> None:
    (status,) = httpx.get(f"{api}/slos", timeout=30).json()
    assert status["slo"] == "default" and status["fleet"] == MODEL
    assert status["replicas"] == [f"r{i}" for i in range(REPLICAS)]
    assert status["burn_rates"]["5m"] > 14.4  # the overloaded third misses TTFT
    # Minutes of a 30-day period: no share left yet, the burn so far and its projection.
    budget = status["budget"]
    assert budget["early"] and budget["remaining"] is None and budget["burn_rate"] > 1.0
    assert budget["text"].startswith("burn ") and "projected: " in budget["text"]
    assert set(status["per_replica"]) == {f"r{i}" for i in range(REPLICAS)}
    fleets = httpx.get(f"{api}/fleets", timeout=30).json()
    assert [f["name"] for f in fleets] == [MODEL]
    service = Service(run.settings)
    try:
        asyncio.run(service.stream_metrics_job())
    finally:
        asyncio.run(service.stop())
    text = generate_latest(service.metrics.registry).decode()
    labels = f'fleet="{MODEL}",model_name="{MODEL}"'
    assert f'phasewatch_slo_attainment_ratio{{{labels},objective="ttft",slo="default"}}' in text
    # early in the period: the period's burn, no budget-left gauge (tests/test_budget_early.py)
    assert f'phasewatch_slo_burn_rate{{{labels},slo="default",window="period"}}' in text
    assert "phasewatch_error_budget_remaining_ratio{" not in text


def test_replica_set_flags_become_per_replica_overrides() -> None:
    ns = argparse.Namespace(
        replica_set=["2:workload.rate_multiplier=3", "2:engine.max_num_seqs=64", "0:x.y=a"]
    )
    assert replica_overrides_from(ns) == {
        2: {"workload.rate_multiplier": 3, "engine.max_num_seqs": 64},
        0: {"x.y": "a"},
    }
    for bad in ("workload.rate_multiplier=3", "a:x=1", "1:x"):
        with pytest.raises(SimConfigError):
            replica_overrides_from(argparse.Namespace(replica_set=[bad]))


def _running(text: str) -> float:
    for fam in text_string_to_metric_families(text):
        if fam.name == "vllm:num_requests_running":
            return float(sum(s.value for s in fam.samples))
    raise AssertionError("no vllm:num_requests_running on the page")


def test_the_sim_command_overloads_only_the_replica_it_is_told_to() -> None:
    cmd = [
        sys.executable,
        "-m",
        "app.cli",
        "sim",
        "--scenario",
        "healthy",
        "--replicas",
        "3",
        "--replica-set",
        f"{BAD}:workload.rate_multiplier=3",
        "--port",
        "0",
        "--speed",
        "40",
    ]
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=root)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip().removeprefix("listening on ")
        assert proc.stdout.readline().startswith("replicas: ")
        assert proc.stdout.readline().strip() == f"replica {BAD} sets workload.rate_multiplier=3"

        def bad_replica_busier() -> list[float] | None:
            running = [
                _running(httpx.get(f"{url}/replica/{i}/metrics", timeout=5).text)
                for i in range(REPLICAS)
            ]
            return running if running[BAD] > 2 * max(running[:BAD]) else None

        wait_for(bad_replica_busier, 20.0, "the 3x replica running over twice the others")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


def test_a_replica_scenario_must_name_an_existing_replica() -> None:
    with pytest.raises(ValueError, match="does not exist"):
        Fleet(load("healthy"), replicas=2, replica_scenarios={2: load("healthy")})
