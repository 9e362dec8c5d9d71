"""The twin's engine settings from what the page shows (issue #43 item 5): max_num_seqs
seen as the running gauge pinned while requests wait, and the page's cache_config_info
(its KV pool) used by every caller of the shared twin (headroom, the hints' effects)."""

from __future__ import annotations

import dataclasses
import math
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.diagnose.config import DiagnosisConfig
from app.diagnose.server import ServerSettings
from app.model import Derived, GaugeStats, Window
from app.read.headroom import stream_headroom
from app.read.review import run as review_run
from app.read.twincache import TwinCache, bucket_end, fitted, page_info
from app.read.whatif import from_scrapes
from app.sim.record import record
from app.sim.scenario import load
from app.sources.recording import read_scrapes, record_into
from app.store.sqlite import Store
from app.twin.fit import Twin, fit, pinned_running

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
# queue_overload's pool (an L40S at gpu_memory_utilization 0.9, Llama 3.1 8B).
PAGE_BLOCKS = 12254


# -- max_num_seqs from the running gauge (constructed windows) -------------------------


def _tile(
    i: int,
    running: tuple[float, float],
    waiting: float,
    *,
    kv_max: float | None = 0.3,
    preemptions: float = 0.0,
    capacity: float | None = None,
    edges: tuple[float, float] | None = None,
) -> Window:
    avg, top = running
    first, last = edges if edges is not None else (None, None)
    queue = GaugeStats(waiting, waiting, last, first)
    gauges = {"running": GaugeStats(avg, top), "waiting": queue}
    if capacity is not None:
        gauges["waiting_capacity"] = GaugeStats(capacity, capacity, last, first)
    return Window(
        "t",
        "m",
        30.0 * i,
        30.0 * (i + 1),
        {},
        {},
        {},
        {"preemptions": preemptions},
        {},
        gauges,
        {},
        30.0,
        6,
        derived=Derived(
            running_avg=avg,
            waiting_avg=waiting,
            waiting_capacity_avg=capacity,
            kv_usage_avg=None if kv_max is None else kv_max * 0.9,
            kv_usage_max=kv_max,
        ),
    )


def test_running_pinned_with_requests_waiting_is_the_cap() -> None:
    tiles = [
        _tile(0, (20.5, 31.0), 0.2),  # filling up: no queue yet, says nothing
        _tile(1, (32.0, 32.0), 24.0),
        _tile(2, (31.8, 32.0), 90.0),  # a sample between a finish and the next admission
        _tile(3, (32.0, 32.0), 148.0),
    ]
    assert pinned_running(tiles) == 32


def test_a_window_where_the_queue_formed_or_drained_says_nothing() -> None:
    """incident's spike: the batch fills to 128 within a window whose queue grew from
    none to 180 (running 121.5 on average there), then stays at 128 while it waits."""
    tiles = [
        _tile(0, (28.3, 37.0), 0.0, edges=(0.0, 0.0)),
        _tile(1, (121.5, 128.0), 51.0, edges=(0.0, 180.0)),
        _tile(2, (128.0, 128.0), 189.0, edges=(120.0, 260.0)),
        _tile(3, (128.0, 128.0), 338.0, edges=(260.0, 400.0)),
        _tile(4, (97.0, 128.0), 30.0, edges=(90.0, 0.0)),  # drained: left out too
    ]
    assert pinned_running(tiles) == 128
    # Waiting throughout, yet below the cap: something else holds the batch.
    below = _tile(5, (110.0, 112.0), 40.0, edges=(35.0, 42.0))
    assert pinned_running([*tiles, below]) is None


@pytest.mark.parametrize(
    ("tiles", "why"),
    [
        ([_tile(0, (32.0, 32.0), 0.5), _tile(1, (32.0, 32.0), 0.0)], "nothing waits"),
        ([_tile(0, (32.0, 32.0), 10.0), _tile(1, (30.0, 33.0), 0.0)], "ran above it once"),
        ([_tile(0, (31.0, 32.0), 10.0), _tile(1, (32.0, 32.0), 10.0)], "not held at it"),
        ([_tile(0, (32.0, 32.0), 10.0), _tile(1, (48.0, 48.0), 10.0)], "two values"),
        ([_tile(0, (31.5, 31.5), 10.0)], "not an integer"),
        # The KV pool holds the batch: nearly full, or preempting — even where the count
        # happens to stand still for a window.
        ([_tile(0, (48.0, 48.0), 10.0, kv_max=0.97)], "KV nearly full"),
        ([_tile(0, (48.0, 48.0), 10.0, kv_max=0.6, preemptions=3.0)], "preempting"),
        ([_tile(0, (48.0, 48.0), 10.0, kv_max=None)], "KV usage not on the page"),
        # Waiting, but none of it for capacity (deferred: e.g. a grammar being compiled).
        ([_tile(0, (32.0, 32.0), 10.0, capacity=0.0)], "nothing waits for capacity"),
    ],
)
def test_no_cap_is_read_where_the_page_does_not_show_one(tiles: list[Window], why: str) -> None:
    assert pinned_running(tiles) is None, why


def test_a_kv_limited_stretch_does_not_hide_a_pinned_one() -> None:
    tiles = [
        _tile(0, (32.0, 32.0), 10.0),
        _tile(1, (27.4, 31.0), 40.0, kv_max=0.98, preemptions=2.0),  # left out
        _tile(2, (32.0, 32.0), 12.0),
    ]
    assert pinned_running(tiles) == 32


# -- the precedence, on a queue-bound simulator recording ------------------------------


@pytest.fixture(scope="module")
def queued(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """queue_overload with 24 slots (not its 32), 150 s."""
    overrides = {"engine.max_num_seqs": 24}
    seqs = load("queue_overload", overrides).phases[0].config.engine.max_num_seqs
    assert seqs == 24
    path = tmp_path_factory.mktemp("settings") / "queued"
    return record("queue_overload", path, duration=150, seed=3, overrides=overrides), seqs


def test_a_queue_bound_recording_gives_its_max_num_seqs(queued: tuple[Path, int]) -> None:
    rec, seqs = queued
    twin = fit(from_scrapes(read_scrapes(rec)))
    assert twin.engine.max_num_seqs == seqs
    assert (
        twin.sources["max_num_seqs"] == f"inferred: running pinned at {seqs} with requests waiting"
    )
    assert not any(w.startswith("max_num_seqs") for w in twin.warnings)
    # The page's pool is used as it is.
    assert twin.engine.num_gpu_blocks == PAGE_BLOCKS
    assert twin.sources["num_gpu_blocks"] == "cache_config_info"


def test_configured_then_the_page_then_what_it_shows(queued: tuple[Path, int]) -> None:
    rec, seqs = queued
    span = from_scrapes(read_scrapes(rec))
    configured = fit(dataclasses.replace(span, server=ServerSettings(max_num_seqs=64)))
    assert configured.engine.max_num_seqs == 64
    assert configured.sources["max_num_seqs"] == "configured"
    assert any(
        f"configured as 64 but the running count sat at {seqs}" in w for w in configured.warnings
    )
    # A page whose cache_config_info carries it (not vLLM's today) is used before what
    # the running gauge shows; the configured value before both.
    page = dataclasses.replace(span, info={**span.info, "max_num_seqs": "40"})
    from_page = fit(page)
    assert from_page.engine.max_num_seqs == 40
    assert from_page.sources["max_num_seqs"] == "cache_config_info"
    both = dataclasses.replace(page, server=ServerSettings(max_num_seqs=64))
    assert fit(both).engine.max_num_seqs == 64


def test_a_kv_limited_server_keeps_the_default_with_its_warning(tmp_path: Path) -> None:
    """kv_pressure: the KV pool holds the batch (usage near 1, preemptions), so the
    running count says nothing of max_num_seqs."""
    rec = record("kv_pressure", tmp_path / "kv", duration=120, seed=2)
    span = from_scrapes(read_scrapes(rec))
    assert pinned_running(span.tiles) is None
    twin = fit(span)
    assert twin.sources["max_num_seqs"].startswith("assumed vLLM default")
    assert any("max_num_seqs not known" in w for w in twin.warnings)


# -- the page's KV pool for every caller of the shared twin ----------------------------


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, float]]:
    """A store holding 330 s of steady traffic as target r0 (more than the 300 s of
    history a twin needs), ending before ``now``'s 5-minute bucket ends (the twin's
    span), its snapshots carrying the page's pool. Steady: a growing queue's headroom
    needs no twin (app.read.headroom)."""
    root = tmp_path_factory.mktemp("stored")
    now = time.time()
    start = math.floor((bucket_end(now) - 350) / 5) * 5
    rec = record("healthy", root / "r0", duration=330, seed=5, start_unix=start)
    store = Store(root / "pw.db")
    record_into(store, rec, "r0")
    try:
        yield store, now
    finally:
        store.close()


@pytest.fixture
def twins(monkeypatch: pytest.MonkeyPatch) -> list[Twin]:
    """The twins the shared cache fits, kept here; their replays (seconds of CPU) are
    not run: a fit without its calibration is an error answer."""
    seen: list[Twin] = []

    def calibrate(twin: Twin, *_: Any, **__: Any) -> Any:
        seen.append(twin)
        raise ValueError("not calibrated in this test")

    monkeypatch.setattr("app.read.twincache.calibrate", calibrate)
    return seen


def test_the_page_info_is_the_latest_stored_snapshots(stored: tuple[Store, float]) -> None:
    store, _ = stored
    assert page_info(store, "r0", MODEL)["num_gpu_blocks"] == str(PAGE_BLOCKS)
    assert page_info(store, "r0", "other") == {} and page_info(store, "nope", MODEL) == {}


def test_the_headroom_route_fits_at_the_pages_pool(
    stored: tuple[Store, float], twins: list[Twin], monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.api.routes import headroom as route

    store, now = stored
    monkeypatch.setattr(route, "time", types.SimpleNamespace(time=lambda: now))
    body = route.target_headroom("r0", store, DiagnosisConfig(), TwinCache(), None)
    assert body.error == "not calibrated in this test"
    assert len(twins) == 1
    assert twins[0].engine.num_gpu_blocks == PAGE_BLOCKS
    assert twins[0].sources["num_gpu_blocks"] == "cache_config_info"
    fleet = route.fleet_headroom_route(MODEL, store, DiagnosisConfig(), TwinCache())
    assert [r.target for r in fleet.replicas] == ["r0"]
    assert twins[1].engine.num_gpu_blocks == PAGE_BLOCKS


def test_a_caller_without_the_info_gets_the_pages_from_the_cache(
    stored: tuple[Store, float], twins: list[Twin]
) -> None:
    """The UI's headroom and effects pass no info (or an empty one): the service's cache
    finds the page's; without it, the pool is an estimate far from the page's."""
    store, now = stored
    config = DiagnosisConfig()
    bare = TwinCache()
    stream_headroom(store.intervals, "r0", MODEL, now=now, config=config, cache=bare)
    assert twins[-1].engine.num_gpu_blocks != PAGE_BLOCKS
    assert twins[-1].sources["num_gpu_blocks"].startswith("estimated")
    service = TwinCache(pages=lambda t, m: page_info(store, t, m))
    ui = TwinCache(shared=lambda: service)
    stream_headroom(store.intervals, "r0", MODEL, now=now, config=config, cache=ui)
    assert twins[-1].engine.num_gpu_blocks == PAGE_BLOCKS
    fitted(store.intervals, "r0", MODEL, now=now, config=config, cache=ui, info={})
    assert len(twins) == 2, "the effects' twin (empty info) is the headroom's"


def test_the_twin_cache_key_has_the_pages_pool(
    stored: tuple[Store, float], twins: list[Twin]
) -> None:
    store, now = stored
    config = DiagnosisConfig()
    cache = TwinCache()
    info = page_info(store, "r0", MODEL)
    other = {**info, "num_gpu_blocks": "18837"}
    for i in (info, other, info):
        fitted(store.intervals, "r0", MODEL, now=now, config=config, cache=cache, info=i)
    assert cache.computed == 2 and len(twins) == 2
    assert [t.engine.num_gpu_blocks for t in twins] == [PAGE_BLOCKS, 18837]
    keys = [k for k in cache.entries if k[0] == "twin"]
    assert len(keys) == 2 and keys[0] != keys[1]


def test_the_review_prices_at_the_pages_info(monkeypatch: pytest.MonkeyPatch) -> None:
    """A review's findings are priced at the page's info as of the window's end."""
    seen: dict[str, Any] = {}

    def priced(d: Any, intervals: Any, *, config: Any, info: Any = None) -> Any:
        seen["info"] = info
        return d

    monkeypatch.setattr(review_run, "priced", priced)
    snap = types.SimpleNamespace
    hist = snap(
        snapshots=[
            snap(ts=10.0, streams={MODEL: snap(info={"num_gpu_blocks": "1"})}),
            snap(ts=20.0, streams={MODEL: snap(info={"num_gpu_blocks": "2"})}),
        ],
        deltas=[],
    )
    price = review_run._pricer({"r0": hist}, DiagnosisConfig())  # type: ignore[arg-type]
    price(snap(target="r0", model_name=MODEL, end=15.0))  # type: ignore[arg-type]
    assert seen["info"] == {"num_gpu_blocks": "1"}
