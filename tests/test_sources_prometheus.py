"""The Prometheus source without a Prometheus: the HTTP client, the series → snapshots
conversion, chunking, and the service's collection job (``httpx.MockTransport``)."""

from __future__ import annotations

import asyncio
import math
import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest

from app.config import SourceConfig, load_settings
from app.model import Sample
from app.scrape.cache import ParseCache
from app.scrape.parse import parse
from app.scrape.signals import COUNTER_SOURCES, GAUGE_SOURCES, HISTOGRAM_SOURCES
from app.sim.record import record
from app.sources import prometheus as prom
from app.sources.follow import PrometheusFollower
from app.sources.promapi import PromAPI, PrometheusError, Series, parse_matchers, selector
from app.sources.prometheus import (
    PrometheusSource,
    canonical_name,
    history_from_series,
    name_regex,
)
from app.store.sqlite import Store

LABELS = {"instance": "a:8000", "job": "vllm", "model_name": "m", "engine": "0"}


def _series(name: str, points: list[tuple[float, float]], **extra: str) -> Series:
    return Series({"__name__": name, **LABELS, **extra}, points)


# -- names and selectors -------------------------------------------------------------


def test_name_regex_reads_every_normalised_family_in_both_spellings() -> None:
    regex = re.compile(name_regex())
    for table in (HISTOGRAM_SOURCES, GAUGE_SOURCES, COUNTER_SOURCES):
        for families in table.values():
            for family in families:
                names = [family.partition("{")[0]]  # a per-label family: its sample name
                if table is HISTOGRAM_SOURCES:
                    names = [f"{family}_bucket", f"{family}_sum", f"{family}_count"]
                for name in names:
                    engine, _, rest = name.partition(":")
                    assert regex.fullmatch(name), name
                    assert regex.fullmatch(f"{engine}_{rest}"), name
    assert regex.fullmatch("vllm:request_success_total")
    assert regex.fullmatch("sglang_num_requests_total")
    assert not regex.fullmatch("sglang:time_to_first_token_seconds")
    assert not regex.fullmatch("vllm:time_to_first_token_seconds")  # the bare family
    assert not regex.fullmatch("http_requests_total")


def test_canonical_name_turns_openmetrics_spelling_back() -> None:
    assert canonical_name("vllm_num_requests_waiting") == "vllm:num_requests_waiting"
    assert canonical_name("vllm:num_requests_waiting") == "vllm:num_requests_waiting"
    assert canonical_name("sglang_num_queue_reqs") == "sglang:num_queue_reqs"


def test_selector_matchers_are_parsed_and_combined() -> None:
    ms = parse_matchers('{job="vllm", namespace=~"prod-.*",model_name!="x"}')
    assert [m.text() for m in ms] == ['job="vllm"', 'namespace=~"prod-.*"', 'model_name!="x"']
    assert selector("a|b", ms[:1]) == '{__name__=~"a|b", job="vllm"}'
    assert parse_matchers("") == []
    with pytest.raises(ValueError, match="cannot read"):
        parse_matchers("{job=vllm}")
    with pytest.raises(ValueError, match="braces"):
        parse_matchers('job="vllm"')


def test_up_is_queried_without_the_vllm_only_labels() -> None:
    cfg = SourceConfig(
        kind="prometheus", url="http://p:9090", selector='{job="vllm", model_name="m"}'
    )
    src = PrometheusSource(cfg)
    assert src.up_selector == 'up{job="vllm"}'
    assert 'model_name="m"' in src.vllm_selector
    asyncio.run(src.aclose())


# -- the HTTP client -------------------------------------------------------------------


def _api(handler: Any, **kw: Any) -> PromAPI:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return PromAPI("http://prom:9090/", client=client, **kw)


def _ok(result: Any, kind: str = "matrix") -> httpx.Response:
    return httpx.Response(
        200, json={"status": "success", "data": {"resultType": kind, "result": result}}
    )


def test_queries_are_posted_with_auth_and_headers() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return _ok([{"metric": {"__name__": "x"}, "values": [[1.5, "NaN"], [2.5, "+Inf"]]}])

    async def go() -> list[Series]:
        api = _api(handler, bearer_token="tok", headers={"X-Scope-OrgID": "team"})
        return await api.query_range("x", 1.0, 3.0, 1.0)

    (s,) = asyncio.run(go())
    assert math.isnan(s.points[0][1]) and s.points[1][1] == math.inf
    req = seen[0]
    assert req.method == "POST" and req.url.path == "/api/v1/query_range"
    assert req.headers["authorization"] == "Bearer tok"
    assert req.headers["x-scope-orgid"] == "team"
    form = parse_qs(req.content.decode())
    assert form == {"query": ["x"], "start": ["1.000"], "end": ["3.000"], "step": ["1.0"]}

    def basic(request: httpx.Request) -> httpx.Response:
        assert request.headers["authorization"].startswith("Basic ")
        return _ok([], "vector")

    assert asyncio.run(_api(basic, basic_auth=("u", "p")).scalar("x", 1.0)) is None


@pytest.mark.parametrize(
    ("response", "message"),
    [
        (
            httpx.Response(
                400, json={"status": "error", "errorType": "bad_data", "error": "parse error"}
            ),
            "bad_data: parse error",
        ),
        (httpx.Response(502, text="bad gateway"), "HTTP 502"),
        (httpx.Response(200, text="<html>login</html>"), "not a Prometheus API answer"),
    ],
)
def test_api_failures_raise_prometheus_error(response: httpx.Response, message: str) -> None:
    api = _api(lambda request: response)
    with pytest.raises(PrometheusError, match=message):
        asyncio.run(api.query_range("x", 1, 2, 1))


def test_unreachable_prometheus_raises_prometheus_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    with pytest.raises(PrometheusError, match="ConnectError"):
        asyncio.run(_api(handler).query_matrix("x[1m]", 10))


# -- series → snapshots → deltas ---------------------------------------------------------


def _hist_series(name: str, t: float, counts: dict[str, float], total: float) -> list[Series]:
    out = [_series(f"{name}_bucket", [(t, v)], le=le) for le, v in counts.items()]
    out.append(_series(f"{name}_sum", [(t, total)]))
    out.append(_series(f"{name}_count", [(t, counts["+Inf"])]))
    return out


def test_series_become_snapshots_and_deltas_like_a_scrape() -> None:
    fam = "vllm:time_to_first_token_seconds"
    series = [
        *_hist_series(fam, 10.0, {"0.5": 1, "1.0": 2, "+Inf": 2}, 1.0),
        *_hist_series(fam, 15.0, {"0.5": 3, "1.0": 6, "+Inf": 7}, 9.0),
        _series("vllm:num_requests_waiting", [(10.0, 1.0), (15.0, 4.0)]),
        _series("vllm:num_requests_waiting", [(10.0, 2.0), (15.0, 2.0)], engine="1"),
        _series("vllm:num_preemptions_total", [(10.0, 5.0), (15.0, 2.0)]),  # a restart
    ]
    hist = history_from_series(series)["a:8000"]
    assert [s.ts for s in hist.snapshots] == [10.0, 15.0]
    (d,) = hist.deltas
    assert (d.start, d.end, d.model_name) == (10.0, 15.0, "m")
    ttft = d.histograms["ttft"]
    assert ttft.bounds == (0.5, 1.0) and ttft.buckets == {0: 2.0, 1: 2.0, 2: 1.0}
    assert ttft.count == 5.0 and ttft.sum == 8.0
    assert d.gauges["waiting"] == 6.0  # summed over engines
    assert d.counters["preemptions"] == 2.0 and d.reset  # reset: the current value


def test_the_colon_spelling_wins_where_a_target_has_both() -> None:
    series = [
        _series("vllm_num_requests_waiting", [(10.0, 9.0)]),
        _series("vllm:num_requests_waiting", [(10.0, 1.0)]),
        Series(
            {"__name__": "vllm_num_requests_waiting", **LABELS, "instance": "b:1"}, [(10.0, 3.0)]
        ),
    ]
    history = history_from_series(series)
    assert history["a:8000"].snapshots[0].streams["m"].gauges["waiting"] == 1.0
    assert history["b:1"].snapshots[0].streams["m"].gauges["waiting"] == 3.0


def test_failed_scrapes_come_from_up_or_from_gaps_in_the_grid() -> None:
    series = [_series("vllm:num_requests_waiting", [(0.0, 1.0), (10.0, 1.0), (15.0, 1.0)])]
    up = [Series({"__name__": "up", "instance": "a:8000"}, [(0.0, 1), (5.0, 0), (10.0, 1)])]
    assert history_from_series(series, up=up)["a:8000"].failed == [5.0]
    grid = [0.0, 5.0, 10.0, 15.0, 20.0]
    assert history_from_series(series, grid=grid)["a:8000"].failed == [5.0]


def test_history_continues_from_a_previous_snapshot() -> None:
    first = history_from_series([_series("vllm:num_preemptions_total", [(10.0, 5.0)])])
    prev = {"a:8000": first["a:8000"].snapshots[-1]}
    second = history_from_series(
        [_series("vllm:num_preemptions_total", [(15.0, 7.0)])], previous=prev
    )
    (d,) = second["a:8000"].deltas
    assert (d.start, d.counters["preemptions"]) == (10.0, 2.0)


# -- a fake Prometheus holding a simulator recording ----------------------------------------


def _recording_series(folder: Path, instance: str) -> list[Series]:
    by_key: dict[tuple[str, tuple[tuple[str, str], ...]], list[tuple[float, float]]] = {}
    cache = ParseCache()
    for page in sorted(folder.glob("*.prom")):
        ts = float(page.name[: -len(".prom")])
        for s in parse(page.read_text(), cache=cache).samples:
            assert isinstance(s, Sample)
            by_key.setdefault((s.name, s.labels), []).append((ts, s.value))
    return [
        Series({"__name__": name, **dict(labels), "instance": instance, "job": "vllm"}, points)
        for (name, labels), points in by_key.items()
    ]


class FakeProm:
    """Answers query_range (latest sample at or before each step) and raw range selectors,
    with the series whose name matches the selector's ``__name__`` regex."""

    def __init__(self, series: list[Series]) -> None:
        self.series = series
        self.requests: list[dict[str, str]] = []
        self.fail = False

    def handler(self, request: httpx.Request) -> httpx.Response:
        form = {k: v[0] for k, v in parse_qs(request.content.decode()).items()}
        self.requests.append(form)
        if self.fail:
            return httpx.Response(503, text="unavailable")
        query = form["query"]
        names = re.search(r'__name__=~"((?:[^"\\]|\\.)*)"', query)
        chosen = []
        if names is not None:
            pattern = re.compile(names.group(1).replace("\\\\", "\\"))
            chosen = [s for s in self.series if pattern.fullmatch(s.labels["__name__"])]
        if request.url.path.endswith("query_range"):
            start, end, step = (float(form[k]) for k in ("start", "end", "step"))
            steps = [start + k * step for k in range(int((end - start) / step + 1e-9) + 1)]
            result = []
            for s in chosen:
                values = []
                for t in steps:
                    before = [v for ts, v in s.points if ts <= t + 1e-9 and ts > t - 300]
                    if before:
                        values.append([t, repr(before[-1])])
                if values:
                    result.append({"metric": s.labels, "values": values})
            return _ok(result)
        m = re.search(r"\[(\d+)ms\]$", query)
        assert m, query
        t = float(form["time"])
        lo = t - int(m.group(1)) / 1000
        result = [
            {"metric": s.labels, "values": [[ts, repr(v)] for ts, v in s.points if lo <= ts <= t]}
            for s in chosen
        ]
        return _ok([r for r in result if r["values"]])


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Series], float]:
    tmp = tmp_path_factory.mktemp("rec")
    start = 1_800_000_000.0
    folder = record("queue_overload", tmp / "rec", duration=120, seed=3, start_unix=start)
    return _recording_series(Path(folder), "sim:8000"), start


def _source(fake: FakeProm, **cfg: Any) -> PrometheusSource:
    config = SourceConfig(kind="prometheus", url="http://prom:9090", **cfg)
    client = httpx.AsyncClient(transport=httpx.MockTransport(fake.handler))
    return PrometheusSource(config, PromAPI("http://prom:9090", client=client))


def test_raw_and_range_reads_agree_when_steps_hit_the_samples(
    recorded: tuple[list[Series], float], monkeypatch: pytest.MonkeyPatch
) -> None:
    series, start = recorded
    monkeypatch.setattr(prom, "RAW_CHUNK_S", 30.0)
    monkeypatch.setattr(prom, "MAX_STEPS", 7)
    fake = FakeProm(series)
    src = _source(fake)
    raw = asyncio.run(src.read(start, start + 120, mode="raw"))["sim:8000"]
    ranged = asyncio.run(src.read(start, start + 120, step=5.0, mode="range"))["sim:8000"]
    assert len(raw.snapshots) == len(ranged.snapshots) == 25
    assert [d.histograms for d in raw.deltas] == [d.histograms for d in ranged.deltas]
    # One query per metric family for every target, each in chunks (4 of 30 s, of 7 steps).
    families = len(src.family_selectors)
    queries = [r["query"] for r in fake.requests]
    assert sum(q.endswith("ms]") and not q.startswith("up") for q in queries) == 4 * families
    assert sum("start" in r and not r["query"].startswith("up") for r in fake.requests) == (
        4 * families
    )


def test_collector_rounds_store_what_prometheus_holds(
    recorded: tuple[list[Series], float], tmp_path: Path
) -> None:
    series, start = recorded
    fake = FakeProm(series)
    settings = load_settings(
        None,
        {
            "source": {"kind": "prometheus", "url": "http://prom:9090", "lag": 0, "step": 5},
            "window": {"length": 60},
            "storage": {"path": str(tmp_path / "pw.db")},
        },
    )
    store = Store(settings.storage.path)

    async def go() -> None:
        col = PrometheusFollower(
            settings.source,
            settings.targets,
            store,
            length=settings.window.length,
            interval=settings.scrape.interval,
            reader=_source(fake, step=5.0),
        )
        first = await col.read_round(start + 60)
        assert {o.record.target for o in first} == {"sim:8000"}
        targets = col.targets()
        assert "sim:8000" in targets and targets["sim:8000"].last_ok is not None
        second = await col.read_round(start + 120)
        assert all(o.record.ts > start + 60 for o in second)
        fake.fail = True
        assert await col.read_round(start + 130) == []
        assert col.last_error and "503" in col.last_error
        await col.aclose()

    asyncio.run(go())
    (stream,) = store.streams("sim:8000")
    deltas = store.intervals(*stream, start, start + 120)
    assert len(deltas) == 24 and deltas[-1].end == start + 120
    assert sum(d.histograms["ttft"].count for d in deltas if "ttft" in d.histograms) > 0
    store.close()
