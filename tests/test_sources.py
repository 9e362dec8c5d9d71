"""The ``Source`` protocol: a pure per-page transition, recordings read round by round, and
a scrape source whose target list is asked of its discovery every round."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from app.config import TargetConfig, load_settings
from app.model import ErrorKind
from app.scrape.client import FetchResult
from app.sources.base import Source, TargetState
from app.sources.live import ScrapeSource
from app.sources.process import PageFeed, process
from app.sources.recording import Recording, read_scrapes
from app.store.sqlite import Store
from tests.pages import page

# A body that came short of its Content-Length: the client's ``truncated``.
CUT: dict[str, Any] = {"error_kind": ErrorKind.TRUNCATED, "error": "the body ended early"}


def fetched(text: str) -> FetchResult:
    return FetchResult("http://t/metrics", 0.0, 0.01, text=text, nbytes=len(text))


def test_processing_a_page_returns_the_next_state_and_leaves_the_given_one_alone() -> None:
    before = TargetState(TargetConfig(name="a", url="http://a/metrics"))
    after, first = process(before, fetched(page(1)), 100.0)
    assert before.last_ok is None and before.last_record is None
    assert after.last_ok is first.snapshot and after.last_record == first.record
    again, second = process(after, fetched(page(2)), 105.0)
    assert after.last_ok is first.snapshot  # still the state it was
    assert [(d.start, d.end) for d in second.deltas] == [(100.0, 105.0)]
    cut, partial = process(again, fetched(page(3)[:-20]), 110.0)  # cut mid-line: used
    assert partial.record.ok and partial.record.error_kind == "cut_last_line"
    assert cut.last_record == partial.record and cut.last_ok is partial.snapshot
    assert again.last_ok is second.snapshot  # still the state it was
    short, failed = process(again, FetchResult("http://t/metrics", 0.0, 0.01, **CUT), 110.0)
    assert failed.record.error_kind == "truncated" and short.last_record == failed.record
    assert short.last_ok is again.last_ok  # the baseline of the next delta


def _recording(folder: Path, times: Sequence[float]) -> Path:
    folder.mkdir()
    for n, t in enumerate(times, 1):
        (folder / f"{t:.3f}.prom").write_text(page(n))
    (folder / "notes.txt").write_text("not a page")
    return folder


def test_a_recording_is_a_source_whose_rounds_give_the_pages_up_to_now(tmp_path: Path) -> None:
    folder = _recording(tmp_path / "rec", [100.0, 105.0, 110.0, 115.0])
    rec: Source = Recording(folder, "r0")

    async def go() -> list[list[float]]:
        out = []
        for now in (99.0, 107.0, 107.5, 200.0):
            out.append([o.record.ts for o in await rec.read_round(now)])
        await rec.aclose()
        return out

    assert asyncio.run(go()) == [[], [100.0, 105.0], [], [110.0, 115.0]]
    (state,) = rec.targets().values()
    assert state.config.name == "r0" and state.last_record is not None
    assert state.last_record.ts == 115.0 and rec.rounds == 4
    # read whole, the same scrapes
    whole = read_scrapes(folder, "r0")
    assert [r.ts for r in whole.records] == [100.0, 105.0, 110.0, 115.0]
    assert [d.end for d in whole.deltas["llama"]] == [105.0, 110.0, 115.0]


def test_a_page_feed_is_the_process_loop_of_one_target(tmp_path: Path) -> None:
    folder = _recording(tmp_path / "rec", [100.0, 105.0])
    feed = PageFeed("x")
    outcomes = [feed(t, fetched(page(n))) for n, t in enumerate([100.0, 105.0], 1)]
    ours = [d.counters for o in outcomes for d in o.deltas]
    theirs = [d.counters for d in read_scrapes(folder).deltas["llama"]]
    assert ours == theirs and feed.state.last_ok is outcomes[-1].snapshot
    assert Recording(folder).read_until(math.inf)[0].record.target == "rec"


class Changing:
    """A discovery whose answer is set by the test (as file_sd re-reads its file)."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.refreshes = 0
        self._current: tuple[TargetConfig, ...] = ()
        self._set()

    def _set(self) -> None:
        self._current = tuple(TargetConfig(name=n, url=f"http://{n}/metrics") for n in self.names)

    def current(self) -> Sequence[TargetConfig]:
        return self._current

    async def refresh(self, now: float) -> None:
        self.refreshes += 1
        self._set()


def test_the_scrape_source_asks_its_discovery_for_the_targets_every_round(
    tmp_path: Path,
) -> None:
    settings = load_settings(None, {"storage": {"path": str(tmp_path / "pw.db")}})
    served = {"a": 0, "b": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        served[request.url.host] += 1
        return httpx.Response(200, text=page(served[request.url.host]))

    discovery = Changing(["a"])
    store = Store(settings.storage.path)
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    source = ScrapeSource(settings.scrape, discovery, store, client)
    assert list(source.targets()) == ["a"]

    async def go() -> None:
        await source.read_round(100.0)
        discovery.names = ["a", "b"]
        await source.read_round(105.0)
        assert list(source.targets()) == ["a", "b"]
        discovery.names = ["b"]
        await source.read_round(110.0)
        assert list(source.targets()) == ["b"]
        discovery.names = ["b", "a"]  # back again: restored from the store
        await source.read_round(120.0)
        restored = source.targets()["a"]
        assert restored.last_record is not None and restored.last_record.ts == 120.0
        await client.aclose()

    asyncio.run(go())
    assert discovery.refreshes == 4 and served == {"a": 3, "b": 3}
    # a's delta after its return covers the gap since its last stored page (105 s)
    assert [(d.start, d.end) for d in store.intervals("a", "llama", 0, 200)] == [
        (100.0, 105.0),
        (105.0, 120.0),
    ]
    store.close()
