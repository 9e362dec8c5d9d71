"""The live server: lazily advanced replicas on /metrics and /replica/{i}/metrics."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.sim.exposition import CONTENT_TYPE
from app.sim.scenario import load
from app.sim.server import Fleet, SimHTTPServer, start_server
from tests.waiting import wait_for


@pytest.fixture
def fleet() -> Iterator[tuple[SimHTTPServer, str]]:
    server, thread, url = start_server("incident", port=0, replicas=3, seed=1, speed=50.0)
    yield server, url
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def test_single_replica_serves_metrics_in_text_format(tmp_path: Path) -> None:
    server, thread, url = start_server("healthy", port=0, speed=20.0)
    try:
        r = httpx.get(f"{url}/metrics")
        assert r.status_code == 200
        assert r.headers["content-type"] == CONTENT_TYPE
        assert 'vllm:num_requests_running{engine="0"' in r.text
        assert httpx.get(f"{url}/healthz").text == "ok\n"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_replicas_have_their_own_pages_and_advance_with_the_clock(
    fleet: tuple[SimHTTPServer, str],
) -> None:
    _, url = fleet
    assert httpx.get(f"{url}/metrics").status_code == 404
    assert httpx.get(f"{url}/replica/3/metrics").status_code == 404
    first = httpx.get(f"{url}/replica/2/metrics").text

    def advanced() -> str | None:  # the clock advances the page
        page = httpx.get(f"{url}/replica/2/metrics").text
        return page if page != first else None

    second = wait_for(advanced, 30, "the replica's page advancing")
    other = httpx.get(f"{url}/replica/0/metrics").text
    assert other != second  # seeds differ per replica


def test_truth_endpoint_returns_json_lines(fleet: tuple[SimHTTPServer, str]) -> None:
    _, url = fleet

    def truth_rows() -> list[dict[str, object]]:  # the first 5 s window to close
        r = httpx.get(f"{url}/replica/1/truth")
        return [json.loads(line) for line in r.text.splitlines()]

    rows = wait_for(truth_rows, 30, "a truth row")
    assert rows[0]["class"] in ("healthy", "decode_bound")
    assert rows[0]["t1"] - rows[0]["t0"] == 5.0


def test_cli_prints_the_port_it_listens_on() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "sim", "--scenario", "healthy", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("listening on http://127.0.0.1:")
        url = line.removeprefix("listening on ")
        assert "vllm:kv_cache_usage_perc" in httpx.get(f"{url}/metrics", timeout=5).text
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


def test_replicas_sharing_an_engine_show_its_values_under_their_own_model_name() -> None:
    clock = [1000.0]
    fleet = Fleet(
        load("healthy"), replicas=4, engines=2, model_per_replica=True, clock=lambda: clock[0]
    )
    clock[0] += 30.0
    pages = [fleet.page(i).decode() for i in range(4)]
    served = load("healthy").base.served_model_name
    for i, page in enumerate(pages):
        assert f'model_name="{served}-{i}"' in page
        assert f'model_name="{served}-{(i + 1) % 4}"' not in page
    # replicas 0 and 2 share engine 0: the same page but for the model name
    assert pages[0].replace(f"{served}-0", "m") == pages[2].replace(f"{served}-2", "m")
    assert pages[0].replace(f"{served}-0", "m") != pages[1].replace(f"{served}-1", "m")
    assert fleet.truth(0) == fleet.truth(2)


def test_one_engine_per_replica_by_default_and_engines_bounded() -> None:
    fleet = Fleet(load("healthy"), replicas=3)
    assert fleet.engines == 3
    with pytest.raises(ValueError):
        Fleet(load("healthy"), replicas=3, engines=4)


def test_a_scraper_reuses_its_connection(fleet: tuple[SimHTTPServer, str]) -> None:
    _, url = fleet
    ports = set()
    with httpx.Client() as client:
        for _ in range(3):
            r = client.get(f"{url}/replica/0/metrics")
            assert r.status_code == 200 and r.http_version == "HTTP/1.1"
            stream = r.extensions["network_stream"]
            ports.add(stream.get_extra_info("client_addr")[1])
    assert len(ports) == 1
