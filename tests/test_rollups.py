"""Roll-ups: windows on their edges equal the raw windows, on simulated replicas with a
restart and a bucket-layout change; an older store is migrated and back-filled; late
deltas, reopening and retention keep them equal.

The store ``tests/data/store_v3.sqlite`` was written by phasewatch before roll-ups
(schema 3, JSON payloads): the three recordings of :func:`_pages` (with
``S = 1_764_403_183``) written by ``record_into`` as target ``r0``.
"""

from __future__ import annotations

import json
import math
import shutil
import sqlite3
import zlib
from dataclasses import replace
from pathlib import Path

import pytest

from app.model import IntervalDelta, Window
from app.read.windows import WindowCache, encode_window, resolution, stream_windows, windows_body
from app.sim.record import record
from app.sources.recording import list_pages, record_into
from app.store.codec import decode_delta
from app.store.diagnoses import DiagnosisStore
from app.store.schema import MIGRATIONS
from app.store.sqlite import Store
from app.windows.aggregate import windows
from app.windows.from_rollups import rollup_windows
from app.windows.rollup import Rollup, rollups_of

LEGACY = Path(__file__).resolve().parent / "data" / "store_v3.sqlite"
S = 1_764_403_183.0  # not on a minute's edge; the switch to vLLM 0.6 falls inside a minute
TARGET = "r0"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
SHAPES = [(60.0, 60.0), (120.0, 60.0), (300.0, 60.0), (600.0, 300.0), (60.0, 180.0)]
HOUR_SHAPES = [(3600.0, 3600.0), (7200.0, 3600.0)]


def _pages(root: Path) -> Path:
    """One replica for 600 s: 300 s, a restart (another run from zero), 150 s, and a
    restart into vLLM 0.6, whose histograms have other buckets (V0 creates its series
    after its first stats log, so two pages have none)."""
    pages = root / "pages"
    pages.mkdir()
    for name, kw in (
        ("a", {"duration": 300, "seed": 1, "start_unix": S}),
        ("b", {"duration": 150, "seed": 2, "start_unix": S + 305}),
        ("c", {"duration": 150, "seed": 3, "start_unix": S + 460, "version": "0.6"}),
    ):
        for _, page in list_pages(record("incident", root / name, **kw)):  # type: ignore[arg-type]
            shutil.copy(page, pages / page.name)
    return pages


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _pages(tmp_path_factory.mktemp("rollups"))


@pytest.fixture
def store(pages: Path, tmp_path: Path) -> Store:
    s = Store(tmp_path / "pw.db")
    record_into(s, pages, TARGET)
    return s


def _raw(store: Store) -> list[IntervalDelta]:
    return store.intervals(TARGET, MODEL, 0, 2e9)


def _span(deltas: list[IntervalDelta]) -> tuple[float, float]:
    return math.floor(deltas[0].start / 3600) * 3600, math.ceil(deltas[-1].end / 3600) * 3600


def _same(a: list[Window], b: list[Window]) -> None:
    """Bit for bit (``repr`` shows every float exactly; NaN compares equal to NaN)."""
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert repr(x) == repr(y), (x.start, x.end)


def _check_rollups_equal_raw(store: Store, raw: list[IntervalDelta]) -> list[Window]:
    lo, hi = _span(raw)
    seen = []
    for res, shapes in ((60.0, SHAPES), (3600.0, HOUR_SHAPES)):
        for length, step in shapes:
            start = lo - length  # windows from the first hour's edge on
            want = windows(
                raw, start=start, end=hi, length=length, step=step, target=TARGET, model_name=MODEL
            )
            parts = store.rollups(TARGET, MODEL, start, hi, res)
            got = rollup_windows(
                parts,
                start=start,
                end=hi,
                length=length,
                step=step,
                target=TARGET,
                model_name=MODEL,
            )
            _same(want, got)
            seen += want
    return seen


def test_the_data_has_a_restart_and_a_layout_change(store: Store) -> None:
    raw = _raw(store)
    assert len(raw) == 120 and sum(d.reset for d in raw) == 1
    minutes = rollups_of(raw, 60.0)
    assert any(len(r.histograms["ttft"].layouts) == 2 for r in minutes)  # inside one minute
    assert any(r.resets for r in minutes)


def test_windows_on_rollup_edges_equal_the_raw_windows(store: Store) -> None:
    raw = _raw(store)
    lo, hi = _span(raw)
    # half rolled up: roll-ups, then the rows not rolled up yet, summed on the fly
    assert store.roll_up(raw[60].end) > 0
    ws = _check_rollups_equal_raw(store, raw)
    assert any(w.reset and w.intervals for w in ws)
    assert any(w.missing and w.intervals for w in ws)
    # all of it, hours included; nothing lost from the raw deltas
    store.roll_up(hi)
    assert store.fetchall("SELECT COUNT(*) FROM intervals") == [(0,)]
    hours = len({math.ceil(d.end / 3600) for d in raw})
    assert store.fetchall("SELECT COUNT(*) FROM rollups WHERE res = 3600") == [(hours,)] == [(2,)]
    assert Store(store.path).intervals(TARGET, MODEL, 0, 2e9) == raw
    _check_rollups_equal_raw(store, raw)


def test_the_windows_api_reads_rollups_when_the_step_allows(store: Store) -> None:
    raw = _raw(store)
    lo, hi = _span(raw)
    store.roll_up(hi)
    assert resolution(hi, 300.0, 60.0) == 60.0 and resolution(hi, 3600.0, 3600.0) == 3600.0
    assert resolution(hi, 90.0, 30.0) is None and resolution(hi + 30, 60.0, 60.0) is None
    for length, step in [(300.0, 60.0), (3600.0, 3600.0), (90.0, 30.0), (60.0, 5.0)]:
        got = stream_windows(store, TARGET, MODEL, start=lo, end=hi, length=length, step=step)
        first = got[0].end
        want = windows(
            raw,
            start=first - length,
            end=hi,
            length=length,
            step=step,
            target=TARGET,
            model_name=MODEL,
        )
        _same(want, got)
        # The API's answer (its windows built lean: only what the object reads) is the
        # raw windows' objects, byte for byte.
        body = windows_body(
            WindowCache(0.0),
            store,
            TARGET,
            [MODEL],
            start=lo,
            end=hi,
            length=length,
            step=step,
            now=hi + 1e6,
        )
        assert body == b"[" + b",".join(encode_window(w) for w in want) + b"]"


def test_minutes_merged_are_the_window_of_their_span(store: Store) -> None:
    raw = _raw(store)
    lo, hi = _span(raw)
    total = Rollup(lo, hi)
    for minute in rollups_of(raw, 60.0):
        total.merge(minute)
    length = hi - lo
    want = windows(
        raw, start=lo - length, end=hi, length=length, step=length, target=TARGET, model_name=MODEL
    )
    got = rollup_windows(
        [total],
        start=lo - length,
        end=hi,
        length=length,
        step=length,
        target=TARGET,
        model_name=MODEL,
    )
    _same(want, got)
    with pytest.raises(ValueError, match="straddles"):
        rollup_windows(
            [total], start=lo, end=hi, length=1800, step=1800, target=TARGET, model_name=MODEL
        )


def test_a_store_written_before_rollups_is_migrated_and_back_filled(tmp_path: Path) -> None:
    path = tmp_path / "pw.db"
    shutil.copy(LEGACY, path)
    old = sqlite3.connect(path)
    assert old.execute("PRAGMA user_version").fetchone() == (3,)
    layouts = old.execute("SELECT id, bounds FROM layouts")
    bounds = {lid: tuple(float(b) for b in json.loads(text)) for lid, text in layouts}
    rows = old.execute("SELECT end_ts, start_ts, reset, payload FROM intervals ORDER BY end_ts")
    written = [
        decode_delta(
            payload,
            target=TARGET,
            model_name=MODEL,
            start=start,
            end=end,
            reset=bool(reset),
            bounds_of=bounds.__getitem__,
        )
        for end, start, reset, payload in rows
    ]
    scrapes = old.execute("SELECT COUNT(*) FROM scrapes").fetchone()
    old.close()

    store = Store(path)
    assert store.schema_version == len(MIGRATIONS)
    assert _raw(store) == written  # readable before any roll-up
    lo, hi = _span(written)
    want = windows(written, start=lo, end=hi, length=60, step=60, target=TARGET, model_name=MODEL)
    assert store.roll_up(hi) == len({math.ceil(d.end / 60) for d in written})
    store.close()

    again = Store(path)
    assert _raw(again) == written
    assert again.fetchall("SELECT COUNT(*) FROM scrapes") == [scrapes]
    assert again.last_snapshots()[TARGET][1][MODEL].histograms
    _check_rollups_equal_raw(again, written)
    got = stream_windows(again, TARGET, MODEL, start=lo, end=hi, length=60, step=60)
    _same(want, got)


def test_a_late_delta_is_rolled_up_again(store: Store) -> None:
    raw = _raw(store)
    lo, hi = _span(raw)
    store.roll_up(hi)
    # written again after its minute was rolled up: one delta changed (one more first
    # token), one that was not there (half of the next interval, its gauges changed)
    old = raw[30]
    ttft = old.histograms["ttft"]
    more = replace(ttft, buckets={**ttft.buckets, 0: ttft.buckets.get(0, 0.0) + 1.0})
    changed = replace(
        old, histograms={**old.histograms, "ttft": replace(more, count=ttft.count + 1)}
    )
    extra = replace(raw[31], start=old.end, end=old.end + 2.5, gauges={"running": 99.0})
    store.write_round([], [changed, extra], [])
    raw[30:31] = [changed, extra]
    assert Store(store.path).intervals(TARGET, MODEL, 0, 2e9) == raw
    _check_rollups_equal_raw(store, raw)


def test_rolling_up_continues_after_a_reopen(pages: Path, tmp_path: Path) -> None:
    path = tmp_path / "pw.db"
    first = Store(path)
    record_into(first, pages, TARGET)
    raw = _raw(first)
    first.roll_up(raw[40].end)
    first.close()
    again = Store(path)
    again.roll_up(raw[90].end)
    assert again.intervals(TARGET, MODEL, 0, 2e9) == raw
    _check_rollups_equal_raw(again, raw)


def test_retention_keeps_rollups_longer_than_raw_deltas(store: Store) -> None:
    raw = _raw(store)
    lo, hi = _span(raw)
    want = windows(raw, start=lo, end=hi, length=60, step=60, target=TARGET, model_name=MODEL)
    now = raw[-1].end + 86400
    store.enforce_retention(now, 3600.0, 2 * 86400.0)  # raw gone, roll-ups kept
    assert store.intervals(TARGET, MODEL, 0, 2e9) == []
    got = rollup_windows(
        store.rollups(TARGET, MODEL, lo, hi, 60.0),
        start=lo,
        end=hi,
        length=60,
        step=60,
        target=TARGET,
        model_name=MODEL,
    )
    _same(want, got)
    store.enforce_retention(now + 86400, 3600.0, 0.5 * 86400.0)
    assert store.fetchall("SELECT COUNT(*) FROM rollups") == [(0,)]


def test_the_migration_keeps_the_diagnoses(tmp_path: Path) -> None:
    path = tmp_path / "pw.db"
    shutil.copy(LEGACY, path)
    old = sqlite3.connect(path)
    old.execute(
        "INSERT INTO diagnoses VALUES (1, 1764403500.0, 1764403440.0, 'healthy', ?)",
        (zlib.compress(json.dumps({"class": "healthy", "sub_cause": None}).encode()),),
    )
    old.commit()
    old.close()
    store = Store(path)
    assert DiagnosisStore(store).latest() == {(TARGET, MODEL): (1764403500.0, "healthy", None)}
    assert DiagnosisStore(store).classes(TARGET, MODEL, 0, 2e9) == [(1764403500.0, "healthy")]


def test_a_back_fill_in_bounded_runs_ends_where_one_run_would(tmp_path: Path) -> None:
    path = tmp_path / "pw.db"
    shutil.copy(LEGACY, path)
    store = Store(path)
    written = _raw(store)
    lo, hi = _span(written)
    runs = 0
    while store.roll_up(hi, deadline=0.0):  # each run stops after its first chunk
        runs += 1
        assert runs < 10
    assert runs == 2  # the data's two hours, an hour a chunk
    assert store.fetchall("SELECT COUNT(*) FROM intervals") == [(0,)]
    _check_rollups_equal_raw(store, written)


def test_whether_a_stream_has_deltas_is_what_reading_them_finds(store: Store) -> None:
    """``Store.has_deltas`` (a round's check that a stream is live) answers as
    ``intervals`` would over blocks, raw rows and the gap between the runs, without
    decoding the minutes wholly inside the range."""
    import random

    raw = _raw(store)
    lo, hi = raw[0].end - 90, raw[-1].end + 90
    store.roll_up(raw[len(raw) // 2].end)  # half in minute blocks, half raw rows
    rng = random.Random(7)
    ends = [d.end for d in raw]
    starts = [*ends, *(e - 1e-3 for e in ends), *(rng.uniform(lo, hi) for _ in range(150))]
    store.close()
    fresh = Store(store.path)  # nothing held in memory: the tables answer
    assert fresh.intervals(TARGET, MODEL, 0, 2e9) == raw
    fresh.close()
    fresh = Store(store.path)
    checked = 0
    for start in starts:
        for span in (1.0, 4.9, 5.0, 30.0, 61.0, 150.0, 700.0):
            want = any(start < e <= start + span for e in ends)
            assert fresh.has_deltas(TARGET, MODEL, start, start + span) == want, (start, span)
            checked += 1
    assert checked > 1000
    assert not fresh.has_deltas(TARGET, "no-such-model", lo, hi)
    fresh.close()
