"""Parity with a real Prometheus (the Debian ``prometheus`` package, 2.x).

One run, about 20 s: a simulated vLLM (``kv_pressure``, from sim time 30 s, so the
KV pool fills during the run) is served in lockstep — its clock moves 0.5 sim-s per
Prometheus scrape (every 0.5 s), and every page is kept — so:

* Prometheus stores page ``k`` at its scrape time ``s_k``; phasewatch reads those raw
  samples back through the Prometheus source (``mode: raw``);
* phasewatch also scrapes the simulator itself (``/page/k``: the same bytes) and stamps
  page ``k`` with ``s_k``.

Alignment (docs/prometheus.md, "Parity with Prometheus"): for pages ``a < b`` Prometheus evaluates
``histogram_quantile(q, sum by (le) (increase(x_bucket[W])))`` at ``s_b`` with ``W =
s_b - s_a`` exactly (milliseconds). Prometheus 2.x ranges are closed, so the range holds
samples ``s_a .. s_b`` and both edges coincide with samples: ``increase()`` then does not
extrapolate at all (the factor is exactly 1, and its per-bucket "don't extrapolate below
zero" clamp cannot apply). phasewatch's window ``(s_a, s_b]`` sums the deltas ending in
it, i.e. page ``b`` minus page ``a``: the same bucket increases. The quantiles must agree
to 1e-9 relative (in practice they are bit-identical).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from app.config import SourceConfig
from app.diagnose import diagnose
from app.model import IntervalDelta, Snapshot
from app.scrape.client import fetch
from app.sources.process import PageFeed
from app.sources.prometheus import History, PrometheusSource
from app.windows.aggregate import window, windows
from tests.test_prom_support import Lockstep, prometheus
from tests.waiting import wait_for

PAGES = 36
DT = 0.5  # sim seconds per page = Prometheus' scrape interval, so rates are real
FAMILIES = {
    "ttft": "vllm:time_to_first_token_seconds",
    "itl": "vllm:inter_token_latency_seconds",
}
QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))


@dataclass
class Run:
    url: str
    target: str
    model: str
    raw: History
    ranged: History
    direct: list[IntervalDelta]
    direct_snaps: list[Snapshot]
    times: list[float]
    range_grid_start: float


async def _read_all(url: str, lock: Lockstep, host: str) -> Run:
    src = PrometheusSource(SourceConfig(kind="prometheus", url=url, mode="raw", lag=0))
    try:
        now = time.time()
        raw = await src.read(now - 120, now)
        hist = raw[host]
        times = [s.ts for s in hist.snapshots]
        assert len(times) == PAGES, f"Prometheus stored {len(times)} of {PAGES} pages"
        grid_start = times[0] + DT / 2
        ranged = await src.read(grid_start, times[-1] + DT / 2, step=DT, mode="range")
    finally:
        await src.aclose()
    # phasewatch scrapes the simulator itself: page k, stamped with Prometheus' s_k.
    feed = PageFeed(host, f"http://{host}/page/0")
    direct: list[IntervalDelta] = []
    snaps: list[Snapshot] = []
    async with httpx.AsyncClient() as client:
        for k, ts in enumerate(times):
            result = await fetch(client, f"http://{host}/page/{k}", timeout=5, max_bytes=10**8)
            outcome = feed(ts, result)
            assert outcome.snapshot is not None, outcome.record
            snaps.append(outcome.snapshot)
            direct.extend(outcome.deltas)
    (model,) = hist.models()
    return Run(url, host, model, raw, ranged, direct, snaps, times, grid_start)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    tmp = tmp_path_factory.mktemp("parity")
    lock = Lockstep("kv_pressure", seed=1, t0=30.0, dt=DT, pages=PAGES)
    with lock.serve() as host:
        scrape = [
            {
                "job_name": "vllm",
                "metrics_path": "/prometheus",
                "scrape_interval": "500ms",
                "scrape_timeout": "450ms",
                "static_configs": [{"targets": [host]}],
            }
        ]
        with prometheus(tmp, scrape=scrape) as url:
            assert lock.done.wait(60), f"Prometheus scraped only {len(lock.pages)} pages"
            wait_committed(url, host)  # the last page's samples are committed after its scrape
            yield asyncio.run(_read_all(url, lock, host))


def wait_committed(url: str, host: str, timeout: float = 30.0) -> None:
    """Wait until Prometheus answers queries with every page's samples."""
    query = f'count_over_time(vllm:num_requests_running{{instance="{host}"}}[10m])'

    def committed() -> bool:
        got = httpx.get(url + "/api/v1/query", params={"query": query}, timeout=10).json()
        counts = [float(r["value"][1]) for r in got["data"]["result"]]
        return bool(counts) and min(counts) >= PAGES

    wait_for(committed, timeout, f"Prometheus committing all {PAGES} pages", every=0.1)


def _rel(a: float, b: float) -> float:
    return 0.0 if a == b else abs(a - b) / max(abs(a), abs(b))


def test_prometheus_stored_exactly_the_pages_phasewatch_scraped(run: Run) -> None:
    stored = run.raw[run.target].snapshots
    for k, (mine, theirs) in enumerate(zip(run.direct_snaps, stored, strict=True)):
        a, b = mine.streams[run.model], theirs.streams[run.model]
        assert a.histograms == b.histograms, f"page {k}"
        assert a.counters == b.counters and a.gauges == b.gauges, f"page {k}"


def test_quantiles_equal_histogram_quantile_of_increase(run: Run) -> None:
    async def compare() -> tuple[int, float]:
        src = PrometheusSource(SourceConfig(kind="prometheus", url=run.url))
        compared, worst = 0, 0.0
        try:
            for b in range(2, PAGES, 3):
                for span in (1, 4, 12, b):
                    a = b - span
                    if a < 0:
                        continue
                    s_a, s_b = run.times[a], run.times[b]
                    ms = round((s_b - s_a) * 1000)
                    kw = {"start": s_a, "end": s_b, "target": run.target, "model_name": run.model}
                    from_prom = window(run.raw[run.target].deltas, **kw)
                    from_scrape = window(run.direct, **kw)
                    for signal, family in FAMILIES.items():
                        for label, q in QUANTILES:
                            expr = (
                                f"histogram_quantile({q}, sum by (le) "
                                f"(increase({family}_bucket[{ms}ms])))"
                            )
                            theirs = await src.api.scalar(expr, s_b)
                            mine = from_prom.quantiles[signal][label].value
                            direct = from_scrape.quantiles[signal][label].value
                            assert mine == direct
                            if theirs is None or math.isnan(theirs):
                                assert mine is None, (expr, s_b)
                                continue
                            assert mine is not None, (expr, s_b, theirs)
                            err = _rel(mine, theirs)
                            assert err <= 1e-9, (expr, s_b, mine, theirs)
                            worst = max(worst, err)
                            compared += 1
        finally:
            await src.aclose()
        return compared, worst

    compared, worst = asyncio.run(compare())
    print(f"\nparity: {compared} quantiles compared, max relative error {worst:.3g}")
    assert compared >= 150


def test_prometheus_source_gives_the_same_diagnoses_as_direct_scraping(run: Run) -> None:
    length = 10 * DT
    kw = {"target": run.target, "model_name": run.model}
    span = {"start": run.times[0], "end": run.times[-1], "length": length, "step": DT}
    from_prom = [diagnose(w) for w in windows(run.raw[run.target].deltas, **span, **kw)]
    from_scrape = [diagnose(w) for w in windows(run.direct, **span, **kw)]
    assert [d.to_dict() for d in from_prom] == [d.to_dict() for d in from_scrape]
    classes = {d.cls.value for d in from_prom}
    print(f"\ndiagnoses over {len(from_prom)} windows: {sorted(classes)}")
    assert "kv_pressure" in classes


def test_query_range_mode_gives_the_same_classes(run: Run) -> None:
    """query_range at 0.5 s, offset by 0.25 s from the scrapes: each point is one page;
    windows ending on that grid hold the same pages as direct windows ending there."""
    length = 10 * DT
    kw = {"target": run.target, "model_name": run.model}
    start = run.range_grid_start
    end = run.times[-1] + DT / 2
    span = {"start": start, "end": end, "length": length, "step": DT}
    ranged = windows(run.ranged[run.target].deltas, **span, **kw)
    direct = windows(run.direct, **span, **kw)
    assert len(ranged) == len(direct) > 0
    for r, d in zip(ranged, direct, strict=True):
        assert r.histograms == d.histograms and r.increases == d.increases
        assert diagnose(r).label == diagnose(d).label, r.end
