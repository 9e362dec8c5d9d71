"""The store's recent deltas are held packed: every read returns what SQLite returns."""

from __future__ import annotations

import dataclasses
import math
import random
import struct
from pathlib import Path

import pytest

from app.model import HistogramDelta, IntervalDelta
from app.sim.record import record
from app.sources.recording import read_scrapes
from app.store.deltapack import PackedDelta, pack, unpack
from app.store.recent import RecentDeltas
from app.store.sqlite import Store

B = (0.1, 0.5, 1.0)


def bits(x: object) -> object:
    """A number as its exact bits (NaN payloads, -0.0), anything else as itself."""
    return struct.pack("<d", x) if isinstance(x, float) else x


def exact(d: IntervalDelta) -> tuple[object, ...]:
    """Every field of ``d`` with its dicts' order and its floats' bits."""
    hists = [
        (n, h.bounds, [(i, bits(v)) for i, v in h.buckets.items()], bits(h.sum), bits(h.count))
        for n, h in d.histograms.items()
    ]
    return (
        d.target,
        d.model_name,
        bits(d.start),
        bits(d.end),
        hists,
        [(k, bits(v)) for k, v in d.counters.items()],
        [(k, bits(v)) for k, v in d.gauges.items()],
        d.reset,
        d.missing,
    )


def odd_delta(end: float) -> IntervalDelta:
    """A delta with the numbers a codec gets wrong: NaN payloads, ±inf, -0.0, tiny and
    huge floats, an empty histogram, bucket keys out of order, a reset, missing signals."""
    nan = struct.unpack("<d", struct.pack("<Q", 0x7FF8_0000_0000_0123))[0]
    return IntervalDelta(
        target="t",
        model_name="m",
        start=end - 5.0,
        end=end,
        histograms={
            "ttft": HistogramDelta(B, {3: 1.0, 0: -0.0, 2: 5e-324}, math.inf, 4.0),
            "itl": HistogramDelta(B, {}, 0.0, 0.0),
            "e2e": HistogramDelta((1.0,) * 0, {0: 1.7976931348623157e308}, nan, 1.0),
        },
        counters={"preemptions": -0.0, "prompt_tokens": 2.0**60, "spec_drafts": -math.inf},
        gauges={"running": nan, "kv_usage": 0.1 + 0.2},
        reset=True,
        missing=("waiting",),
    )


def test_a_packed_delta_unpacks_to_the_same_bits_and_order() -> None:
    d = odd_delta(10.0)
    p = pack(d)
    assert isinstance(p, PackedDelta)
    assert exact(unpack(p, "t", "m", 10.0)) == exact(d)


def test_deltas_of_one_layout_share_it() -> None:
    first = pack(odd_delta(5.0))
    second = pack(odd_delta(10.0), first.layout if isinstance(first, PackedDelta) else None)
    assert isinstance(first, PackedDelta) and isinstance(second, PackedDelta)
    assert second.layout is first.layout


@pytest.mark.parametrize(
    "odd",
    [
        HistogramDelta(B, {-1: 1.0}, 1.0, 1.0),  # an index an unsigned array cannot hold
        HistogramDelta(B, {0: 10**400}, 1.0, 1.0),  # a number no float holds
    ],
)
def test_a_delta_that_does_not_pack_is_kept_as_it_is(odd: HistogramDelta) -> None:
    d = dataclasses.replace(odd_delta(5.0), histograms={"ttft": odd})
    assert pack(d) is d
    assert unpack(d, "t", "m", 5.0) is d
    recent = RecentDeltas(60.0)
    recent.add([d])
    recent.fill(("t", "m"), 0.0, 5.0, [d])
    assert recent.get(("t", "m"), 0.0, 5.0) == [d]


def test_recent_reads_return_exactly_what_the_decoded_path_returns(tmp_path: Path) -> None:
    rec = read_scrapes(record("incident", tmp_path / "rec", duration=240, seed=3, start_unix=0))
    ((model, deltas),) = rec.deltas.items()
    rng = random.Random(7)
    fast = Store(tmp_path / "fast.db", recent_s=75.0)
    plain = Store(tmp_path / "plain.db")  # every read decoded from rows and blocks
    targets = ("a", "b")
    for k, d in enumerate(deltas):
        written = [dataclasses.replace(d, target=t) for t in targets]
        if k % 13 == 12:  # the same end again: the store keeps the last
            written.append(dataclasses.replace(deltas[k - 1], target="a", end=d.end, start=d.start))
        for store in (fast, plain):
            store.write_round([], written, [])
            if k % 12 == 11:
                store.roll_up(d.end - 60.0)  # minutes into blocks, as the service does
        now = d.end
        for t in targets:
            start = now - rng.choice((60.0, 60.0, 65.0, 75.0, 200.0))
            got = fast.intervals(t, model, start, now)
            want = plain.intervals(t, model, start, now)
            assert [exact(x) for x in got] == [exact(x) for x in want]
    assert fast._recent.hits > len(deltas)  # most reads were answered from memory
    assert all(
        isinstance(p, PackedDelta) for held in fast._recent._held.values() for p in held.packed
    )
