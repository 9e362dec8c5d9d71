"""The simulator's disaggregated prefill/decode fleet: pages, transfer physics, truth."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from app.sim.errors import SimConfigError
from app.sim.exposition import SimCollector, TextWriter, replica_families
from app.sim.pd import PDFleet, pool_truth
from app.sim.pd_record import read_fleet, record_pd
from app.sim.pd_scenario import available_pd, is_pd, load_pd, pd_from_tree
from app.sim.pd_server import start_pd_server

EPOCH = 1764403200.0
NIXL = {
    "vllm:nixl_xfer_time_seconds",
    "vllm:nixl_post_time_seconds",
    "vllm:nixl_bytes_transferred",
    "vllm:nixl_num_descriptors",
    "vllm:nixl_num_failed_transfers",
    "vllm:nixl_num_failed_notifications",
    "vllm:nixl_num_kv_expired_reqs",
    "vllm:nixl_num_notifications_after_expiry",
}


def _families(page: bytes) -> dict[str, list]:  # type: ignore[type-arg]
    return {f.name: f.samples for f in text_string_to_metric_families(page.decode())}


def _value(samples: list, name: str, **labels: str) -> float:  # type: ignore[type-arg]
    return sum(
        s.value
        for s in samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


@pytest.fixture(scope="module")
def healthy() -> PDFleet:
    fleet = PDFleet(load_pd("pd_healthy"), seed=3)
    fleet.advance_to(120.0)
    return fleet


def test_every_shipped_pd_scenario_loads_and_names_its_pools() -> None:
    names = available_pd()
    assert {"pd_healthy", "pd_slow_transfer", "pd_transfer_failures", "pd_kv_expired"} <= set(names)
    for name in names:
        sc = load_pd(name)
        assert is_pd(name) and sc.prefill_replicas >= 1 and sc.decode_replicas >= 1
        assert len(sc.transfers) == len(sc.fleet.phases)
    assert not is_pd("healthy")


def test_pages_carry_the_connector_families_and_only_decode_the_consumer_gauge(
    healthy: PDFleet,
) -> None:
    for rep in healthy.replicas:
        fams = replica_families(rep)
        page = TextWriter(fams, EPOCH).render()
        registry = CollectorRegistry()
        registry.register(SimCollector(fams, EPOCH))
        assert page == generate_latest(registry)  # the fast writer is prometheus_client's
        found = _families(page)
        assert set(found) >= NIXL
        consumer = "vllm:num_requests_kv_fetch_by_stage" in found
        assert consumer == (rep in healthy.decode)
    decode = _families(TextWriter(replica_families(healthy.decode[0]), EPOCH).render())
    stages = {s.labels["stage"] for s in decode["vllm:num_requests_kv_fetch_by_stage"]}
    assert stages == {"waiting_to_start", "in_progress", "completed_waiting"}
    by_source = decode["vllm:prompt_tokens_by_source"]
    external = _value(
        by_source, "vllm:prompt_tokens_by_source_total", source="external_kv_transfer"
    )
    local = _value(by_source, "vllm:prompt_tokens_by_source_total", source="local_compute")
    assert external > 100 * local > 0  # a decode instance computes one token a prompt
    cached = _value(
        decode["vllm:prompt_tokens_cached_by_source"],
        "vllm:prompt_tokens_cached_by_source_total",
        source="p2p",
    )
    assert cached == external


def test_a_transfer_takes_its_bytes_over_the_bandwidth_plus_latency_and_descriptors(
    healthy: PDFleet,
) -> None:
    tr = healthy.sc.transfer_at(60.0)
    for d in healthy.decode:
        c = d.connector
        assert c.xfer_time.count > 50 and c.failed_transfers == 0
        mean_bytes = c.bytes.sum / c.bytes.count
        mean_desc = c.descriptors.sum / c.descriptors.count
        floor = (
            mean_bytes / (tr.bandwidth_gb_s * 1e9) + tr.latency_s + mean_desc * tr.per_descriptor_s
        )
        mean = c.xfer_time.sum / c.xfer_time.count
        assert floor <= mean < 1.5 * floor  # waits behind other transfers on the link, a few
        # One descriptor per block and layer, K and V: 16-token blocks, 32 layers.
        assert mean_desc == pytest.approx(mean_bytes / (16 * 8 * 128 * 2), rel=0.05)
    for p in healthy.prefill:
        assert p.connector.xfer_time.count == 0  # pull mode: counted on the decode side


def test_the_prefill_side_holds_the_kv_until_the_transfer_lands() -> None:
    slow = PDFleet(load_pd("pd_healthy", {"pd.transfer.bandwidth_gb_s": 0.5}), seed=1)
    fast = PDFleet(load_pd("pd_healthy"), seed=1)
    for fleet in (slow, fast):
        fleet.advance_to(90.0)
    held_slow = sum(len(p.held) for p in slow.prefill)
    held_fast = sum(len(p.held) for p in fast.prefill)
    assert held_slow > 10 * max(1, held_fast)
    assert sum(p.kv_usage for p in slow.prefill) > sum(p.kv_usage for p in fast.prefill)


def test_failed_transfers_error_their_requests_on_the_decode_side() -> None:
    fleet = PDFleet(load_pd("pd_healthy", {"pd.transfer.failure_prob": 0.3}), seed=2)
    fleet.advance_to(120.0)
    failed = sum(d.connector.failed_transfers for d in fleet.decode)
    landed = sum(d.connector.xfer_time.count for d in fleet.decode)
    assert 0.2 < failed / (failed + landed) < 0.4
    assert sum(d.metrics.success["error"] for d in fleet.decode) == failed


def test_kv_expires_when_the_decode_pool_picks_requests_up_after_the_lease(
    tmp_path: Path,
) -> None:
    out = record_pd("pd_kv_expired", tmp_path, duration=600, seed=0)
    fleet = read_fleet(out)
    assert fleet is not None and [r["role"] for r in fleet["replicas"]] == [
        "prefill",
        "prefill",
        "decode",
        "decode",
    ]
    rows = {
        r["name"]: [
            json.loads(x) for x in (out / r["name"] / "truth.jsonl").read_text().split("\n") if x
        ]
        for r in fleet["replicas"]
    }
    expired = sum(r["kv_expired"] for name, rs in rows.items() for r in rs if "prefill" in name)
    failed = sum(r["transfer_failed"] for name, rs in rows.items() for r in rs if "decode" in name)
    assert expired > 0 and failed >= expired  # each expired KV is a failed read later
    end = EPOCH + 600.0
    prefill = pool_truth([rows["prefill-0"], rows["prefill-1"]], end - 60, end)
    decode = pool_truth([rows["decode-0"], rows["decode-1"]], end - 60, end)
    assert (prefill.cls, prefill.sub_cause) == ("transfer_bound", "kv_expired")
    assert (decode.cls, decode.sub_cause) == ("transfer_bound", "transfer_failures")
    # Before the surge (at 3 minutes) both pools are healthy.
    before = [pool_truth([rows[a], rows[b]], EPOCH + 100, EPOCH + 160) for a, b in
              (("prefill-0", "prefill-1"), ("decode-0", "decode-1"))]  # fmt: skip
    assert [v.cls for v in before] == ["healthy", "healthy"]


def test_a_slow_link_makes_the_decode_pool_transfer_bound_in_truth(tmp_path: Path) -> None:
    out = record_pd("pd_slow_transfer", tmp_path, duration=600, seed=0)
    rows = [
        [json.loads(x) for x in (out / n / "truth.jsonl").read_text().splitlines()]
        for n in ("decode-0", "decode-1")
    ]
    end = EPOCH + 600.0
    truth = pool_truth(rows, end - 60, end)
    assert (truth.cls, truth.sub_cause) == ("transfer_bound", "slow_transfer")
    assert pool_truth(rows, EPOCH + 200, EPOCH + 260).cls == "healthy"
    client = [json.loads(x) for x in (out / "client.jsonl").read_text().splitlines()]
    assert len(client) == 120 and sum(c["first_tokens"] for c in client) > 3000


def test_the_same_seed_gives_the_same_pages(tmp_path: Path) -> None:
    a = record_pd("pd_healthy", tmp_path / "a", duration=60, seed=5)
    b = record_pd("pd_healthy", tmp_path / "b", duration=60, seed=5)
    for page in sorted((a / "decode-1").glob("*.prom")):
        assert page.read_bytes() == (b / "decode-1" / page.name).read_bytes()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"workload": {"load": 0.5}}, "absolute rate"),
        ({"pd": {"prefill": {"replicas": 0}}}, "at least 1"),
        ({"pd": {"transfer": {"bandwidth": 3}}}, "unknown transfer setting"),
        ({"pd": {"transfer": {"failure_prob": 1.5}}}, "failure_prob"),
        (
            {"phases": [{"at_s": 60, "name": "x", "set": {"pd.decode.replicas": 3}}]},
            "cannot change in a phase",
        ),
    ],
)
def test_bad_pd_scenarios_are_refused_with_the_setting_named(
    change: dict,
    message: str,  # type: ignore[type-arg]
) -> None:
    from app.sim.pd_scenario import _read

    tree = _read("pd_healthy")
    for key, value in change.items():
        if isinstance(value, dict) and isinstance(tree.get(key), dict):
            for k, v in value.items():
                tree[key][k] = {**tree[key].get(k, {}), **v} if isinstance(v, dict) else v
        else:
            tree[key] = value
    with pytest.raises(SimConfigError, match=message):
        pd_from_tree(tree)


@pytest.fixture
def live() -> Iterator[str]:
    server, _thread, url = start_pd_server(load_pd("pd_healthy"), port=0, speed=5.0)
    yield url
    server.shutdown()
    server.server_close()


def test_the_live_fleet_serves_pages_truth_and_answers_through_the_router(live: str) -> None:
    fleet = httpx.get(live + "/fleet", timeout=10).json()
    roles = [(r["name"], r["role"]) for r in fleet["replicas"]]
    assert roles == [
        ("prefill-0", "prefill"),
        ("prefill-1", "prefill"),
        ("decode-0", "decode"),
        ("decode-1", "decode"),
    ]
    page = httpx.get(fleet["replicas"][2]["url"], timeout=10)
    assert page.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert "vllm:num_requests_kv_fetch_by_stage" in page.text
    body = {"model": fleet["model_name"], "prompt": "one two three four", "max_tokens": 5,
            "stream": True}  # fmt: skip
    with httpx.stream("POST", live + "/v1/completions", json=body, timeout=30) as r:
        assert r.status_code == 200
        events = [line for line in r.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "data: [DONE]"
    texts = [json.loads(e[6:])["choices"][0]["text"] for e in events[:-1]]
    assert sum(len(t.split()) for t in texts) == 5
    missing = httpx.post(live + "/v1/completions", json={**body, "model": "other"}, timeout=10)
    assert missing.status_code == 404
    assert httpx.get(live + "/replica/9/metrics", timeout=10).status_code == 404
