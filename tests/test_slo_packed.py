"""Packed SLO counts give back exactly the counts they were given, at a fraction of the size."""

from __future__ import annotations

import tracemalloc

from app.fleet.packed import PackedCounts, pack, unpack
from app.fleet.slo import SloCounts, Tally

FULL = SloCounts(
    tallies={
        "ttft": Tally(9.5, 10.0, 9.0, 10.0, True, False),
        "itl": Tally(990.0, 1000.0, 990.0, 990.0, False, True),
        "errors": Tally(7.0, 8.0, 7.0, 7.0),
    },
    goodput_tpot=Tally(0.1 + 0.2, 8.0, 0.0, 8.0, True, True),
    finished=8.0,
    by_reason={"stop": 6.0, "length": 1.0, "error": 1.0},
    covered=300.0000001,
)


def counts(k: int) -> SloCounts:
    """Counts of their own (as a chunk's are): no object shared with another's."""
    x = k + 0.5
    return SloCounts(
        tallies={
            n: Tally(x + i, x + 2 * i, x, x + 3 * i)
            for i, n in enumerate(("ttft", "itl", "errors"))
        },
        goodput_tpot=Tally(x, x + 1.0, x, x + 2.0),
        finished=x + 7.0,
        by_reason={"stop": x + 1.0, "length": x + 2.0, "error": x + 3.0},
        covered=300.0 + x,
    )


def test_pack_round_trips_exactly() -> None:
    for c in (
        FULL,
        SloCounts(),
        SloCounts(covered=5.0),
        SloCounts(tallies={"ttft": Tally(1.0, 2.0, 1.0, 1.0)}, finished=None),
        SloCounts(by_reason={"abort": 2.0}, finished=2.0, covered=5.0),
    ):
        assert unpack(pack(c)) == c
    assert pack(SloCounts()) is None


def test_a_packed_map_behaves_as_a_dict_and_is_small() -> None:
    m = PackedCounts()
    m[3] = FULL
    m[4] = SloCounts()
    assert 3 in m and 5 not in m and len(m) == 2 and sorted(m) == [3, 4]
    assert m[3] == FULL and m.get(5) is None and m[4].empty
    del m[4]
    assert list(m) == [3]
    tracemalloc.start()
    packed = PackedCounts()
    for k in range(1000):
        packed[k] = counts(k)
    size_packed = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    tracemalloc.start()
    plain = {k: counts(k) for k in range(1000)}
    size_plain = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(plain) == len(packed)
    assert size_packed * 3 < size_plain  # a third or less
