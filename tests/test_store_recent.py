"""The store's recent deltas in memory: every read equals what SQLite alone returns."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from app.model import HistogramDelta, IntervalDelta
from app.store.recent import RecentDeltas
from app.store.sqlite import Store
from app.windows.aggregate import window

B = (0.1, 0.5, 1.0)


def delta(target: str, end: float, n: int) -> IntervalDelta:
    return IntervalDelta(
        target=target,
        model_name="m",
        start=end - 5.0,
        end=end,
        histograms={"ttft": HistogramDelta(B, {0: float(n), 3: 1.0}, 0.1 * n + 2.0, n + 1.0)},
        counters={"prompt_tokens": 10.0 * n, "preemptions": 0.0},
        gauges={"running": float(n), "kv_usage": 0.25},
    )


def test_reads_with_recent_deltas_equal_reads_from_sqlite(tmp_path: Path) -> None:
    rng = random.Random(4)
    fast = Store(tmp_path / "fast.db", recent_s=70.0)
    plain = Store(tmp_path / "plain.db")
    for k in range(1, 121):  # ten minutes, two targets, a replaced delta now and then
        now = 5.0 * k
        ds = [delta(t, now, rng.randint(0, 9)) for t in ("a", "b")]
        if k % 17 == 0:
            ds.append(delta("a", now, 42))  # the same end again: the store keeps the last
        for s in (fast, plain):
            s.write_round([], ds, [])
        for target in ("a", "b"):
            for start, end in ((now - 60, now), (now - 65, now - 5), (now - 300, now - 200)):
                got = fast.intervals(target, "m", start, end)
                want = plain.intervals(target, "m", start, end)
                assert [d.end for d in got] == [d.end for d in want]
                kw = {"start": start, "end": end, "target": target, "model_name": "m"}
                assert window(got, **kw) == window(want, **kw)
    assert fast._recent.hits > 400  # the minute-long reads came from memory
    assert len(fast._recent) <= 2 * 15  # about keep_s of each stream, no more


def test_a_store_opened_on_old_data_reads_sqlite_until_it_writes(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    first = Store(path)
    first.write_round([], [delta("a", 5.0 * k, k) for k in range(1, 13)], [])
    first.close()
    store = Store(path, recent_s=70.0)
    assert [d.end for d in store.intervals("a", "m", 0, 60)] == [5.0 * k for k in range(1, 13)]
    assert store._recent.hits == 0 and len(store._recent) == 0  # newest unknown: not held
    store.write_round([], [delta("a", 65.0, 1)], [])
    got = store.intervals("a", "m", 5.0, 65.0)
    assert [d.end for d in got] == [5.0 * k for k in range(2, 14)]
    again = store.intervals("a", "m", 10.0, 70.0)
    assert [d.end for d in again] == [5.0 * k for k in range(3, 14)]
    assert store._recent.hits == 1


def test_a_failed_write_adds_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db", recent_s=70.0)
    store.write_round([], [delta("a", 5.0, 1)], [])
    assert [d.end for d in store.intervals("a", "m", 0.0, 5.0)] == [5.0]
    store.fetchall("PRAGMA query_only = ON")
    with pytest.raises(sqlite3.Error):
        store.write_round([], [delta("a", 10.0, 2)], [])
    store.fetchall("PRAGMA query_only = OFF")
    assert [d.end for d in store.intervals("a", "m", 0.0, 10.0)] == [5.0]


def test_held_deltas_are_trimmed_to_keep_s() -> None:
    recent = RecentDeltas(20.0)
    recent.add([delta("a", 5.0, 0)])
    recent.fill(("a", "m"), 0.0, 5.0, [delta("a", 5.0, 0)])
    recent.add([delta("a", 5.0 * k, k) for k in range(2, 11)])
    assert recent.get(("a", "m"), 0.0, 50.0) is None  # no longer all held
    got = recent.get(("a", "m"), 30.0, 50.0)
    assert got is not None and [d.end for d in got] == [35.0, 40.0, 45.0, 50.0]
