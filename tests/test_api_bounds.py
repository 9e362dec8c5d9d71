"""Numbers from outside are finite and bounded: the API answers 422 (never 500, never a
request that does not end), lists are paged, and the UI says which URL time it cannot show.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from fastapi import FastAPI

from app.config import load_settings
from app.diagnose import DiagnosisConfig
from app.fleet.aggregate import FleetKey
from app.fleet.imbalance import ImbalanceThresholds
from app.main import create_app
from app.model import HistogramDelta, IntervalDelta
from app.read.fleet import fleet_views
from app.read.points import resolution
from app.read.windows import LATEST_TIME, MAX_WINDOWS, Cancelled, QueryError, check_windows
from app.ui import timerange
from tests.test_alerts_api import ApiClient, serving

B = (0.1, 0.5, 1.0)
WEEK = 7 * 86400.0
TARGETS = ("a", "b", "c", "d", "e")
MODELS = ("m1", "m2", "m3")


def delta(target: str, model: str, end: float) -> IntervalDelta:
    return IntervalDelta(
        target=target,
        model_name=model,
        start=end - 5.0,
        end=end,
        histograms={"ttft": HistogramDelta(B, {0: 3.0, 2: 1.0}, 0.9, 4.0)},
        counters={"prompt_tokens": 100.0},
        gauges={"running": 2.0, "waiting": 0.0, "kv_usage": 0.1},
    )


@pytest.fixture
def api(tmp_path: Path) -> Iterator[ApiClient]:
    """The app (no jobs) with five targets; target ``a`` has three streams of a minute."""
    settings = load_settings(
        None,
        {
            "targets": [{"name": t, "url": f"http://127.0.0.1:9/{t}"} for t in TARGETS],
            "storage": {"path": str(tmp_path / "pw.db")},
        },
    )
    with serving(create_app(settings, start_jobs=False)) as client:
        now = time.time()
        deltas = [delta("a", m, now - 60 + 5 * k) for m in MODELS for k in range(12)]
        service(client.app).store.write_round([], deltas, [])
        yield client


def service(app: FastAPI) -> Any:
    return app.state.service


# -- item 1: unbounded work from one GET ----------------------------------------------------


def test_windows_refuses_a_window_longer_than_the_history_kept(api: ApiClient) -> None:
    for window in ("1e300", "1e10"):
        r = api.get("/api/v1/windows", params={"target": "a", "window": window})
        assert r.status_code == 422, r.text
        assert "longer than the 604800 s of history kept" in r.text
    r = api.get("/api/v1/fleets/m1/windows", params={"window": "1e300"})
    assert r.status_code == 422 and "history kept" in r.text, r.text


def test_a_window_of_1e300_s_is_refused_before_start_plus_length_cancels() -> None:
    with pytest.raises(QueryError, match="longer than"):
        check_windows(0.0, 3600.0, 1e300, 15.0)
    with pytest.raises(QueryError, match="longer than the 604800 s"):
        check_windows(0.0, 3600.0, WEEK + 1, 15.0, max_length=WEEK)
    assert check_windows(0.0, 3600.0, WEEK, 15.0, max_length=WEEK) == 240


def test_windows_refuses_more_windows_than_the_cap_over_all_streams_before_any_work(
    api: ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[str] = []
    store = service(api.app).store
    real = store.intervals

    def intervals(target: str, model: str, start: float, end: float) -> list[IntervalDelta]:
        reads.append(model)
        return list(real(target, model, start, end))

    monkeypatch.setattr(store, "intervals", intervals)
    end = 1_764_403_200.0
    params = {"target": "a", "start": end - 4000 * 15, "end": end, "step": 15}
    r = api.get("/api/v1/windows", params=params)  # 4,000 windows x 3 streams
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert f"more than {MAX_WINDOWS:,} windows per request" in detail
    assert "(12,000 asked" in detail and "raise step or narrow the range" in detail
    assert reads == []  # refused before a single read
    one = api.get("/api/v1/windows", params={**params, "model": "m1"})
    assert one.status_code == 200 and len(one.json()) == 4000


def test_a_day_of_15_s_windows_of_one_stream_is_still_served(api: ApiClient) -> None:
    end = 1_764_403_200.0
    r = api.get(
        "/api/v1/windows",
        params={"target": "a", "model": "m1", "start": end - 86400, "end": end, "step": 15},
    )
    assert r.status_code == 200, r.text
    assert len(r.json()) == 5760


def test_the_fleet_windows_cap_counts_every_replica(api: ApiClient) -> None:
    store = service(api.app).store
    now = time.time()
    store.write_round([], [delta(t, "m1", now - 30 + 5 * k) for t in "bc" for k in range(6)], [])
    end = 1_764_403_200.0
    params = {"start": end - 4000 * 15, "end": end, "step": 15}  # 4,000 x 3 replicas
    r = api.get("/api/v1/fleets/m1/windows", params=params)
    assert r.status_code == 422 and "(12,000 asked" in r.text, r.text
    ok = api.get("/api/v1/fleets/m1/windows", params={**params, "step": 60})
    assert ok.status_code == 200 and len(ok.json()) == 1000


def test_a_step_finer_than_a_millisecond_is_refused(api: ApiClient) -> None:
    # 100 windows, under the cap, on a grid no Unix time can tell apart
    params = {"target": "a", "start": 0, "end": "1e-298", "step": "1e-300"}
    r = api.get("/api/v1/windows", params=params)
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["query", "step"]


def test_a_windows_request_whose_client_has_gone_stops_between_streams(
    api: ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client disconnects while the first stream is read: the second is never read,
    and the worker has stopped by the time the app answers (499)."""
    app, loop = api.app, api.loop
    store = service(app).store
    real = store.intervals
    reads: list[str] = []
    entered, told_gone = threading.Event(), threading.Event()

    def intervals(target: str, model: str, start: float, end: float) -> list[IntervalDelta]:
        reads.append(model)
        if len(reads) == 1:
            entered.set()
            assert told_gone.wait(10), "the route never asked whether the client was there"
            # the route runs on the loop: this no-op runs once it has acted on the
            # disconnect and awaits this worker again
            asyncio.run_coroutine_threadsafe(asyncio.sleep(0), loop).result(10)
        return list(real(target, model, start, end))

    monkeypatch.setattr(store, "intervals", intervals)
    gone = asyncio.Event()
    requested = False
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await gone.wait()
        told_gone.set()
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    query = urlencode({"target": "a", "window": 60, "step": 15})
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/api/v1/windows",
        "raw_path": b"/api/v1/windows",
        "root_path": "",
        "query_string": query.encode(),
        "headers": [(b"host", b"test")],
        "client": ("127.0.0.1", 50000),
        "server": ("test", 80),
    }

    async def go() -> None:
        call = asyncio.ensure_future(app(scope, receive, send))
        assert await asyncio.to_thread(entered.wait, 10)
        gone.set()
        await asyncio.wait_for(call, 10)

    loop.run_until_complete(go())
    assert len(reads) == 1, reads
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 499


class _Source:
    """A delta source that counts reads and cancels the request at the first one."""

    def __init__(self, cancel: threading.Event) -> None:
        self.cancel = cancel
        self.reads = 0

    def intervals(
        self, target: str, model_name: str, start: float, end: float
    ) -> list[IntervalDelta]:
        self.reads += 1
        self.cancel.set()
        return []


def test_fleet_windows_stop_between_replicas_once_cancelled() -> None:
    cancel = threading.Event()
    source = _Source(cancel)
    with pytest.raises(Cancelled):
        fleet_views(
            source,
            FleetKey("m"),
            ["r1", "r2", "r3"],
            start=0.0,
            end=3600.0,
            length=60.0,
            step=15.0,
            config=DiagnosisConfig(),
            thresholds=ImbalanceThresholds(),
            cancel=cancel,
        )
    assert source.reads == 1


# -- item 9: non-finite floats are a 422 -----------------------------------------------------


def _float_params(app: FastAPI) -> list[tuple[str, str]]:
    """(path, query parameter) of every GET route's float query parameter (OpenAPI)."""
    out = []
    for path, ops in app.openapi()["paths"].items():
        for p in ops.get("get", {}).get("parameters", []):
            schema = p["schema"]
            types = {s.get("type") for s in schema.get("anyOf", [schema])}
            if p["in"] == "query" and "number" in types:
                out.append((path, p["name"]))
    return out


def test_every_float_query_parameter_refuses_nan_and_infinities(api: ApiClient) -> None:
    found = _float_params(api.app)
    assert ("/api/v1/slos/{name}/history", "start") in found
    assert ("/api/v1/diagnoses", "end") in found and ("/api/v1/alerts/history", "start") in found
    assert ("/api/v1/windows", "window") in found
    assert ("/api/v1/fleets/{name}/windows", "step") in found
    for path, param in found:
        url = path.replace("{name}", "m1" if "fleets" in path else "default")
        for bad in ("nan", "inf", "-inf", "NaN", "1e400"):
            r = api.get(url, params={"target": "a", param: bad})
            assert r.status_code == 422, (url, param, bad, r.text)
            assert r.json()["detail"][0]["loc"] == ["query", param], r.text


def test_slo_history_with_a_nan_start_is_a_422_not_a_500(api: ApiClient) -> None:
    for bad in ("nan", "-inf", "inf"):
        r = api.get("/api/v1/slos/default/history", params={"start": bad})
        assert r.status_code == 422, r.text
        assert "finite number" in r.text


def test_times_after_year_9999_or_before_1970_are_refused(api: ApiClient) -> None:
    for path in ("/api/v1/windows", "/api/v1/diagnoses", "/api/v1/alerts/history"):
        for bad in ("1e300", str(LATEST_TIME + 1), "-1"):
            r = api.get(path, params={"target": "a", "end": bad})
            assert r.status_code == 422, (path, bad, r.text)


# -- item 3: lists that grow with the fleet are paged -----------------------------------------


def test_targets_are_paged_with_the_total_in_x_total_count(api: ApiClient) -> None:
    everything = api.get("/api/v1/targets")
    assert [t["name"] for t in everything.json()] == list(TARGETS)
    assert everything.headers["X-Total-Count"] == "5"
    page = api.get("/api/v1/targets", params={"limit": 2, "offset": 1})
    assert [t["name"] for t in page.json()] == ["b", "c"]
    assert page.headers["X-Total-Count"] == "5"
    assert api.get("/api/v1/targets", params={"offset": 10}).json() == []
    for bad in ({"limit": 0}, {"limit": 10001}, {"offset": -1}, {"limit": "1e300"}):
        assert api.get("/api/v1/targets", params=bad).status_code == 422, bad


def test_every_list_that_grows_with_the_fleet_reports_its_total(api: ApiClient) -> None:
    for path in ("/api/v1/fleets", "/api/v1/alerts", "/api/v1/silences", "/api/v1/slos"):
        r = api.get(path, params={"limit": 1})
        assert r.status_code == 200, (path, r.text)
        total = int(r.headers["X-Total-Count"])
        assert len(r.json()) == min(1, total), path
    fleets = api.get("/api/v1/fleets", params={"limit": 1, "offset": 1})
    assert fleets.headers["X-Total-Count"] == "3"  # m1, m2, m3 of target a
    assert [f["model_name"] for f in fleets.json()] == ["m2"]


# -- item 10: UI URLs with times it cannot show ------------------------------------------------


def test_url_times_out_of_range_are_refused_with_the_parameter_named() -> None:
    q = {"from": "1764403200", "to": "2025-11-29 09:00"}
    assert timerange.url_times(q, "from", "to") == (1764403200.0, 1764403200.0 + 3600)
    assert timerange.url_times({}, "at") == (None,)
    with pytest.raises(timerange.RangeError, match=r"^time out of range: to=1e300$"):
        timerange.url_times({"from": "0", "to": "1e300"}, "from", "to")
    with pytest.raises(timerange.RangeError, match=r"^time out of range: at=-5$"):
        timerange.url_times({"at": "-5"}, "at")
    with pytest.raises(timerange.RangeError, match=r"^not a time: at=nan$"):
        timerange.url_times({"at": "nan"}, "at")
    with pytest.raises(timerange.RangeError, match="time out of range"):
        timerange.parse_time("1e300")  # a custom range typed into the page, too


def _page_text(api: ApiClient, path: str, search: str) -> str:
    body = {
        "output": "page.children",
        "outputs": {"id": "page", "property": "children"},
        "inputs": [
            {"id": "url", "property": "pathname", "value": path},
            {"id": "url", "property": "search", "value": search},
        ],
        "changedPropIds": ["url.pathname", "url.search"],
        "state": [],
    }
    r = api.post("/ui/_dash-update-component", json=body)
    assert r.status_code == 200, r.text
    return r.text


@pytest.mark.parametrize(
    ("path", "search", "message"),
    [
        ("/ui/targets/a", "?model=m1&to=1e300&from=0", "time out of range: to=1e300"),
        ("/ui/targets/a", "?at=1e300", "time out of range: at=1e300"),
        ("/ui/fleets/m1", "?at=1e300", "time out of range: at=1e300"),
        ("/ui/incident", "?from=nan&to=5", "not a time: from=nan"),
    ],
)
def test_a_page_url_with_a_time_out_of_range_shows_the_message(
    api: ApiClient, path: str, search: str, message: str
) -> None:
    text = _page_text(api, path, search)
    assert message in text and "page-error" in text


def test_a_page_url_with_a_time_in_range_still_renders(api: ApiClient) -> None:
    text = _page_text(api, "/ui/targets/a", f"?model=m1&at={int(time.time()) - 30}")
    assert "page-error" not in text and "target-graph" in text


def test_a_ui_range_of_centuries_is_still_at_most_the_budget_of_windows() -> None:
    length, step = resolution(0.0, LATEST_TIME, length=60, step=15, budget=2000)
    assert LATEST_TIME / step <= 2000 and length == step
    assert resolution(0, 7 * 86400, length=60, step=15) == (600, 600)  # unchanged below


def test_an_answer_over_10_mb_is_refused_with_how_to_ask() -> None:
    from fastapi import HTTPException

    from app.api.params import MAX_ANSWER_BYTES, json_answer

    assert json_answer(b"[" + b"0" * (MAX_ANSWER_BYTES - 2) + b"]").status_code == 200
    with pytest.raises(HTTPException) as info:
        json_answer(b"[" + b"0" * MAX_ANSWER_BYTES + b"]")
    assert info.value.status_code == 422 and "raise step" in str(info.value.detail)


# -- issue 40: an answer whose size is known is refused before it is built --------------------

LONG_MODEL = "M" * 50_000  # stored before the label limits, or read from a Prometheus


def test_windows_whose_model_name_makes_the_answer_over_10_mb_are_refused_before_any_work(
    api: ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc = service(api.app)
    end = time.time()
    svc.store.write_round([], [delta("b", LONG_MODEL, end - 60 + 5 * k) for k in range(12)], [])
    reads: list[str] = []
    real, real_rollups = svc.store.intervals, svc.store.rollups

    def intervals(*args: Any) -> list[IntervalDelta]:
        reads.append("intervals")
        return list(real(*args))

    def rollups(*args: Any) -> Any:
        reads.append("rollups")
        return real_rollups(*args)

    monkeypatch.setattr(svc.store, "intervals", intervals)
    monkeypatch.setattr(svc.store, "rollups", rollups)
    # An hour of 15 s windows: 240 x (50 kB + the fields) is 12.3 MB at the least.
    r = api.get("/api/v1/windows", params={"target": "b", "step": 15, "end": end})
    assert r.status_code == 422, r.text
    assert r.json()["detail"].startswith("the answer would be at least 12.")
    assert "over the 10 MB limit: raise step or narrow the range" in r.text
    assert reads == [] and len(svc.window_cache) == 0  # nothing read, built or kept
    ok = api.get("/api/v1/windows", params={"target": "b", "step": 900, "end": end})
    assert ok.status_code == 200 and len(ok.json()) == 4
    assert {w["model_name"] for w in ok.json()} == {LONG_MODEL}
    r = api.get(f"/api/v1/fleets/{LONG_MODEL}/windows", params={"step": 15, "end": end})
    assert r.status_code == 422 and "at least 12." in r.text, r.text[:200]


def test_the_fleet_list_is_refused_past_10_mb_before_or_while_it_is_built(
    api: ApiClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.api.routes import fleet as route

    built: list[str] = []
    real = route.fleet_view

    def fleet_view(store: Any, key: FleetKey, *args: Any, **kwargs: Any) -> Any:
        built.append(key.model_name)
        return real(store, key, *args, **kwargs)

    monkeypatch.setattr(route, "fleet_view", fleet_view)
    everything = api.get("/api/v1/fleets").content
    assert len(everything) > 3000
    # A cap under the answer's size: refused by the fleet that crosses it.
    monkeypatch.setattr(route, "MAX_ANSWER_BYTES", len(everything) // 2)
    built.clear()
    r = api.get("/api/v1/fleets")
    assert r.status_code == 422 and "ask for fewer fleets (limit)" in r.text, r.text
    assert built == ["m1", "m2"]  # the one that crossed it, and none after
    assert api.get("/api/v1/fleets", params={"limit": 1}).status_code == 200
    # A model_name that alone makes it too big: refused before any fleet is computed.
    service(api.app).store.write_round([], [delta("b", LONG_MODEL, time.time() - 5)], [])
    monkeypatch.setattr(route, "MAX_ANSWER_BYTES", 40_000)
    built.clear()
    r = api.get("/api/v1/fleets")
    assert r.status_code == 422 and "the answer would be at least 0.1 MB" in r.text, r.text
    assert built == []
