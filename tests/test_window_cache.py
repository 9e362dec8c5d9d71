"""The windows API's cache: the same bytes as computing afresh, only settled windows kept,
and never more than its windows and bytes allow."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from app.model import HistogramDelta, IntervalDelta
from app.read.windows import (
    SLOT_OVERHEAD,
    WINDOW_OVERHEAD,
    QueryError,
    WindowCache,
    encode_window,
    grid_runs,
    stream_windows,
)
from app.store.sqlite import Store

B = (0.1, 0.5, 1.0)


def delta(end: float, n: int) -> IntervalDelta:
    return IntervalDelta(
        target="t",
        model_name="m",
        start=end - 5.0,
        end=end,
        histograms={"ttft": HistogramDelta(B, {0: float(n), 2: 1.0}, 0.05 * n + 0.7, n + 1.0)},
        counters={"prompt_tokens": 100.0 * n},
        gauges={"running": float(n), "waiting": 0.0, "kv_usage": 0.1},
    )


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "w.db")
    s.write_round([], [delta(5.0 * k, k % 7) for k in range(1, 121)], [])  # (0, 600]
    return s


def fresh(store: Store, start: float, end: float, length: float, step: float) -> list[bytes]:
    ws = stream_windows(store, "t", "m", start=start, end=end, length=length, step=step)
    return [encode_window(w) for w in ws]


def test_cached_windows_are_the_bytes_of_computing_afresh(store: Store) -> None:
    cache = WindowCache(settle=10.0)
    for length, step in ((60.0, 60.0), (60.0, 15.0), (30.0, 45.0)):
        want = fresh(store, 0.0, 600.0, length, step)
        first = cache.windows(store, "t", "m", start=0, end=600, length=length, step=step, now=1e4)
        again = cache.windows(store, "t", "m", start=0, end=600, length=length, step=step, now=1e4)
        assert [b for _, b in first] == want == [b for _, b in again]
        assert all(json.loads(b)["end"] == e for e, b in first)
    # an overlapping range reuses what is held and computes only the rest
    held = len(cache)
    part = cache.windows(store, "t", "m", start=300, end=900, length=60, step=60, now=1e4)
    assert [b for _, b in part] == fresh(store, 300.0, 900.0, 60.0, 60.0)
    assert len(cache) == held + 5  # ends 660..900 are new


def test_windows_that_may_still_change_are_not_kept(store: Store) -> None:
    cache = WindowCache(settle=10.0)
    got = cache.windows(store, "t", "m", start=0, end=600, length=60, step=60, now=605.0)
    assert len(got) == 10 and len(cache) == 9  # the one ending at 600 is not settled yet
    store.write_round([], [delta(600.0, 50)], [])  # a late delta inside that window
    again = cache.windows(store, "t", "m", start=0, end=600, length=60, step=60, now=700.0)
    assert again[-1][1] == fresh(store, 0.0, 600.0, 60.0, 60.0)[-1] != got[-1][1]


def test_the_cap_starts_the_cache_afresh(store: Store) -> None:
    cache = WindowCache(settle=0.0, cap=15)
    cache.windows(store, "t", "m", start=0, end=600, length=60, step=60, now=1e4)
    assert len(cache) == 10
    cache.windows(store, "t", "m", start=0, end=600, length=60, step=30, now=1e4)
    assert len(cache) == 15  # afresh, with the newest 15 of the 30 s grid's 20
    got = cache.windows(store, "t", "m", start=0, end=600, length=60, step=30, now=1e4)
    assert [b for _, b in got] == fresh(store, 0.0, 600.0, 60.0, 30.0)


def test_bad_ranges_are_refused_as_stream_windows_refuses_them(store: Store) -> None:
    cache = WindowCache(settle=0.0)
    with pytest.raises(QueryError, match="end must be after start"):
        cache.windows(store, "t", "m", start=10, end=10, length=60, step=60, now=0)
    with pytest.raises(QueryError, match="more than"):
        cache.windows(store, "t", "m", start=0, end=1e9, length=60, step=1, now=0)


def test_grid_runs_groups_contiguous_ends() -> None:
    assert grid_runs([15.0, 30.0, 45.0, 75.0, 90.0, 120.0], 15.0) == [
        (15.0, 45.0),
        (75.0, 90.0),
        (120.0, 120.0),
    ]
    assert grid_runs([], 15.0) == []


def test_the_byte_budget_drops_the_streams_used_least_recently(store: Store) -> None:
    def ask(cache: WindowCache, step: float) -> list[tuple[float, bytes]]:
        return cache.windows(store, "t", "m", start=0, end=600, length=60, step=step, now=1e4)

    one = len(ask(WindowCache(settle=0.0), 60)[0][1]) + WINDOW_OVERHEAD
    slot = SLOT_OVERHEAD + len("t") + len("m")
    cache = WindowCache(settle=0.0, max_bytes=2 * slot + 16 * one)
    ask(cache, 60)  # 10 windows
    ask(cache, 120)  # 5 more: 15
    ask(cache, 60)  # the 60 s slot used last
    assert len(cache) == 15 and cache.nbytes <= cache.max_bytes
    ask(cache, 300)  # 2 more: over the budget, so the 120 s slot (least recently used) goes
    assert len(cache) == 12 and cache.nbytes <= cache.max_bytes
    assert [b for _, b in ask(cache, 120)] == fresh(store, 0.0, 600.0, 60.0, 120.0)


def test_windows_of_a_long_model_name_stay_under_the_byte_budget(tmp_path: Path) -> None:
    name = "m" * 200_000  # each window carries it: 10 windows are 2 MB
    s = Store(tmp_path / "long.db")
    s.write_round([], [replace(delta(5.0 * k, k % 7), model_name=name) for k in range(1, 121)], [])
    cache = WindowCache(settle=0.0, max_bytes=1_000_000)
    got = cache.windows(s, "t", name, start=0, end=600, length=60, step=60, now=1e4)
    assert len(got) == 10 and all(json.loads(b)["model_name"] == name for _, b in got)
    assert 0 < len(cache) <= 4 and cache.nbytes <= 1_000_000
    assert [e for e, _ in got[-len(cache) :]] == [e for e, _ in got][-len(cache) :]
    again = cache.windows(s, "t", name, start=0, end=600, length=60, step=60, now=1e4)
    assert again == got and cache.nbytes <= 1_000_000
    tiny = WindowCache(settle=0.0, max_bytes=1000)  # under one window: none is kept
    assert tiny.windows(s, "t", name, start=0, end=600, length=60, step=60, now=1e4) == got
    assert len(tiny) == 0 and tiny.nbytes == 0
