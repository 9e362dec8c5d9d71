"""The probe source: one probe in flight at a time, bounded concurrency, answers stored as
a cumulative stream whose deltas count every answer once — across a restart too — and
the scraped target's page followed beside it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from app.config import TargetConfig
from app.model import Histogram, Snapshot, StreamSnapshot
from app.probeconfig import ProbeConfig, ProbingConfig
from app.scrape.probe_fetch import ProbeResult
from app.sources.base import TargetState
from app.sources.combined import CombinedSource
from app.sources.probe import ProbeSource
from app.sources.probe_tally import ProbeTally
from app.store.sqlite import ScrapeRecord, Store
from app.windows.aggregate import window

EVENTS = b'data: {"choices": [{"index": 0, "text": " a"}]}\n\ndata: [DONE]\n\n'


def _probe(name: str = "p", **kw: object) -> ProbeConfig:
    base = {"kind": "openai_completions", "url": "http://probe.test", "model": "m",
            "interval": 1, "timeout": 1}  # fmt: skip
    return ProbeConfig(name=name, **{**base, **kw})  # type: ignore[arg-type]


class Slow:
    """A server that answers after ``delay`` seconds and counts what runs at once."""

    def __init__(self, delay: float = 0.05) -> None:
        self.delay = delay
        self.now = 0
        self.most = 0
        self.prompts: list[str] = []

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.now += 1
        self.most = max(self.most, self.now)
        self.prompts.append(json.loads(request.content)["prompt"])
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.now -= 1
        return httpx.Response(200, content=EVENTS)


def test_concurrency_is_bounded_and_each_probe_runs_once_at_a_time() -> None:
    server = Slow()
    probes = [_probe(f"p{i}") for i in range(4)]
    store = Store(":memory:")

    async def go() -> list[int]:
        src = ProbeSource(probes, ProbingConfig(concurrency=2), store, max_bytes=10_000,
                          transport=httpx.MockTransport(server))  # fmt: skip
        try:
            await src.read_round(1000.0)  # starts all four; two at a time
            await src.read_round(1000.5)  # none due, none started again
            tasks = [pr.task for pr in src.probes.values() if pr.task is not None]
            await asyncio.gather(*tasks)
            await asyncio.sleep(0)
            sent = len(server.prompts)
            outcomes = await src.read_round(1001.0)  # stores four, starts the due again
            return [len(outcomes), sent]
        finally:
            await src.aclose()

    assert asyncio.run(go()) == [4, 4]
    assert server.most == 2
    assert len(set(server.prompts)) > 1  # random words: no two probes share a prefix


def test_every_answer_is_counted_once_across_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "pw.db"
    transport = httpx.MockTransport(Slow(0.0))

    async def rounds(n: int) -> None:
        store = Store(db)
        src = ProbeSource([_probe()], ProbingConfig(), store, max_bytes=10_000,
                          transport=transport)  # fmt: skip
        try:
            for _ in range(n):
                await src.run_once(timeout=10)
        finally:
            await src.aclose()
            store.close()

    asyncio.run(rounds(2))
    asyncio.run(rounds(3))  # a restart: the stored snapshot is the baseline
    store = Store(db)
    deltas = store.intervals("p", "m", 0, 4e9)
    w = window(deltas, start=0, end=4e9, target="p", model_name="m")
    store.close()
    assert w.increases["probe_attempts"] == 5
    assert w.observations["probe_ttft"] == 5
    assert not w.reset


def test_a_probe_of_a_scraped_target_follows_its_page() -> None:
    bounds = (0.1, 1.0)
    state = {"n": 0}

    def linked() -> dict[str, TargetState]:
        n = state["n"] = state["n"] + 10
        hist = Histogram(bounds, (float(n), float(n), float(n)), 0.05 * n, float(n))
        page = StreamSnapshot(
            "m", histograms={"ttft": hist}, counters={"generation_tokens": 5.0 * n}
        )
        rec = ScrapeRecord("srv", 4e9, True, None, None, 0.01, 100, 0)
        cfg = TargetConfig.model_construct(name="srv", url="http://x/metrics", labels={})
        return {"srv": TargetState(cfg, Snapshot("srv", 4e9, {"m": page}), rec)}

    store = Store(":memory:")

    async def go() -> None:
        src = ProbeSource([_probe(target="srv")], ProbingConfig(), store, max_bytes=10_000,
                          linked=linked, transport=httpx.MockTransport(Slow(0.0)))  # fmt: skip
        try:
            for _ in range(3):
                await src.run_once(timeout=10)
        finally:
            await src.aclose()

    asyncio.run(go())
    w = window(store.intervals("p", "m", 0, 4e9), start=0, end=4e9, target="p", model_name="m")
    # The first reading is the baseline; then 10 first tokens and 50 tokens each time.
    assert w.observations["probe_page_ttft"] == 20
    assert w.increases["probe_page_generation_tokens"] == 100
    assert w.increases["probe_page_up"] == 3  # the page's last scrape was good, and recent


def _hist(n: float, bounds: tuple[float, ...] = (0.1, 1.0)) -> Histogram:
    return Histogram(bounds, (n, n, n), 0.05 * n, n)


def test_a_page_that_restarts_or_appears_counts_as_increase_does() -> None:
    tally = ProbeTally("m")
    tally.add_page(StreamSnapshot("m", counters={"generation_tokens": 500.0}))  # no TTFT yet
    tally.add_page(StreamSnapshot("m", histograms={"ttft": _hist(40)},
                                  counters={"generation_tokens": 600.0}))  # fmt: skip
    s = tally.stream()
    # The histogram that appeared is a baseline, not 40 first tokens at once.
    assert "probe_page_ttft" not in s.histograms or s.histograms["probe_page_ttft"].count == 0
    assert s.counters["probe_page_generation_tokens"] == 100
    tally.add_page(StreamSnapshot("m", histograms={"ttft": _hist(45)},
                                  counters={"generation_tokens": 650.0}))  # fmt: skip
    tally.add_page(StreamSnapshot("m", histograms={"ttft": _hist(3)},
                                  counters={"generation_tokens": 20.0}))  # a restart  # fmt: skip
    s = tally.stream()
    assert s.histograms["probe_page_ttft"].count == 5 + 3
    assert s.counters["probe_page_generation_tokens"] == 100 + 50 + 20


def test_a_failed_answer_counts_as_an_attempt_and_its_kind() -> None:
    tally = ProbeTally("m")
    tally.add(ProbeResult(0.0, 1.0, ok=False, error_kind="timeout"), page_up=True)
    tally.add(ProbeResult(0.0, 0.1, ok=False, error_kind="refused"), page_up=False)
    c = tally.stream().counters
    assert (c["probe_attempts"], c["probe_failures"], c["probe_timeouts"]) == (2, 2, 1)
    assert c["probe_page_up"] == 1


@pytest.mark.parametrize("kind", ["openai_completions", "openai_chat", "ollama_generate"])
def test_a_probe_is_a_target_with_its_kind_and_server_as_labels(kind: str) -> None:
    src = ProbeSource([_probe(kind=kind, target="srv", labels={"team": "a"})], ProbingConfig(),
                      Store(":memory:"), max_bytes=1)  # fmt: skip
    state = src.targets()["p"]
    assert state.config.labels == {"team": "a", "probe": kind, "probe_of": "srv"}
    assert state.config.url.startswith("http://probe.test/")
    asyncio.run(src.aclose())


class _Fixed:
    """A source with fixed targets whose round returns (or raises) what it is given."""

    def __init__(self, names: list[str], result: object) -> None:
        cfg = TargetConfig.model_construct
        self._targets = {n: TargetState(cfg(name=n, url="http://x", labels={})) for n in names}
        self.result = result
        self.rounds = 0
        self.closed = False

    def targets(self) -> dict[str, TargetState]:
        return self._targets

    async def read_round(self, now: float) -> list[object]:
        if isinstance(self.result, BaseException):
            raise self.result
        return [self.result]

    async def aclose(self) -> None:
        self.closed = True


def test_combined_sources_read_as_one_and_a_failing_probe_round_spares_the_scrapes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    scraped, probes = _Fixed(["a", "b"], "scrape"), _Fixed(["p"], RuntimeError("bug"))
    both = CombinedSource([scraped, probes])  # type: ignore[list-item]
    assert list(both.targets()) == ["a", "b", "p"] and len(both.targets()) == 3
    assert both.targets()["p"].config.name == "p" and "zz" not in both.targets()
    assert asyncio.run(both.read_round(1.0)) == ["scrape"]  # the scrapes' outcomes
    assert "_Fixed round failed: RuntimeError" in caplog.text
    both.rounds += 1
    assert scraped.rounds == 1
    asyncio.run(both.aclose())
    assert scraped.closed and probes.closed
