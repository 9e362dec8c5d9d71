import math
from pathlib import Path

import pytest

from app.model import Histogram, HistogramDelta, IntervalDelta, StreamSnapshot
from app.store.codec import decode_delta, decode_stream, encode_delta, encode_stream
from app.store.schema import MIGRATIONS
from app.store.sqlite import ScrapeRecord, Store, StoreError

BOUNDS = (0.1, 0.5, 1.0)


def delta(end: float, *, reset: bool = False) -> IntervalDelta:
    return IntervalDelta(
        target="t",
        model_name="m",
        start=end - 5,
        end=end,
        histograms={"ttft": HistogramDelta(BOUNDS, {0: 3.0, 3: 1.0}, 2.75, 4.0)},
        counters={"preemptions": 0.0, "prompt_tokens": 1200.0, "finished:stop": 4.0},
        gauges={"running": 7.0, "waiting": 0.0, "kv_usage": 0.4375},
        reset=reset,
        missing=("tpot",),
    )


def test_delta_round_trips_through_codec() -> None:
    layouts: dict[tuple[float, ...], int] = {}
    blob = encode_delta(delta(10.0), lambda b: layouts.setdefault(b, len(layouts)))
    back = decode_delta(
        blob,
        target="t",
        model_name="m",
        start=5.0,
        end=10.0,
        reset=False,
        bounds_of={v: k for k, v in layouts.items()}.__getitem__,
    )
    assert back == delta(10.0)


def test_snapshot_with_nan_and_inf_round_trips() -> None:
    s = StreamSnapshot(
        model_name="m",
        histograms={"itl": Histogram((0.01, 0.1), (1.0, 2.0, 2.0), 0.05, 2.0)},
        counters={"prompt_tokens": 1e15 + 0.5},
        gauges={"kv_usage": math.inf},
        engines={"0": {"running": 1.0}},
        info={"block_size": "16"},
        missing=("e2e",),
    )
    back = decode_stream(encode_stream(s))
    assert back == s


def test_store_writes_and_reads_intervals_in_range(tmp_path: Path) -> None:
    store = Store(tmp_path / "pw.db")
    store.write_round([], [delta(10.0), delta(15.0), delta(20.0, reset=True)], [])
    got = store.intervals("t", "m", 10.0, 20.0)
    assert [d.end for d in got] == [15.0, 20.0]
    assert got[1].reset is True
    assert got[0].histograms["ttft"].buckets == {0: 3.0, 3: 1.0}
    assert store.streams() == [("t", "m")]


def test_store_survives_reopen_with_snapshots_and_health(tmp_path: Path) -> None:
    path = tmp_path / "pw.db"
    store = Store(path)
    snap = StreamSnapshot(model_name="m", gauges={"running": 1.0})
    rec = ScrapeRecord("t", 20.0, False, "timeout", "slow", 4.0, 0, 0)
    store.write_round([rec], [delta(20.0)], [("t", 20.0, snap)])
    store.close()
    again = Store(path)
    assert again.last_snapshots() == {"t": (20.0, {"m": snap})}
    assert again.last_scrapes()["t"] == rec
    assert again.intervals("t", "m", 0, 100)[0].end == 20.0
    assert again.schema_version == len(MIGRATIONS)


def test_retention_drops_only_old_rows(tmp_path: Path) -> None:
    store = Store(tmp_path / "pw.db")
    store.write_round(
        [ScrapeRecord("t", 10.0, True, None, None, 0.1, 10, 0)],
        [delta(10.0), delta(1000.0)],
        [],
    )
    removed = store.enforce_retention(now=1100.0, retention_s=500.0)
    assert removed == 2
    assert [d.end for d in store.intervals("t", "m", 0, 2000)] == [1000.0]


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "pw.db"
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    db.close()
    with pytest.raises(StoreError, match="newer"):
        Store(path)


def test_not_a_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "pw.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError):
        Store(path)


def test_failed_write_rolls_back(tmp_path: Path) -> None:
    store = Store(tmp_path / "pw.db")

    def boom(_: tuple[float, ...]) -> int:
        raise RuntimeError("disk")

    store._layout_id = boom  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        store.write_round([ScrapeRecord("t", 1.0, True, None, None, 0.1, 1, 0)], [delta(5.0)], [])
    assert store.last_scrapes() == {}
