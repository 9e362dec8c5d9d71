"""A month of SLO counts in bounded memory: closed hours read from roll-ups, old hours
folded into days, the period's start re-read where it enters a folded day — and every
count still equal to counting the deltas directly."""

from __future__ import annotations

import random

import pytest

from app.fleet.count_cache import CountCache
from app.fleet.deltas import MemorySource
from app.fleet.slo import SloCounts, SloSpec, delta_counts
from app.fleet.tracker import BURN_WINDOWS, SloTracker
from app.model import HistogramDelta, IntervalDelta
from app.store.sqlite import ScrapeRecord, Store
from app.windows.rollup import rollups_of

BOUNDS = (0.5, 1.0, 2.0, 5.0)
SPEC = SloSpec("chat", target=0.99, ttft=2.0, itl=0.1, period_s=5 * 86400.0)
STREAM = ("a", "m")
DAY = 86400.0


def _deltas(seed: int, start: float, end: float, step: float) -> list[IntervalDelta]:
    rng = random.Random(seed)
    out = []
    t = start + step
    while t <= end:
        buckets = {i: float(rng.randint(0, 4)) for i in range(5) if rng.random() < 0.6}
        n = sum(buckets.values())
        out.append(
            IntervalDelta(
                target="a",
                model_name="m",
                start=t - step,
                end=t,
                histograms={
                    "ttft": HistogramDelta(BOUNDS, buckets, 0.3 * n, n),
                    "itl": HistogramDelta(BOUNDS, dict(buckets), 0.1 * n, n),
                },
                counters={"finished:stop": n, "finished:error": float(rng.randint(0, 1))},
                gauges={},
            )
        )
        t += step
    return out


def _same(got: SloCounts, want: SloCounts) -> None:
    for name in ("ttft", "itl", "errors"):
        assert got.tallies[name].good == pytest.approx(want.tallies[name].good, rel=1e-12)
        assert got.tallies[name].total == pytest.approx(want.tallies[name].total, rel=1e-12)
    assert got.by_reason == pytest.approx(want.by_reason, rel=1e-12)
    assert got.covered == pytest.approx(want.covered, rel=1e-12)


class Counting:
    """A source of deltas that counts those read through it."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.deltas = 0
        self.rollup_reads = 0

    def intervals(self, target: str, model: str, start: float, end: float) -> list[IntervalDelta]:
        got = self.inner.intervals(target, model, start, end)  # type: ignore[attr-defined]
        self.deltas += len(got)
        return list(got)

    def first_end(self, target: str, model: str) -> float | None:
        return self.inner.first_end(target, model)  # type: ignore[attr-defined,no-any-return]


class CountingRolled(Counting):
    """A source of deltas and roll-ups (a store) that counts what is read through it."""

    def rollups(self, target: str, model: str, start: float, end: float, res: float) -> object:
        self.rollup_reads += 1
        return self.inner.rollups(target, model, start, end, res)  # type: ignore[attr-defined]


def _store_with(deltas: list[IntervalDelta], until: float) -> Store:
    store = Store(":memory:")
    for i in range(0, len(deltas), 60):
        part = deltas[i : i + 60]
        store.write_round(
            [ScrapeRecord("a", d.end, True, None, None, 0.0, 0, 0) for d in part], part, []
        )
        store.roll_up(part[-1].end)
    store.roll_up(until)
    return store


def test_counts_read_from_rollups_equal_the_deltas_and_outlive_them() -> None:
    deltas = _deltas(1, 0.0, 2 * DAY, 15.0)
    end = 2 * DAY
    store = _store_with(deltas, end)
    direct = MemorySource({STREAM: deltas})
    source = CountingRolled(store)
    cache = CountCache(source, SPEC)
    cache.begin()
    for seconds in (DAY + 1234.0, 7200.0, 2 * DAY):
        got, since = cache.range(STREAM, end - seconds, end, closed_until=end)
        assert since == end - seconds
        _same(got, delta_counts(direct.intervals("a", "m", end - seconds, end), SPEC))
    # Whole hours came from hour roll-ups: the deltas read are the window heads' only.
    assert source.deltas < 2 * 3600 / 15
    # Retention drops the raw deltas older than a day; the roll-ups keep the counts.
    store.enforce_retention(end, DAY, 30 * DAY)
    assert store.intervals("a", "m", 0.0, DAY - 60.0) == []
    assert store.first_end("a", "m") == 15.0
    fresh = CountCache(store, SPEC)
    fresh.begin()
    got, since = fresh.range(STREAM, 3600.0, end, closed_until=end)
    assert since == 3600.0
    _same(got, delta_counts(direct.intervals("a", "m", 3600.0, end), SPEC))


@pytest.mark.parametrize("order", ["older first", "raw first"])
def test_imported_rollups_count_like_the_deltas_they_hold(order: str) -> None:
    old = _deltas(2, 0.0, 3 * DAY + 1800.0, 30.0)
    new = _deltas(3, 3 * DAY + 1800.0, 4 * DAY, 30.0)
    store = Store(":memory:")
    if order == "older first":
        assert store.import_rollups("a", "m", rollups_of(old, 60.0)) == 3 * 1440 + 30
        store.write_round([], new, [])
        store.roll_up(4 * DAY)
    else:  # the raw part stored, an older history back-filled under it
        store.write_round([], new, [])
        store.roll_up(4 * DAY)
        store.import_rollups("a", "m", rollups_of(old, 60.0))
    with pytest.raises(ValueError, match="neither before nor after"):
        store.import_rollups("a", "m", rollups_of(old[100:104], 60.0))
    assert store.first_end("a", "m") == 30.0
    assert store.intervals("a", "m", 0.0, 3 * DAY) == []  # no raw deltas behind them
    hour = next(store.rollups("a", "m", 3 * DAY, 3 * DAY + 3600.0, 3600.0)).rollup()
    assert hour.intervals == 120  # the hour the two parts share, whole
    tracker = SloTracker(store, [slo := SloSpec("chat", period_s=4 * DAY)])
    (status,) = tracker.evaluate(4 * DAY, [STREAM], {})
    assert status.budget_from == 0.0
    want = delta_counts(old + new, slo)
    assert status.budget.events == pytest.approx(want.tallies["ttft"].total)
    _same(tracker._caches[slo.key].range(STREAM, 0.0, 4 * DAY, closed_until=4 * DAY)[0], want)


def _slide(tracker: SloTracker, source: MemorySource, start: float, end: float, step: float):
    t = start
    while t <= end:
        tracker.evaluate(t, [STREAM], {})
        t += step
    return tracker


def _held(cache: CountCache) -> tuple[int, int, int]:
    return len(cache.chunks[STREAM]), len(cache.hours[STREAM]), len(cache.days[STREAM])


def test_the_cache_stops_growing_and_the_budget_stays_exact_as_days_fold() -> None:
    deltas = _deltas(4, 0.0, 12 * DAY, 60.0)
    source = MemorySource({STREAM: deltas})
    counting = Counting(source)
    tracker = SloTracker(counting, [SPEC])
    sizes = {}
    t = 3 * DAY + 17.0
    for day in (7, 9, 12):
        end = day * DAY - 5 * 3600.0 - 300.0 + 17.0
        _slide(tracker, source, t, end - 600.0, 3600.0 + 60.0)
        t = end + 3660.0
        (status,) = tracker.evaluate(end, [STREAM], {})
        (cache,) = tracker._caches.values()
        sizes[day] = _held(cache)
        start = tracker.period_start(SPEC, end)
        assert start % 3600 == 0 and start % DAY != 0  # the period starts inside a day
        assert status.budget_from == start
        want = delta_counts(source.intervals("a", "m", start, end), SPEC)
        assert status.budget.events == pytest.approx(want.tallies["ttft"].total)
        for label, seconds in BURN_WINDOWS:
            _same(
                status.counts[label],
                delta_counts(source.intervals("a", "m", end - seconds, end), SPEC),
            )
    chunks, hours, days = sizes[12]
    assert sizes[9][1:] == pytest.approx(sizes[12][1:], abs=2)  # past the period: no growth
    # Chunks: the open hour's and those at each window's start (a bound; which of them
    # are held depends on the evaluations before).
    assert days <= 6 and hours <= 26 + 24 and max(sizes[9][0], chunks) <= 12 + 7 * 13
    # A steady evaluation reads its window heads, not the period again.
    before = counting.deltas
    tracker.evaluate(end + 60.0, [STREAM], {})
    assert counting.deltas - before < 200


def test_a_period_start_inside_a_folded_day_reads_its_hours_once() -> None:
    deltas = _deltas(5, 0.0, 8 * DAY, 60.0)
    store = _store_with(deltas, 8 * DAY)
    source = CountingRolled(store)
    tracker = SloTracker(source, [SPEC])
    end = 7 * DAY + 7200.0 + 30.0
    tracker.evaluate(end, [STREAM], {})
    reads = []
    for _ in range(6):  # an hour, the period's start moving into a folded day
        end += 600.0
        before = source.rollup_reads
        (status,) = tracker.evaluate(end, [STREAM], {})
        reads.append(source.rollup_reads - before)
        start = tracker.period_start(SPEC, end)
        want = delta_counts(MemorySource({STREAM: deltas}).intervals("a", "m", start, end), SPEC)
        assert status.budget.events == pytest.approx(want.tallies["ttft"].total)
    assert max(reads) <= 20, reads
