"""SLO counts kept compact: one array of floats per cached chunk or hour.

An :class:`~app.fleet.slo.SloCounts` is a handful of small objects (a dict of tallies,
each six fields, a dict of reasons): some 1.6–2.2 kB. The tracker keeps a day of
5-minute chunks and a period of hours per stream, so at a fleet's scale that is most of
the process. :class:`PackedCounts` stores each as a shape (which objectives and reasons
it has, shared by all entries of that shape, numbered) and one ``array('d')`` of that
number and its own numbers (under 0.4 kB), and rebuilds the same ``SloCounts`` when
read: every number is a float that round-trips exactly, and the two flags of a tally
are stored as 0 or 1.

Pure.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, MutableMapping

from app.fleet.slo import SloCounts, Tally

__all__ = ["PackedCounts", "pack", "unpack"]

# (objective names, has goodput, has finished, reason names)
Shape = tuple[tuple[str, ...], bool, bool, tuple[str, ...]]
_SHAPES: dict[Shape, int] = {}  # shape → its number, the first float of a packed entry
_SHAPE_LIST: list[Shape] = []
_EMPTY = SloCounts()


def _tally_values(t: Tally) -> tuple[float, ...]:
    return (
        t.good,
        t.total,
        t.good_min,
        t.good_max,
        1.0 if t.interpolated else 0.0,
        1.0 if t.beyond_top else 0.0,
    )


def _tally(v: array[float], i: int) -> Tally:
    return Tally(v[i], v[i + 1], v[i + 2], v[i + 3], v[i + 4] != 0.0, v[i + 5] != 0.0)


def pack(c: SloCounts) -> array[float] | None:
    """``c`` as numbers, the first of them its shape's number; None for empty counts."""
    if c.empty:
        return None
    names = tuple(sorted(c.tallies))
    reasons = tuple(sorted(c.by_reason))
    shape: Shape = (names, c.goodput_tpot is not None, c.finished is not None, reasons)
    number = _SHAPES.get(shape)
    if number is None:
        number = _SHAPES[shape] = len(_SHAPE_LIST)
        _SHAPE_LIST.append(shape)
    values = [float(number)]
    for name in names:
        values.extend(_tally_values(c.tallies[name]))
    if c.goodput_tpot is not None:
        values.extend(_tally_values(c.goodput_tpot))
    if c.finished is not None:
        values.append(c.finished)
    values.extend(c.by_reason[r] for r in reasons)
    values.append(c.covered)
    return array("d", values)  # made at its size: an array grown by extend over-allocates


def unpack(v: array[float] | None) -> SloCounts:
    """The counts :func:`pack` was given."""
    if v is None:
        return _EMPTY
    names, has_goodput, has_finished, reasons = _SHAPE_LIST[int(v[0])]
    i = 1
    tallies = {}
    for name in names:
        tallies[name] = _tally(v, i)
        i += 6
    goodput = None
    if has_goodput:
        goodput = _tally(v, i)
        i += 6
    finished = None
    if has_finished:
        finished = v[i]
        i += 1
    by_reason = {}
    for r in reasons:
        by_reason[r] = v[i]
        i += 1
    return SloCounts(tallies, goodput, finished, by_reason, v[i])


class PackedCounts(MutableMapping[int, SloCounts]):
    """A mapping of chunk or hour index to counts, held packed."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held: dict[int, array[float] | None] = {}

    def __getitem__(self, k: int) -> SloCounts:
        return unpack(self._held[k])

    def __setitem__(self, k: int, c: SloCounts) -> None:
        self._held[k] = pack(c)

    def __delitem__(self, k: int) -> None:
        del self._held[k]

    def __contains__(self, k: object) -> bool:
        return k in self._held

    def __iter__(self) -> Iterator[int]:
        return iter(self._held)

    def __len__(self) -> int:
        return len(self._held)
