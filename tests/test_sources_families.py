"""Reading a Prometheus at scale: one query per metric family for every target, a few
in flight, the answers read in order — the number of queries does not grow with the
targets (``httpx.MockTransport``)."""

from __future__ import annotations

import asyncio
import re
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest

from app.config import SourceConfig
from app.scrape.signals import COUNTER_SOURCES, GAUGE_SOURCES, HISTOGRAM_SOURCES
from app.sources import prometheus as prom
from app.sources.promapi import PromAPI, PrometheusError, Series
from app.sources.prometheus import PrometheusSource
from app.sources.prompages import PageSet, family_regexes, name_regex


def _names() -> list[str]:
    out = []
    for table in (HISTOGRAM_SOURCES, GAUGE_SOURCES, COUNTER_SOURCES):
        for families in table.values():
            for family in families:
                base = family.partition("{")[0]
                parts = ["_bucket", "_sum", "_count"] if table is HISTOGRAM_SOURCES else [""]
                out += [base + p for p in parts]
    return [
        *out,
        "vllm:request_success_total",
        "vllm:cache_config_info",
        "sglang:num_requests_total",
    ]


def test_each_name_read_is_in_exactly_one_family_query() -> None:
    families = [re.compile(rx) for rx in family_regexes()]
    # One per histogram family, then one per engine (vLLM, SGLang) of the others.
    assert len(families) == len({f for fs in HISTOGRAM_SOURCES.values() for f in fs}) + 2
    every = re.compile(name_regex())
    for name in _names():
        engine, _, rest = name.partition(":")
        for spelling in (name, f"{engine}_{rest}"):
            assert sum(bool(f.fullmatch(spelling)) for f in families) == 1, spelling
            assert every.fullmatch(spelling)


class Fleet:
    """A Prometheus holding ``targets`` targets of one page each; records the queries
    and how many were in flight at once."""

    def __init__(self, targets: int) -> None:
        self.targets = targets
        self.queries: list[str] = []
        self.in_flight = 0
        self.most = 0
        self.fail_on: str | None = None

    def series(self, pattern: re.Pattern[str], t: float) -> list[dict[str, Any]]:
        out = []
        for i in range(self.targets):
            labels = {"instance": f"vllm-{i}", "model_name": "m", "engine": "0"}
            for name, extra, value in (
                ("vllm:num_requests_running", {}, 3.0),
                ("vllm:time_to_first_token_seconds_bucket", {"le": "1.0"}, 2.0 + t),
                ("vllm:time_to_first_token_seconds_bucket", {"le": "+Inf"}, 4.0 + t),
                ("vllm:time_to_first_token_seconds_count", {}, 4.0 + t),
                ("vllm:time_to_first_token_seconds_sum", {}, 1.5 + t),
            ):
                if pattern.fullmatch(name):
                    metric = {"__name__": name, **labels, **extra}
                    out.append({"metric": metric, "values": [[t, repr(value)]]})
        return out

    async def handler(self, request: httpx.Request) -> httpx.Response:
        form = {k: v[0] for k, v in parse_qs(request.content.decode()).items()}
        query = form["query"]
        self.queries.append(query)
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await asyncio.sleep(0.001)
            if self.fail_on is not None and self.fail_on in query:
                return httpx.Response(503, text="overloaded")
            names = re.search(r'__name__=~"([^"]*)"', query)
            t = float(form["end"])
            result = [] if names is None else self.series(re.compile(names.group(1)), t)
            return httpx.Response(
                200, json={"status": "success", "data": {"resultType": "matrix", "result": result}}
            )
        finally:
            self.in_flight -= 1


def _read(fleet: Fleet, start: float, end: float) -> prom.History:
    config = SourceConfig(kind="prometheus", url="http://prom:9090", selector='{job="vllm"}')
    client = httpx.AsyncClient(transport=httpx.MockTransport(fleet.handler))
    src = PrometheusSource(config, PromAPI("http://prom:9090", client=client))

    async def go() -> prom.History:
        try:
            return await src.read(start, end, step=5.0, mode="range")
        finally:
            await client.aclose()

    return asyncio.run(go())


def test_a_round_sends_one_query_per_family_whatever_the_targets() -> None:
    small, large = Fleet(2), Fleet(300)
    got = _read(small, 100.0, 100.0)
    _read(large, 100.0, 100.0)
    families = len(family_regexes())
    assert len(small.queries) == len(large.queries) == families + 1  # and ``up``
    assert all('job="vllm"' in q for q in small.queries)
    assert 1 < large.most <= prom.QUERY_CONCURRENCY
    snap = got["vllm-1"].snapshots[0]
    ttft = snap.streams["m"].histograms["ttft"]
    assert snap.streams["m"].gauges["running"] == 3.0
    assert (ttft.count, ttft.sum) == (104.0, 101.5)


def test_a_failed_family_query_fails_the_read_and_stops_the_others() -> None:
    fleet = Fleet(3)
    fleet.fail_on = "iteration_tokens_total"
    with pytest.raises(PrometheusError, match="503"):
        _read(fleet, 100.0, 100.0)
    assert len(fleet.queries) < len(family_regexes())


def test_answers_of_one_family_in_parts_and_spellings_make_one_page() -> None:
    pages = PageSet()
    labels = {"instance": "a", "model_name": "m"}
    pages.add(
        [
            Series({"__name__": "vllm_num_requests_running", **labels}, [(1.0, 9.0)]),
            Series({"__name__": "vllm:num_requests_running", **labels}, [(1.0, 1.0)]),
            Series({"__name__": "vllm:num_requests_running", **labels}, [(2.0, 2.0)]),
        ]
    )
    pages.add([Series({"__name__": "vllm:num_requests_waiting", **labels}, [(1.0, 5.0)])])
    built = dict(pages.drain())
    assert sorted(built["a"]) == [1.0, 2.0]
    page = {s.name: s.value for s in built["a"][1.0]}
    assert page == {"vllm:num_requests_running": 1.0, "vllm:num_requests_waiting": 5.0}
