"""Exact sums: what every window and fleet total is added up with.

Every sum is exact and rounded once (Shewchuk's algorithm, the one behind
``math.fsum``), so a total does not depend on the order of summation, and values may be
removed again as exactly as they were added: the sliding windows of
:mod:`app.windows.aggregate` give bit-identical results to a window summed afresh,
however long the history.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from app.model import HistogramDelta

__all__ = ["ExactSum", "HistogramSum", "histogram_result", "sum_histogram_deltas"]


def _int_pieces(n: int) -> list[float]:
    """An integer as floats that add up to it exactly (one float below 2**53)."""
    pieces: list[float] = []
    while n:
        f = float(n)
        pieces.append(f)
        n -= int(f)
    return pieces


class ExactSum:
    """A running sum that is exact (values may also be removed) and rounded once.

    Integer-valued inputs (bucket counts, token counts: the common case) go to an exact
    Python ``int``; the others to Shewchuk's non-overlapping partials. :meth:`value` is
    the correctly rounded exact sum — the same float ``math.fsum`` returns for the values
    currently held. Infinities and NaNs are counted apart so they can be removed again.
    """

    __slots__ = ("_int", "_partials", "_pinf", "_ninf", "_nan")

    def __init__(self) -> None:
        self._int = 0
        self._partials: list[float] = []
        self._pinf = 0
        self._ninf = 0
        self._nan = 0

    def add(self, x: float) -> None:
        self.update(x, 1)

    def sub(self, x: float) -> None:
        self.update(x, -1)

    def update(self, x: float, sign: int) -> None:
        """Add ``x`` (``sign`` 1) or remove it (``sign`` -1)."""
        if x - x != 0:  # inf or NaN
            if math.isnan(x):
                self._nan += sign
            elif x > 0:
                self._pinf += sign
            else:
                self._ninf += sign
            return
        n = int(x)
        if n == x:
            self._int += n if sign > 0 else -n
            return
        if sign < 0:
            x = -x
        partials = self._partials
        i = 0
        for y in partials:
            if abs(x) < abs(y):
                x, y = y, x
            hi = x + y
            if hi - hi != 0:
                raise OverflowError("intermediate overflow in ExactSum")
            lo = y - (hi - x)
            if lo:
                partials[i] = lo
                i += 1
            x = hi
        partials[i:] = [x] if x else []

    def merge(self, other: ExactSum, sign: int = 1) -> None:
        """Add (``sign`` 1) or remove (``sign`` -1) everything ``other`` holds, exactly."""
        self._int += other._int if sign > 0 else -other._int
        for x in other._partials:
            self.update(x, sign)
        self._pinf += sign * other._pinf
        self._ninf += sign * other._ninf
        self._nan += sign * other._nan

    def state(self) -> tuple[int, tuple[float, ...], int, int, int]:
        """What the sum holds: ``(int part, float partials, +inf, -inf, nan counts)``;
        :meth:`from_state` rebuilds it (a roll-up keeps sums this way, not rounded)."""
        return self._int, tuple(self._partials), self._pinf, self._ninf, self._nan

    @classmethod
    def from_state(cls, state: tuple[int, Sequence[float], int, int, int]) -> ExactSum:
        out = cls()
        out._int, partials, out._pinf, out._ninf, out._nan = state
        out._partials = list(partials)
        return out

    def value(self) -> float:
        if self._nan > 0 or (self._pinf > 0 and self._ninf > 0):
            return math.nan
        if self._pinf > 0:
            return math.inf
        if self._ninf > 0:
            return -math.inf
        if not self._partials:
            return float(self._int)  # int → float is correctly rounded
        if not self._int:
            return math.fsum(self._partials)
        return math.fsum([*self._partials, *_int_pieces(self._int)])


class HistogramSum:
    """Summed deltas of one histogram signal with one bucket layout.

    Bucket increases are counts, so integers: those are summed as plain ``int`` (exact,
    and several times cheaper than an :class:`ExactSum` per bucket); a non-integer
    increase (a float counter, inf, NaN) goes to that bucket's :class:`ExactSum`.
    """

    __slots__ = ("members", "ints", "exact", "sum", "count")

    def __init__(self) -> None:
        self.members = 0
        self.ints: dict[int, int] = {}
        self.exact: dict[int, ExactSum] = {}
        self.sum = ExactSum()
        self.count = ExactSum()

    def apply(self, hd: HistogramDelta, sign: int) -> None:
        """Add ``hd`` (``sign`` 1) or remove it (``sign`` -1)."""
        self.members += sign
        ints = self.ints
        get = ints.get
        for index, inc in hd.buckets.items():
            if inc - inc == 0 and (n := int(inc)) == inc:  # finite and whole
                ints[index] = get(index, 0) + (n if sign > 0 else -n)
            else:
                acc = self.exact.get(index)
                if acc is None:
                    acc = self.exact[index] = ExactSum()
                acc.update(inc, sign)
        self.sum.update(hd.sum, sign)
        self.count.update(hd.count, sign)

    def merge(self, other: HistogramSum, sign: int = 1) -> None:
        """Add (``sign`` 1) or remove (``sign`` -1) another sum of the same layout, exactly
        (a roll-up's sum of many deltas counts as its ``members`` deltas)."""
        self.members += sign * other.members
        ints = self.ints
        for index, n in other.ints.items():
            ints[index] = ints.get(index, 0) + (n if sign > 0 else -n)
        for index, part in other.exact.items():
            acc = self.exact.get(index)
            if acc is None:
                acc = self.exact[index] = ExactSum()
            acc.merge(part, sign)
        self.sum.merge(other.sum, sign)
        self.count.merge(other.count, sign)

    def result(self, bounds: tuple[float, ...]) -> HistogramDelta:
        """The sum held, as a delta with ``bounds``; buckets that sum to 0 left out."""
        return histogram_result(bounds, self.ints, self.exact, self.sum.value(), self.count.value())


def histogram_result(
    bounds: tuple[float, ...],
    ints: Mapping[int, int],
    exact: Mapping[int, ExactSum],
    total: float,
    count: float,
) -> HistogramDelta:
    """A histogram's summed buckets (whole ones in ``ints``, the others' exact sums in
    ``exact``) as a delta with ``bounds``, its ``total`` and ``count``; buckets that sum
    to 0 are left out (what :meth:`HistogramSum.result` answers, from its parts)."""
    if not exact:  # the common case: whole counts only
        buckets = {index: float(n) for index, n in sorted(ints.items()) if n}
        return HistogramDelta(bounds=bounds, buckets=buckets, sum=total, count=count)
    buckets = {}
    for index in sorted(ints.keys() | exact.keys()):
        n = ints.get(index, 0)
        if index in exact:
            acc = exact[index]
            if n:
                acc = _plus_int(acc, n)
            v = acc.value()
        else:
            v = float(n)
        if v != 0:
            buckets[index] = v
    return HistogramDelta(bounds=bounds, buckets=buckets, sum=total, count=count)


def _plus_int(acc: ExactSum, n: int) -> ExactSum:
    """A copy of ``acc`` with the integer ``n`` added (exactly)."""
    out = ExactSum()
    out._int, out._partials = acc._int + n, list(acc._partials)
    out._pinf, out._ninf, out._nan = acc._pinf, acc._ninf, acc._nan
    return out


def sum_histogram_deltas(deltas: Sequence[HistogramDelta]) -> HistogramDelta | None:
    """Sum histogram deltas of several replicas (fleet views): per-bucket, sum, count.

    ``None`` for an empty list. All deltas must share the same bounds — summing
    different layouts bucket by bucket would be meaningless — else ``ValueError``;
    group by ``bounds`` first when a fleet mixes layouts.
    """
    if not deltas:
        return None
    bounds = deltas[0].bounds
    acc = HistogramSum()
    for hd in deltas:
        if hd.bounds != bounds:
            raise ValueError(f"cannot sum histograms with bounds {bounds} and {hd.bounds}")
        acc.apply(hd, 1)
    return acc.result(bounds)
