"""SLO counts kept compact: one array of floats per cached chunk or hour.

An :class:`~app.fleet.slo.SloCounts` is a handful of small objects (a dict of tallies,
each six fields, a dict of reasons): some 1.6–2.2 kB. The tracker keeps a day of
5-minute chunks and a period of hours per stream, so at a fleet's scale that is most of
the process. :class:`PackedCounts` stores each as a shape (which objectives and reasons
it has, shared by all entries of that shape, numbered) and one ``array('d')`` of that
number and its own numbers (about 0.3 kB), and rebuilds the same ``SloCounts`` when
read: every number is a float that round-trips exactly, and the two flags of a tally
are stored as 0 or 1. A tally judged on a bucket edge (``good_min == good == good_max``,
no flag: the ITL, TPOT and error objectives at their usual bounds) is stored as its two
numbers, the shape saying so.

Pure.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, MutableMapping

from app.fleet.slo import SloCounts, Tally

__all__ = ["PackedCounts", "pack", "unpack"]

# (objective names, has goodput, has finished, reason names, each tally plain: two numbers)
Shape = tuple[tuple[str, ...], bool, bool, tuple[str, ...], tuple[bool, ...]]
_SHAPES: dict[Shape, int] = {}  # shape → its number, the first float of a packed entry
_SHAPE_LIST: list[Shape] = []
_EMPTY = SloCounts()


def _plain(t: Tally) -> bool:
    """Whether a tally is its good and total numbers alone (judged on a bucket edge)."""
    return t.good_min == t.good == t.good_max and not (t.interpolated or t.beyond_top)


def _tally_values(t: Tally, plain: bool) -> tuple[float, ...]:
    if plain:
        return (t.good, t.total)
    return (
        t.good,
        t.total,
        t.good_min,
        t.good_max,
        1.0 if t.interpolated else 0.0,
        1.0 if t.beyond_top else 0.0,
    )


def _tally(v: array[float], i: int, plain: bool) -> tuple[Tally, int]:
    """The tally at ``v[i]`` and the index after it."""
    if plain:
        return Tally(v[i], v[i + 1], v[i], v[i]), i + 2
    return Tally(v[i], v[i + 1], v[i + 2], v[i + 3], v[i + 4] != 0.0, v[i + 5] != 0.0), i + 6


def pack(c: SloCounts) -> array[float] | None:
    """``c`` as numbers, the first of them its shape's number; None for empty counts."""
    if c.empty:
        return None
    names = tuple(sorted(c.tallies))
    reasons = tuple(sorted(c.by_reason))
    tallies = [c.tallies[name] for name in names]
    if c.goodput_tpot is not None:
        tallies.append(c.goodput_tpot)
    plain = tuple([_plain(t) for t in tallies])  # no generator: no garbage a call
    shape: Shape = (names, c.goodput_tpot is not None, c.finished is not None, reasons, plain)
    number = _SHAPES.get(shape)
    if number is None:
        number = _SHAPES[shape] = len(_SHAPE_LIST)
        _SHAPE_LIST.append(shape)
    values = [float(number)]
    for t, p in zip(tallies, plain, strict=True):
        values.extend(_tally_values(t, p))
    if c.finished is not None:
        values.append(c.finished)
    values.extend(c.by_reason[r] for r in reasons)
    values.append(c.covered)
    return array("d", values)  # made at its size: an array grown by extend over-allocates


def unpack(v: array[float] | None) -> SloCounts:
    """The counts :func:`pack` was given."""
    if v is None:
        return _EMPTY
    names, has_goodput, has_finished, reasons, plain = _SHAPE_LIST[int(v[0])]
    i = 1
    tallies = {}
    for name, p in zip(names, plain, strict=False):
        tallies[name], i = _tally(v, i, p)
    goodput = None
    if has_goodput:
        goodput, i = _tally(v, i, plain[-1])
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

    __slots__ = ("_held", "_peak")

    def __init__(self) -> None:
        self._held: dict[int, array[float] | None] = {}
        self._peak = 0  # the most entries held since the last compact()

    def compact(self) -> None:
        """Give back the room of deleted entries (a dict never shrinks by itself: a
        month's fill, folded into days, would keep a month's table)."""
        if self._peak > 2 * len(self._held) + 8:
            self._held = dict(self._held)
        self._peak = len(self._held)

    def __getitem__(self, k: int) -> SloCounts:
        return unpack(self._held[k])

    def __setitem__(self, k: int, c: SloCounts) -> None:
        self._held[k] = pack(c)
        self._peak = max(self._peak, len(self._held))

    def __delitem__(self, k: int) -> None:
        del self._held[k]

    def __contains__(self, k: object) -> bool:
        return k in self._held

    def __iter__(self) -> Iterator[int]:
        return iter(self._held)

    def __len__(self) -> int:
        return len(self._held)
