"""End to end: the service scrapes a simulated P/D fleet and probes its router.

The fleet's KV links are slow from the start (0.8 GB/s for ~1 GB/s of KV a decode
instance must receive): its decode pool turns transfer-bound in the API and the UI, its
roles come from one configured label and the pages, and the client's TTFT is the
probe's, measured through the router, while the probe's answers come in time."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.config import load_settings
from app.main import create_app
from app.sim.pd_scenario import load_pd
from app.sim.pd_server import PDHTTPServer, start_pd_server
from tests.dash_calls import dash_callback
from tests.test_e2e import ServiceThread
from tests.waiting import wait_for


@pytest.fixture
def fleet() -> Iterator[tuple[PDHTTPServer, str]]:
    sc = load_pd("pd_slow_transfer", {"pd.transfer.bandwidth_gb_s": 0.8})
    server, _thread, url = start_pd_server(sc, port=0)
    yield server, url
    server.shutdown()
    server.server_close()


def _settings(url: str, model: str, tmp: Path) -> Any:
    names = ["prefill-0", "prefill-1", "decode-0", "decode-1"]
    targets: list[dict[str, Any]] = [
        {"name": n, "url": f"{url}/replica/{i}/metrics"} for i, n in enumerate(names)
    ]
    targets[2]["labels"] = {"role": "decode"}  # the others' roles come from their pages
    return load_settings(
        None,
        {
            "targets": targets,
            "scrape": {"interval": 1, "timeout": 1},
            "window": {"length": 10, "step": 2},
            "alerts": {"evaluation_interval": 1},
            "storage": {"path": str(tmp / "pw.db")},
            "probes": [
                {
                    "name": "pd-client",
                    "kind": "openai_completions",
                    "url": url,
                    "model": model,
                    "interval": 2,
                    "timeout": 2,
                    "max_tokens": 4,
                }
            ],
        },
    )


def _fleet_panel(base: str, model: str) -> str:
    """What the fleet page's refresh callback renders (found by its output, asked as the
    browser asks it)."""
    values: dict[tuple[str, str], Any] = {
        ("fleet-select", "value"): model,
        ("fleet-range", "value"): "1h",
        ("fleet-tick", "n_intervals"): 0,
        ("fleet-model", "data"): {"model": model},
    }
    return dash_callback(base, "fleet-pools.children", values, "fleet-tick.n_intervals")


def test_a_pd_fleet_is_judged_by_pool_with_the_probes_client_ttft(
    fleet: tuple[PDHTTPServer, str], tmp_path: Path
) -> None:
    server, url = fleet
    model = server.live.model
    svc = ServiceThread(create_app(_settings(url, model, tmp_path)))
    seen: dict[str, Any] = {}
    try:
        base = svc.url

        def look() -> bool:
            fleets = httpx.get(base + "/api/v1/fleets", timeout=10).json()
            pd = next((f["latest"]["pd"] for f in fleets if f["model_name"] == model), None)
            if pd is None:
                return False
            seen["roles"] = {r["replica"]: (r["role"], r["source"]) for r in pd["roles"]}
            client = pd["client_ttft"]
            if client["measured"]:
                seen["measured"] = client
            decode = pd["pools"].get("decode", {})
            if decode.get("class") == "transfer_bound":
                seen["decode"] = decode
            return "measured" in seen and "decode" in seen

        wait_for(look, timeout=90)
        panel = _fleet_panel(base, model)
    finally:
        svc.close()

    assert seen["roles"] == {
        "prefill-0": ("prefill", "page"),
        "prefill-1": ("prefill", "page"),
        "decode-0": ("decode", "label"),
        "decode-1": ("decode", "page"),
    }
    measured = seen["measured"]
    assert measured["probes"] == ["pd-client"] and measured["probe_mean"] > 0
    decode = seen["decode"]
    assert decode["sub_cause"] == "slow_transfer"
    assert decode["hints"][0]["id"] == "transfer-backend"
    assert decode["transfer"]["transfer_transfers"] > 0
    # The page, on its latest window (whatever its class by then): the pools side by
    # side, the client's TTFT and the transfer panel.
    for words in ("Prefill pool", "Decode pool", "What a client waits", "KV transfer"):
        assert words in panel, words
