"""Store faults: a read-only or full SQLite file is reported with its kind, loses nothing,
and the service keeps scraping and serving until the store is writable again.

How the faults are made. Tests run as root, and root ignores file permissions, so a
``chmod`` of the file or its folder does not make SQLite read-only here. Instead:

* **read-only**: ``PRAGMA query_only = ON`` on the store's own connection. Every write
  then fails inside SQLite with ``SQLITE_READONLY`` ("attempt to write a readonly
  database"), the very code a read-only file or mount gives, on the real write path.
* **full**: ``PRAGMA max_page_count`` set to the file's current size: the next write that
  needs a new page fails with ``SQLITE_FULL`` ("database or disk is full"), which is what
  a full disk gives; SQLite then rolls the transaction back by itself.

Both are undone with the opposite pragma, as an operator freeing space or remounting would.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import httpx
import pytest

from app.config import load_settings
from app.model import HistogramDelta, IntervalDelta
from app.sources.live import ScrapeSource
from app.store.health import StoreErrorKind, error_kind
from app.store.sqlite import ScrapeRecord, Store
from tests.faults import FaultServer
from tests.test_e2e import ServiceThread
from tests.waiting import wait_for


def read_only(store: Store, on: bool) -> None:
    store.fetchall(f"PRAGMA query_only = {'ON' if on else 'OFF'}")


def full(store: Store, on: bool) -> None:
    if on:
        (pages,) = store.fetchall("PRAGMA page_count")[0]
        store.fetchall(f"PRAGMA max_page_count = {int(pages)}")
    else:
        store.fetchall("PRAGMA max_page_count = 1073741823")


def big_round(i: int) -> list[IntervalDelta]:
    """Deltas large enough to need new pages (incompressible bucket values)."""
    bounds = tuple(float(b) for b in range(1, 400))
    buckets = {b: float(i * 1000 + b) + 0.123456789 * b for b in range(400)}
    hd = HistogramDelta(bounds=bounds, buckets=buckets, sum=1.0, count=1.0)
    return [
        IntervalDelta(f"t{k}", "m", i * 5.0, i * 5.0 + 5, {"ttft": hd}, {}, {"running": 1.0})
        for k in range(20)
    ]


def test_full_store_raises_its_own_error_not_a_failed_rollback(tmp_path: Path) -> None:
    store = Store(tmp_path / "pw.db")
    store.write_round([], big_round(0), [])
    full(store, True)
    with pytest.raises(sqlite3.Error) as info:
        for i in range(1, 20):
            store.write_round([], big_round(i), [])
    # SQLite rolled back by itself; a second ROLLBACK used to raise "cannot rollback - no
    # transaction is active" and hide the real cause.
    assert error_kind(info.value) == "full", info.value
    health = store.health()
    assert not health.ok and health.error_kind == "full"
    assert health.last_error is not None and "full" in health.last_error
    full(store, False)
    store.write_round([], big_round(99), [])
    assert store.health().ok and store.health().failed_writes == 1
    assert store.fetchall("PRAGMA integrity_check") == [("ok",)]
    store.close()


def test_store_error_kind_reads_the_result_code_not_the_message() -> None:
    io = sqlite3.OperationalError("disk I/O error")
    io.sqlite_errorcode = sqlite3.SQLITE_IOERR_WRITE  # an extended code: its primary is IOERR
    assert error_kind(io) is StoreErrorKind.IO
    assert error_kind(sqlite3.OperationalError("database or disk is full")) == "other"
    assert error_kind(OSError("SQLITE_FULL")) == "other"


def test_read_only_store_is_named_and_a_transaction_can_follow(tmp_path: Path) -> None:
    store = Store(tmp_path / "pw.db")
    read_only(store, True)
    rec = ScrapeRecord("a", 1.0, True, None, None, 0.1, 10, 0)
    with pytest.raises(sqlite3.Error) as info:
        store.write_round([rec], [], [])
    assert error_kind(info.value) == "read_only"
    with pytest.raises(sqlite3.Error), store.transaction() as conn:
        conn.execute("INSERT INTO silences VALUES ('x', '[]', 0, 1, 'a', 'b')")
    assert store.health().error_kind == "read_only"
    assert store.scrapes("a", 0, 2) == []  # reads go on
    read_only(store, False)
    store.write_round([rec], [], [])
    assert store.health().ok and store.scrapes("a", 0, 2) == [rec]
    store.close()


def test_a_failed_commit_does_not_leave_the_connection_inside_a_transaction(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "pw.db")
    other = sqlite3.connect(tmp_path / "pw.db", isolation_level=None, timeout=0)
    other.execute("PRAGMA busy_timeout = 0")
    store.fetchall("PRAGMA busy_timeout = 0")
    other.execute("BEGIN IMMEDIATE")  # another writer holds the write lock
    rec = ScrapeRecord("a", 1.0, True, None, None, 0.1, 10, 0)
    with pytest.raises(sqlite3.Error) as info:
        store.write_round([rec], [], [])
    assert error_kind(info.value) == "busy"
    other.execute("ROLLBACK")
    other.close()
    with store.transaction() as conn:  # would fail if the last one were still open
        conn.execute("INSERT INTO silences VALUES ('x', '[]', 0, 1, 'a', 'b')")
    assert store.health().error_kind == "busy"  # the round itself is not written yet
    store.write_round([rec], [], [])
    assert store.health().ok
    store.close()


def test_a_small_write_that_fits_does_not_hide_failing_rounds(tmp_path: Path) -> None:
    """On a full disk a small update can still fit in a free page; the store stays
    degraded until a scrape round is written again."""
    store = Store(tmp_path / "pw.db")
    store.write_round([], big_round(0), [])
    full(store, True)
    with pytest.raises(sqlite3.Error):
        for i in range(1, 20):
            store.write_round([], big_round(i), [])
    with store.transaction("outbox") as conn:  # fits: no new page needed
        conn.execute("DELETE FROM silences")
    health = store.health()
    assert not health.ok and health.error_kind == "full"
    full(store, False)
    store.write_round([], big_round(99), [])
    assert store.health().ok
    store.close()


def fill_up(store: Store, target: str, after: float) -> None:
    """Fill the full store's last page of ``target``'s scrape rows, just after ``after``,
    so that the next scrape record (same size, later time) needs a page it cannot get."""
    with pytest.raises(sqlite3.Error):
        for i in range(1, 100_000):
            rec = ScrapeRecord(target, after + i * 1e-5, True, None, None, 0.123456, 2020, 0)
            store.write_round([rec], [], [])


def make_collector(tmp_path: Path, url: str) -> ScrapeSource:
    settings = load_settings(
        None,
        {
            "targets": [{"name": "a", "url": url}],
            "storage": {"path": str(tmp_path / "pw.db")},
            "scrape": {"timeout": 2.0},
        },
    )
    return ScrapeSource(
        settings.scrape, settings.targets, Store(settings.storage.path), httpx.AsyncClient()
    )


def ttft_count(store: Store) -> float:
    return sum(
        d.histograms["ttft"].count for d in store.intervals("a", "llama", 0, 1e12) if d.histograms
    )


@pytest.mark.parametrize("fault", [read_only, full])
def test_rounds_that_cannot_be_written_are_not_lost(tmp_path: Path, fault: object) -> None:
    with FaultServer() as srv:
        col = make_collector(tmp_path, srv.url("/metrics"))

        async def go() -> None:
            await col.read_round(100.0)  # page 1: the baseline
            await col.read_round(105.0)  # page 2: stored
            fault(col.store, True)  # type: ignore[operator]
            if fault is full:
                fill_up(col.store, "a", 105.0)
            for t in (110.0, 115.0, 120.0):  # pages 3-5: the writes fail, no exception
                await col.read_round(t)
            assert col.store.health().error_kind == ("read_only" if fault is read_only else "full")
            assert col.states["a"].last_record is not None and col.states["a"].last_record.ok
            fault(col.store, False)  # type: ignore[operator]
            with col.store.transaction() as conn:  # the filler rows, if any
                conn.execute("DELETE FROM scrapes WHERE target = 'a' AND ts > 105 AND ts < 106")
            await col.read_round(125.0)  # page 6: covers the gap
            await col.client.aclose()

        asyncio.run(go())
        # Pages 1..6: five steps of 10 first tokens each, none lost, none counted twice.
        assert ttft_count(col.store) == 50.0
        deltas = col.store.intervals("a", "llama", 0, 1e12)
        assert [(d.start, d.end) for d in deltas] == [(100.0, 105.0), (105.0, 125.0)]
        # the scrape records of the unwritten rounds were kept and written too
        assert [r.ts for r in col.store.scrapes("a", 0, 1e12)] == [
            100.0,
            105.0,
            110.0,
            115.0,
            120.0,
            125.0,
        ]
        assert col.store.health().ok
        col.store.close()


def test_service_reports_a_full_store_keeps_serving_and_recovers(tmp_path: Path) -> None:
    from app.main import create_app

    with FaultServer() as srv:
        settings = load_settings(
            None,
            {
                "targets": [{"name": "a", "url": srv.url("/metrics")}],
                "scrape": {"interval": 0.2, "timeout": 5.0},  # a busy machine is slow, not down
                "storage": {"path": str(tmp_path / "pw.db")},
                "alerts": {"evaluation_interval": 0.5},
            },
        )
        app = create_app(settings)

        def get(url: str, **kw: object) -> httpx.Response:
            return httpx.get(url, timeout=30, **kw)  # type: ignore[arg-type]

        svc = ServiceThread(app)
        try:
            store: Store = app.state.service.store
            components = svc.url + "/api/v1/health/components"
            wait_for(lambda: srv.route("/metrics").pages >= 3)
            assert get(components).json()["store"]["ok"] is True
            full(store, True)
            wait_for(lambda: get(components).json()["store"]["error_kind"] == "full")
            body = get(components).json()
            assert body["status"] == "degraded" and body["store"]["failed_writes"] >= 1
            assert get(svc.url + "/healthz").json()["components"] == "degraded"
            pages = srv.route("/metrics").pages
            wait_for(lambda: srv.route("/metrics").pages >= pages + 3)  # still scraping
            (target,) = get(svc.url + "/api/v1/targets").json()
            assert target["up"] is True
            assert get(svc.url + "/api/v1/alerts").status_code == 200
            assert_ui_serves(app, svc.url)
            full(store, False)
            wait_for(lambda: get(components).json()["store"]["ok"] is True)
            assert get(svc.url + "/healthz").json()["components"] == "ok"
            end = time.time()
            got = get(
                svc.url + "/api/v1/windows",
                params={"target": "a", "start": end - 5, "end": end, "window": 60, "step": 1},
            ).json()
            assert got and (got[-1]["ttft_count"] or 0) > 0, got
        finally:
            svc.close()
        # Nothing lost: the stored deltas join up and add up to the last stored page.
        store = Store(tmp_path / "pw.db")
        deltas = store.intervals("a", "llama", 0, 1e12)
        assert all(a.end == b.start for a, b in zip(deltas, deltas[1:], strict=False))
        (_, streams) = store.last_snapshots()["a"]
        assert ttft_count(store) == streams["llama"].histograms["ttft"].count - 10
        assert store.fetchall("PRAGMA integrity_check") == [("ok",)]
        store.close()


def assert_ui_serves(app: object, base: str) -> None:
    """When the Dash UI is mounted, its page still answers."""
    mounted = any(getattr(r, "path", "").startswith("/ui") for r in app.routes)  # type: ignore[attr-defined]
    if mounted:
        assert httpx.get(base + "/ui/", follow_redirects=True, timeout=10).status_code == 200
