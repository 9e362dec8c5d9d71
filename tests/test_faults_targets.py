"""Target faults: every way a vLLM ``/metrics`` endpoint misbehaves shows in target health
with its error kind, costs the other targets nothing, loses and invents no count, and
heals by itself when the fault ends. Real loopback servers (tests/faults.py), real httpx.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from app.config import load_settings
from app.main import create_app
from app.sources.live import ScrapeSource
from app.store.sqlite import Store
from app.windows.aggregate import window
from tests.faults import FaultServer, gzip_bomb
from tests.test_e2e import ServiceThread
from tests.test_faults_store import assert_ui_serves
from tests.waiting import wait_for

TIMEOUT = 2.0  # a healthy answer comes well within it on a machine with both cores busy


def collector(tmp_path: Path, urls: dict[str, str]) -> ScrapeSource:
    settings = load_settings(
        None,
        {
            "targets": [{"name": n, "url": u} for n, u in urls.items()],
            "storage": {"path": str(tmp_path / "pw.db")},
            "scrape": {"timeout": TIMEOUT},
        },
    )
    return ScrapeSource(
        settings.scrape, settings.targets, Store(settings.storage.path), httpx.AsyncClient()
    )


def run(col: ScrapeSource, steps: list[tuple[float, Callable[[], None] | None]]) -> None:
    """Scrape at each time, after running that step's action (switching a fault)."""

    async def go() -> None:
        for t, action in steps:
            if action is not None:
                action()
            await col.read_round(t)
        await col.client.aclose()

    asyncio.run(go())


def ttft(store: Store, target: str = "a") -> tuple[float, bool]:
    """Stored TTFT observations of a target's stream over all time, and the reset flag."""
    deltas = store.intervals(target, "llama", 0, 1e12)
    w = window(deltas, start=0, end=1e12, target=target, model_name="llama")
    return w.observations.get("ttft", 0.0), w.reset


@pytest.fixture(scope="module", autouse=True)
def _bomb() -> None:
    gzip_bomb()  # build it once, outside any scrape timeout


def error_kinds(col: ScrapeSource, target: str) -> tuple[list[str | None], Callable[[], None]]:
    """A list, and a step that appends the target's last error kind (None: ok) to it."""
    kinds: list[str | None] = []

    def look() -> None:
        rec = col.states[target].last_record
        kinds.append(rec.error_kind if rec else None)

    return kinds, look


@pytest.mark.parametrize(
    ("mode", "params", "kind"),
    [
        ("hang", {}, "timeout"),
        ("status", {"status": 500}, "http_status"),
        ("status", {"status": 404}, "http_status"),
        ("html", {}, "not_prometheus"),
        ("junk", {}, "not_prometheus"),
        ("truncated", {}, "truncated"),
        ("huge", {}, "too_large"),
        ("huge_stream", {}, "too_large"),
        ("gzip_bomb", {}, "too_large"),
    ],
)
def test_bad_answer_is_named_isolated_and_heals_losing_nothing(
    tmp_path: Path, mode: str, params: dict[str, int], kind: str
) -> None:
    with FaultServer() as srv:
        col = collector(tmp_path, {"a": srv.url("/a"), "b": srv.url("/b")})
        seen, look = error_kinds(col, "a")

        t0 = time.perf_counter()
        run(
            col,
            [
                (100.0, None),
                (105.0, None),
                (110.0, lambda: srv.set("/a", mode, **params)),
                (115.0, look),
                (120.0, look),
                (125.0, lambda: (look(), srv.set("/a", "ok"))[0]),
                (130.0, None),
            ],
        )
        assert seen == [kind] * 3, seen
        a, b = col.states["a"], col.states["b"]
        assert a.last_record is not None and a.last_record.ok  # healed
        assert b.last_record is not None and b.last_record.ok
        assert srv.route("/b").pages == 7  # the other target never missed a scrape
        # /a served pages 1, 2 (then maybe the truncated 3rd...), the rest after the fault:
        # every first token the pages count is stored once, none invented.
        total, reset = ttft(col.store)
        assert total == 10.0 * (srv.route("/a").n - 1) and not reset
        assert ttft(col.store, "b") == (60.0, False)
        # every fault costs at most its timeout per scrape, whatever it sends
        assert time.perf_counter() - t0 < 7 * TIMEOUT + 8.0
        col.store.close()


def test_refused_connections_are_named_and_heal(tmp_path: Path) -> None:
    with FaultServer() as srv:
        col = collector(tmp_path, {"a": srv.url("/metrics")})
        kinds, look = error_kinds(col, "a")

        run(
            col,
            [
                (100.0, None),
                (105.0, srv.refuse),
                (110.0, look),
                (115.0, lambda: (look(), srv.listen())[0]),
                (120.0, None),
            ],
        )
        assert kinds == ["refused", "refused"]
        assert col.states["a"].last_record is not None and col.states["a"].last_record.ok
        assert ttft(col.store) == (10.0 * (srv.route("/metrics").n - 1), False)
        col.store.close()


def test_flapping_target_alternates_and_the_gaps_are_covered(tmp_path: Path) -> None:
    with FaultServer() as srv:
        srv.set("/a", "flap")
        col = collector(tmp_path, {"a": srv.url("/a")})
        kinds, look = error_kinds(col, "a")

        run(col, [(100.0 + 5 * i, look if i else None) for i in range(9)])
        assert kinds == ["http_status", None] * 4  # first scrape 503 (not recorded)
        total, reset = ttft(col.store)
        assert total == 10.0 * (srv.route("/a").n - 1) and not reset
        ends = [d.end - d.start for d in col.store.intervals("a", "llama", 0, 1e12)]
        assert ends == [10.0] * 3  # each delta spans the failed scrape before it
        col.store.close()


def test_restart_inside_a_window_marks_reset_and_counts_only_real_work(tmp_path: Path) -> None:
    with FaultServer() as srv:
        col = collector(tmp_path, {"a": srv.url("/a")})
        run(
            col,
            [
                (100.0, None),  # n=1
                (105.0, None),  # n=2
                (110.0, None),  # n=3
                (115.0, lambda: srv.restart("/a")),  # n=1 after the restart
                (120.0, None),  # n=2
            ],
        )
        # 2 steps before the restart, the restarted process's first page (its 1 step of
        # work) and 1 step after: 4 steps of 10 first tokens.
        assert ttft(col.store) == (40.0, True)
        assert col.states["a"].last_record is not None and col.states["a"].last_record.ok
        col.store.close()


def test_bucket_layout_change_is_named_then_the_new_layout_is_used(tmp_path: Path) -> None:
    with FaultServer() as srv:
        col = collector(tmp_path, {"a": srv.url("/a")})
        kinds, look = error_kinds(col, "a")

        run(
            col,
            [
                (100.0, None),
                (105.0, None),
                (110.0, lambda: srv.set("/a", "ok", layout=1)),
                (115.0, look),
                (120.0, look),
            ],
        )
        assert kinds == ["bucket_layout_changed", None]
        deltas = col.store.intervals("a", "llama", 0, 1e12)
        assert [d.reset for d in deltas] == [False, True, False, False]
        assert deltas[-1].histograms["ttft"].bounds == (0.05, 0.2, 1.0, 5.0)
        after = window(deltas[-1:], start=115.0, end=120.0, target="a", model_name="llama")
        assert after.quantiles["ttft"]["p50"].value is not None
        col.store.close()


def test_an_engine_that_joins_counts_from_zero(tmp_path: Path) -> None:
    with FaultServer() as srv:
        col = collector(tmp_path, {"a": srv.url("/a")})

        def join() -> None:
            srv.set("/a", "ok", engines=("0", "1"), engine_n={"1": 0})

        run(col, [(100.0, None), (105.0, None), (110.0, join), (115.0, None)])
        # engine 0: 3 steps; engine 1: 1 step at its first page, 1 more after
        assert ttft(col.store) == (50.0, False)
        (_, streams) = col.store.last_snapshots()["a"]
        assert sorted(streams["llama"].engines) == ["0", "1"]
        col.store.close()


def test_an_engine_that_leaves_does_not_add_the_others_history(tmp_path: Path) -> None:
    with FaultServer() as srv:
        srv.set("/a", "ok", engines=("0", "1"))
        col = collector(tmp_path, {"a": srv.url("/a")})
        run(
            col,
            [
                (100.0, None),  # n=1, two engines: 20 first tokens so far
                (105.0, None),  # +20
                (110.0, None),  # +20
                (115.0, lambda: srv.set("/a", "ok", engines=("0",))),  # engine 1 gone
                (120.0, None),  # +10
            ],
        )
        total, reset = ttft(col.store)
        # The interval the engine left in is unknowable from folded sums and is left out;
        # counting engine 0's cumulative 40 there (a "restart") would give 90.
        assert total == 50.0 and reset
        assert col.states["a"].last_record is not None and col.states["a"].last_record.ok
        col.store.close()


def test_service_shows_every_fault_keeps_serving_and_recovers(tmp_path: Path) -> None:
    faults = {
        "hang": ("hang", {}, "timeout"),
        "e500": ("status", {"status": 500}, "http_status"),
        "html": ("html", {}, "not_prometheus"),
        "junk": ("junk", {}, "not_prometheus"),
        "cut": ("truncated", {}, "truncated"),
        "huge": ("huge_stream", {}, "too_large"),
        "bomb": ("gzip_bomb", {}, "too_large"),
    }
    with FaultServer() as srv, FaultServer() as gone:
        urls = {name: srv.url(f"/{name}") for name in faults}
        urls["good"] = srv.url("/good")
        urls["gone"] = gone.url("/metrics")
        settings = load_settings(
            None,
            {
                "targets": [{"name": n, "url": u} for n, u in urls.items()],
                "scrape": {"interval": 0.3, "timeout": TIMEOUT},
                "storage": {"path": str(tmp_path / "pw.db")},
                "alerts": {"evaluation_interval": 0.5},
            },
        )
        app = create_app(settings)
        svc = ServiceThread(app)
        try:

            def targets() -> dict[str, dict[str, object]]:
                got = httpx.get(svc.url + "/api/v1/targets", timeout=5).json()
                return {t["name"]: t for t in got}

            wait_for(lambda: all(t["up"] for t in targets().values()), timeout=20)
            gone.refuse()
            for name, (mode, params, _) in faults.items():
                srv.set(f"/{name}", mode, **params)
            expected = {name: kind for name, (_, _, kind) in faults.items()}
            expected |= {"gone": "refused", "good": None}

            def shown() -> bool:
                got = targets()
                return {n: t["last_error_kind"] for n, t in got.items()} == expected

            wait_for(shown, timeout=20)
            health = httpx.get(svc.url + "/api/v1/health/components", timeout=5).json()
            assert health["targets"]["up"] == 1
            assert health["targets"]["down"] == {
                "timeout": 1,
                "http_status": 1,
                "not_prometheus": 2,
                "truncated": 1,
                "too_large": 2,
                "refused": 1,
            }
            assert httpx.get(svc.url + "/healthz", timeout=5).json()["status"] == "ok"
            metrics = httpx.get(svc.url + "/metrics", timeout=5).text
            assert 'phasewatch_scrapes_total{outcome="too_large",target="bomb"}' in metrics
            assert httpx.get(svc.url + "/api/v1/alerts", timeout=5).status_code == 200
            assert_ui_serves(app, svc.url)
            good = srv.route("/good").pages
            wait_for(lambda: srv.route("/good").pages >= good + 3)  # never held up

            gone.listen()
            for name in faults:
                srv.set(f"/{name}", "ok")
            wait_for(lambda: all(t["up"] for t in targets().values()), timeout=20)
        finally:
            svc.close()
        store = Store(tmp_path / "pw.db")
        for name in urls:
            deltas = store.intervals(name, "llama", 0, 1e12)
            assert all(a.end == b.start for a, b in zip(deltas, deltas[1:], strict=False))
            assert not any(d.reset for d in deltas), name
        assert store.fetchall("PRAGMA integrity_check") == [("ok",)]
        store.close()
