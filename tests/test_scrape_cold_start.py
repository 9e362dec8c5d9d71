"""A cold start with many targets: their first contacts are spread over the intervals
under a CPU budget instead of one round taking them all (``app.sources.live``), and
nothing is lost — every target joins the rounds, its first page is stored."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from app.config import load_settings
from app.scrape.client import ClientPool
from app.sources.live import WARM_INLINE, ScrapeSource
from app.store.sqlite import Store

PAGES = Path(__file__).parent / "fixtures" / "vllm-generated"


def _page() -> Path:
    return sorted(PAGES.glob("*.prom"))[-1]


def _source(tmp_path: Path, n: int, interval: float) -> tuple[ScrapeSource, Store]:
    url = "file://" + str(_page())
    targets = [{"name": f"t{i:03d}", "url": url} for i in range(n)]
    settings = load_settings(
        None,
        {"targets": targets, "scrape": {"interval": interval}, "storage": {"path": "x"}},
    )
    store = Store(tmp_path / "pw.db")
    return ScrapeSource(settings.scrape, settings.targets, store, ClientPool()), store


def test_many_new_targets_are_contacted_over_the_intervals_and_nothing_is_lost(
    tmp_path: Path,
) -> None:
    n = WARM_INLINE * 3

    async def run() -> None:
        src, store = _source(tmp_path, n, interval=1.0)
        first = await src.read_round(time.time())
        assert first == [], "the first round leaves the first contacts to their offsets"
        deadline = time.monotonic() + 60
        while len(src._contacted) < n:  # each contact lands at its offset in an interval
            assert time.monotonic() < deadline, f"{len(src._contacted)} of {n} contacted"
            if not src._warming:
                await src.read_round(time.time())  # the next interval's share
            await asyncio.sleep(0.05)
        joined = await src.read_round(time.time())
        round_fetches = [o for o in joined if o.started is not None]
        assert len(round_fetches) == n, "every target is in the round now"
        assert all(o.record.ok for o in joined)
        # First pages come back once, without a start (not the round's lag), and stored.
        assert sum(1 for o in joined if o.started is None) <= n
        assert len(store.last_snapshots({f"t{i:03d}" for i in range(n)})) == n
        store.close()

    asyncio.run(run())


def test_a_few_new_targets_are_fetched_by_the_round_itself(tmp_path: Path) -> None:
    async def run() -> None:
        src, store = _source(tmp_path, 3, interval=5.0)
        got = await src.read_round(time.time())
        assert [o.record.ok for o in got] == [True, True, True]
        assert all(o.started is not None for o in got)
        store.close()

    asyncio.run(run())


def test_a_removed_target_is_forgotten_and_its_name_back_is_a_first_contact(
    tmp_path: Path,
) -> None:
    async def run() -> None:
        src, store = _source(tmp_path, 3, interval=5.0)
        await src.read_round(time.time())
        assert src._contacted == {"t000", "t001", "t002"}
        kept = [t for t in src.states.values() if t.config.name != "t001"]
        src.reconfigure(src.scrape, [t.config for t in kept])
        await src.read_round(time.time())
        assert src._contacted == {"t000", "t002"}, "churn leaves no names behind"
        store.close()

    asyncio.run(run())
