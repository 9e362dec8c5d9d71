"""``/api/v1/targets/{name}/headroom`` and ``/api/v1/fleets/{model}/headroom`` on a store
holding the last 20 minutes of simulated replicas."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

import httpx
import pytest

from app.config import load_settings
from app.main import create_app
from app.sim.record import record
from app.sources.recording import record_into
from app.store.sqlite import Store
from tests.test_e2e import ServiceThread

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


class Client:
    def __init__(self, app: object) -> None:
        self.app = app
        self.svc = ServiceThread(app)

    def get(self, path: str) -> httpx.Response:
        # A fleet's headroom fits a twin per replica: minutes of CPU on a busy machine.
        return httpx.get(self.svc.url + path, timeout=300)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    root = tmp_path_factory.mktemp("headroom")
    start = math.floor((time.time() - 1200) / 5) * 5
    store = Store(root / "pw.db")
    for name, seed in (("r0", 1), ("r1", 2)):
        rec = record("queue_overload", root / name, duration=1200, seed=seed, start_unix=start)
        record_into(store, rec, name)
    store.close()
    targets = [
        {"name": n, "url": "http://127.0.0.1:9/metrics", "server": {"max_num_seqs": 32}}
        for n in ("r0", "r1")
    ]
    settings = load_settings(None, {"targets": targets, "storage": {"path": str(root / "pw.db")}})
    c = Client(create_app(settings, start_jobs=False))
    try:
        yield c
    finally:
        c.svc.close()


def test_a_targets_headroom_says_what_breaks_first_and_is_kept(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both asks at one moment: on a busy machine the first answer can take long enough
    # for the wall clock to cross a 5-minute boundary, and the second would be a new span.
    import types

    from app.api.routes import headroom as route

    frozen = time.time()
    monkeypatch.setattr(route, "time", types.SimpleNamespace(time=lambda: frozen))
    resp = client.get("/api/v1/targets/r0/headroom")
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["error"] is None and body["model_name"] == MODEL
    room = body["headroom"]
    assert room["rate_scale"] < 1 and room["limit"] == "queue"
    assert room["text"].startswith("over its SLO now: needs ×")
    assert "(TTFT p99 breaks 2 s above" in room["text"]
    assert body["end"] - body["start"] == 900
    cache = client.app.state.service.twin_cache  # type: ignore[attr-defined]
    computed = cache.computed
    assert client.get("/api/v1/targets/r0/headroom").json() == body
    assert cache.computed == computed, "asked again within 5 minutes: served from the cache"


def test_a_fleets_headroom_is_its_tightest_replicas(client: Client) -> None:
    body = client.get(f"/api/v1/fleets/{MODEL}/headroom").json()
    replicas = {r["target"]: r["headroom"]["rate_scale"] for r in body["replicas"]}
    assert set(replicas) == {"r0", "r1"}
    assert body["headroom"]["headroom"]["rate_scale"] == min(replicas.values())


def test_unknown_streams_are_404(client: Client) -> None:
    assert client.get("/api/v1/targets/nope/headroom").status_code == 404
    assert client.get("/api/v1/targets/r0/headroom?model=other").status_code == 404
    assert client.get("/api/v1/fleets/other/headroom").status_code == 404
