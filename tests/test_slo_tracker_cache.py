"""The tracker's caches (closed chunks, head minutes, the shared open region) never
change a count: a sliding evaluation equals counting the deltas directly."""

from __future__ import annotations

import random
import threading

import pytest

from app.fleet.count_cache import CountCache
from app.fleet.deltas import MemorySource
from app.fleet.slo import SloSpec, delta_counts
from app.fleet.tracker import BURN_WINDOWS
from app.model import HistogramDelta, IntervalDelta

BOUNDS = (0.5, 1.0, 2.0, 5.0)
SPEC = SloSpec("chat", target=0.99, ttft=2.0, itl=0.1)


def _source(seed: int, seconds: float) -> MemorySource:
    rng = random.Random(seed)
    out = []
    for k in range(1, int(seconds / 5) + 1):
        end = 5.0 * k
        buckets = {i: float(rng.randint(0, 4)) for i in range(5) if rng.random() < 0.6}
        n = sum(buckets.values())
        out.append(
            IntervalDelta(
                target="a",
                model_name="m",
                start=end - 5.0,
                end=end,
                histograms={"ttft": HistogramDelta(BOUNDS, buckets, 0.3 * n, n)},
                counters={"finished:stop": n, "finished:abort": float(rng.randint(0, 1))},
                gauges={},
            )
        )
    return MemorySource({("a", "m"): out})


@pytest.mark.parametrize("step", [15.0, 60.0, 7.0])
def test_sliding_evaluations_equal_direct_counts(step: float) -> None:
    source = _source(3, 2.5 * 3600.0)
    cache = CountCache(source, SPEC)
    stream = ("a", "m")
    end = 5400.0 + 2.5
    while end < 2.5 * 3600.0 - 60.0:
        cache.begin()
        closed = end - 10.0
        for _, seconds in BURN_WINDOWS[:3] + ((3600.0 * 1.5, 5400.0),):
            got, since = cache.range(stream, end - seconds, end, closed_until=closed)
            want = delta_counts(source.intervals("a", "m", end - seconds, end), SPEC)
            assert since == end - seconds
            assert got.tallies["ttft"].good == pytest.approx(want.tallies["ttft"].good)
            assert got.tallies["ttft"].total == pytest.approx(want.tallies["ttft"].total)
            assert got.by_reason == pytest.approx(want.by_reason)
        end += step
    assert len(cache.minutes) <= 8, "head minutes of chunks no head sits in are dropped"


def test_slo_instances_are_reevaluated_every_refresh_interval() -> None:
    from app.diagnose import DEFAULT_CONFIG
    from app.evaluate.instances import SloInputs

    source = _source(5, 1800.0)
    inputs = SloInputs(source, [SPEC], DEFAULT_CONFIG, ui_base_url="http://ui", refresh_s=60.0)
    evaluations: list[float] = []
    real = inputs.tracker.evaluate

    def counting(end: float, *args: object, **kwargs: object) -> object:
        evaluations.append(end)
        return real(end, *args, **kwargs)  # type: ignore[arg-type]

    inputs.tracker.evaluate = counting  # type: ignore[method-assign]
    firsts = [inputs.instances(t, source.streams(), {}) for t in (900.0, 915.0, 945.0)]
    assert firsts[0] and firsts[1] is firsts[0] and firsts[2] is firsts[0]
    assert inputs.instances(960.0, source.streams(), {}) is not firsts[0]
    assert evaluations == [900.0, 960.0]


def _shifted(source: MemorySource, by: float) -> list[IntervalDelta]:
    return [
        IntervalDelta(
            target=d.target,
            model_name=d.model_name,
            start=d.start + by,
            end=d.end + by,
            histograms=d.histograms,
            counters=d.counters,
            gauges=d.gauges,
        )
        for d in source.intervals("a", "m", 0.0, 1e12)
    ]


def test_a_young_stream_keeps_no_chunk_before_its_first_delta() -> None:
    # An hour of data that starts 29 days into a 30-day period: the chunks before it are
    # known empty from the stream's first delta, so none is read or kept.
    young = 29 * 86400.0
    source = MemorySource({("a", "m"): _shifted(_source(7, 3600.0), young)})
    cache = CountCache(source, SPEC)
    end = young + 3600.0
    cache.begin()
    got, since = cache.range(("a", "m"), end - 30 * 86400.0, end, closed_until=end)
    want = delta_counts(source.intervals("a", "m", 0.0, end), SPEC)
    assert since == end - 30 * 86400.0  # complete: nothing older exists
    assert got.tallies["ttft"].total == pytest.approx(want.tallies["ttft"].total)
    assert len(cache.chunks[("a", "m")]) <= 13  # the hour's 12 chunks (and its edge)


def test_a_backfill_older_than_the_first_delta_is_counted_next_evaluation() -> None:
    older = _source(8, 3600.0)
    newer = _shifted(_source(9, 3600.0), 3600.0)
    deltas = {("a", "m"): newer}
    source = MemorySource(deltas)
    cache = CountCache(source, SPEC)
    stream = ("a", "m")
    cache.begin()
    first, _ = cache.range(stream, 0.0, 7200.0, closed_until=7200.0)
    source = MemorySource({("a", "m"): older.intervals("a", "m", 0.0, 1e9) + newer})
    cache.source = source
    cache.begin()
    again, since = cache.range(stream, 0.0, 7200.0, closed_until=7200.0)
    want = delta_counts(source.intervals("a", "m", 0.0, 7200.0), SPEC)
    assert since == 0.0
    assert again.tallies["ttft"].total == pytest.approx(want.tallies["ttft"].total)
    assert again.tallies["ttft"].total > first.tallies["ttft"].total


class CountingSource:
    def __init__(self, inner: MemorySource) -> None:
        self.inner = inner
        self.read = 0

    def intervals(self, target: str, model: str, start: float, end: float) -> list[IntervalDelta]:
        got = self.inner.intervals(target, model, start, end)
        self.read += len(got)
        return got

    def first_end(self, target: str, model: str) -> float | None:
        return self.inner.first_end(target, model)


def test_closed_minutes_are_counted_once_not_read_every_evaluation() -> None:
    inner = _source(11, 3600.0)
    source = CountingSource(inner)
    cache = CountCache(source, SPEC)
    stream = ("a", "m")
    reads = []
    end = 1800.0 + 2.5
    while end < 3000.0:
        cache.begin()
        before = source.read
        for _, seconds in BURN_WINDOWS[:2]:  # 5 m and 30 m
            got, _ = cache.range(stream, end - seconds, end, closed_until=end - 10.0)
            want = delta_counts(inner.intervals("a", "m", end - seconds, end), SPEC)
            assert got.tallies["ttft"].total == pytest.approx(want.tallies["ttft"].total)
        if end > 2400.0:
            reads.append(source.read - before)
        end += 15.0
    # Warm, an evaluation reads its partial minutes (about 12 deltas each) and, once per
    # chunk, the 30-minute window's new head chunk (60): the 5-minute window alone used
    # to read its 60 deltas every time, and a closing chunk its 60 again.
    assert sum(reads) / len(reads) < 40
    assert max(reads) <= 60 + 4 * 12


def test_a_background_refresh_serves_the_last_evaluation_meanwhile() -> None:
    from app.diagnose import DEFAULT_CONFIG
    from app.evaluate.instances import SloInputs

    source = _source(5, 1800.0)
    inputs = SloInputs(
        source, [SPEC], DEFAULT_CONFIG, ui_base_url="http://ui", refresh_s=60.0, background=True
    )
    assert inputs.instances(900.0, source.streams(), {}) is None  # the first: in a thread
    assert inputs._refresh is not None
    inputs._refresh.join(30)
    first = inputs.instances(900.0, source.streams(), {})
    assert first
    stale = inputs.instances(960.0, source.streams(), {})  # refreshing in a thread
    assert stale is first
    assert inputs._refresh is not None
    inputs._refresh.join(30)
    fresh = inputs.instances(961.0, source.streams(), {})
    assert fresh is not first and fresh  # the refreshed evaluation, at 960
    assert inputs._last is not None and inputs._last[0] == 960.0


class GatedSource(CountingSource):
    """Reads in the SLO refresh thread wait at a gate (the first says it arrived)."""

    def __init__(self, inner: MemorySource) -> None:
        super().__init__(inner)
        self.arrived = threading.Event()
        self.gate = threading.Event()

    def intervals(self, target: str, model: str, start: float, end: float) -> list[IntervalDelta]:
        if threading.current_thread().name == "phasewatch-slo":
            self.arrived.set()
            assert self.gate.wait(30)
        return super().intervals(target, model, start, end)

    def streams(self) -> list[tuple[str, str]]:
        return self.inner.streams()


def test_a_stopped_background_refresh_ends_before_its_source_closes() -> None:
    from app.diagnose import DEFAULT_CONFIG
    from app.evaluate.instances import SloInputs

    source = GatedSource(_source(5, 1800.0))
    inputs = SloInputs(
        source, [SPEC], DEFAULT_CONFIG, ui_base_url="http://ui", refresh_s=60.0, background=True
    )
    source.gate.set()
    inputs.instances(900.0, source.streams(), {})  # the first count, in its thread too
    assert inputs.wait(30)  # done before the gate closes (a busy machine may be slower)
    assert inputs._last is not None and inputs._last[0] == 900.0
    source.gate.clear()
    inputs.instances(960.0, source.streams(), {})  # a refresh starts in its thread
    assert source.arrived.wait(30)  # it is reading
    assert inputs.stop(0) is False  # asked to stop while it waits at the gate
    source.gate.set()  # let it read on: it stops between fleets
    assert inputs.stop(30) is True
    assert inputs._refresh is not None and not inputs._refresh.is_alive()
    assert inputs._last is not None and inputs._last[0] == 900.0  # the refresh gave up


def test_a_stream_whose_counts_aged_out_leaves_no_entry_behind() -> None:
    source = _source(5, 2 * 3600.0)
    cache = CountCache(source, SPEC)
    stream = ("a", "m")
    windows = [w for _, w in BURN_WINDOWS]
    end = 2 * 3600.0
    cache.begin()
    cache.range(stream, end - 3600.0, end, closed_until=end - 10.0)
    cache.prune(end, 86400.0, windows=windows)
    assert stream in cache.chunks or stream in cache.hours, "held while it counts"
    later = end + 3 * 86400.0  # a removed target's counts, past what is kept
    cache.begin()
    cache.prune(later, 86400.0, windows=windows)
    books = (cache.chunks, cache.hours, cache.days, cache.open_minutes)
    assert all(stream not in book for book in books)
