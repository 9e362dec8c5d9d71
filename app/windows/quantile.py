"""``histogram_quantile`` for classic (cumulative ``le``) histograms, as Prometheus does it.

This is a line-by-line port of ``BucketQuantile`` in Prometheus' ``promql/quantile.go``
(the classic-histogram path of ``histogram_quantile()``), including
``coalesceBuckets`` and ``ensureMonotonicAndIgnoreSmallDeltas``. We match current
Prometheus (2.49 and later, 3.x): the small-delta tolerance came with
prometheus/prometheus#13153; earlier releases (2.42–2.48) only ran ``ensureMonotonic``
(a running maximum), which differs only when neighbouring buckets differ by less than a
relative 1e-12 — then older Prometheus may answer "≥ top bound" where we, like current
Prometheus, interpolate.

Steps and edge cases, in the order Prometheus applies them:

1. ``q`` is NaN → NaN. ``q < 0`` → -Inf. ``q > 1`` → +Inf. These are checked first, so
   they hold even for an empty histogram. They come back as ``Quantile(value=nan)``,
   ``Quantile(value=-inf)`` and ``Quantile(value=inf)``: a float, not None, because they
   are answers to a malformed question, not "no data".
2. Buckets are sorted by upper bound (the ``+Inf`` bucket last). Buckets with the same
   upper bound are *coalesced* by adding their counts (Prometheus does this when two
   series carry the same ``le``, e.g. ``1`` and ``1.0``).
3. Monotonicity is repaired: walking up the buckets, a count whose relative difference
   from the last accepted count is below 1e-12 (``almost.Equal``) is set to that count
   (float noise, either direction); a count that is lower than the last accepted count is
   raised to it (the "envelope"). The last accepted count is not updated in either
   correction.
4. Fewer than 2 buckets (after coalescing) → NaN in Prometheus; here ``value=None``.
5. No observations (the ``+Inf`` bucket's count is 0) → NaN in Prometheus; here
   ``value=None`` — never 0.
6. ``rank = q * total``; the bucket is the first *finite* bucket whose cumulative count
   is ≥ rank (binary search, like ``sort.Search``).
7. No finite bucket reaches the rank → the rank is in the ``+Inf`` bucket: the answer is
   the highest finite bound, with ``ge_top_bucket=True`` (show it as "≥ value").
8. The rank is in the first bucket and its upper bound is ≤ 0 → that bound is returned.
9. Otherwise linear interpolation inside the bucket: the lower edge is the previous
   bucket's bound, or 0 for the first bucket (a positive first bound implies the natural
   lower bound 0).
10. Float arithmetic follows IEEE like Go's: ``q = 0`` with an empty first bucket gives
    ``bound * (0 / 0)`` = NaN in Prometheus, and here ``Quantile(value=nan)``.

The total is the ``+Inf`` bucket's count after repair, not the ``_count`` series.
"""

from __future__ import annotations

import bisect
import itertools
import math
import operator
from collections.abc import Mapping, Sequence

from app.model import HistogramDelta, Quantile

# promql/quantile.go smallDeltaTolerance
SMALL_DELTA_TOLERANCE = 1e-12
# math.Float64frombits(0x0010000000000000): the smallest positive normal float64.
_MIN_NORMAL = 2.2250738585072014e-308


def almost_equal(a: float, b: float, epsilon: float) -> bool:
    """Prometheus' ``util/almost.Equal``: relative comparison, absolute near zero."""
    if math.isnan(a) and math.isnan(b):
        return True
    if a == b:
        return True
    abs_sum = abs(a) + abs(b)
    diff = abs(a - b)
    if a == 0 or b == 0 or abs_sum < _MIN_NORMAL:
        return diff < epsilon * _MIN_NORMAL
    return diff / min(abs_sum, 1.7976931348623157e308) < epsilon


def _go_div(a: float, b: float) -> float:
    """IEEE division as Go does it (no ZeroDivisionError)."""
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        sign = math.copysign(1.0, a) * math.copysign(1.0, b)
        return math.copysign(math.inf, sign)
    return a / b


def _coalesce(buckets: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """``coalesceBuckets``: add up the counts of sorted buckets with equal bounds."""
    out: list[tuple[float, float]] = []
    last_bound, last_count = buckets[0]
    for bound, count in buckets[1:]:
        if bound == last_bound:
            last_count += count
        else:
            out.append((last_bound, last_count))
            last_bound, last_count = bound, count
    out.append((last_bound, last_count))
    return out


def _ensure_monotonic(counts: list[float], tolerance: float) -> tuple[bool, bool]:
    """``ensureMonotonicAndIgnoreSmallDeltas``, in place. Returns (forced, fixed)."""
    forced = fixed = False
    prev = counts[0]
    for i in range(1, len(counts)):
        cur = counts[i]
        if cur == prev:
            continue
        # almost_equal inlined for the usual case of two positive counts (same result).
        if prev > 0 and cur > 0 and _MIN_NORMAL <= prev + cur < math.inf:
            close = abs(prev - cur) / (prev + cur) < tolerance
        else:
            close = almost_equal(prev, cur, tolerance)
        if close:
            counts[i] = prev
            fixed = True
            continue
        if cur < prev:
            counts[i] = prev
            forced = True
            continue
        prev = cur
    return forced, fixed


_VALUE, _NO_DATA, _TOP = "value", "no_data", "top"


class _Prepared:
    """Buckets sorted, coalesced and repaired once, for any number of quantiles."""

    __slots__ = ("bounds", "counts", "forced", "fixed", "no_data")

    def __init__(self, buckets: Sequence[tuple[float, float]]) -> None:
        self.bounds: list[float] = []
        self.counts: list[float] = []
        self.forced = self.fixed = False
        self.no_data = True
        if not buckets:
            return
        for bound, _ in buckets:
            if bound != bound:
                raise ValueError("bucket bounds must not be NaN")
        ordered = sorted(buckets, key=lambda b: b[0])
        if ordered[-1][0] != math.inf:
            return
        ordered = _coalesce(ordered)
        self.bounds = [b for b, _ in ordered]
        self.counts = [c for _, c in ordered]
        self.forced, self.fixed = _ensure_monotonic(self.counts, SMALL_DELTA_TOLERANCE)
        self.no_data = len(self.counts) < 2 or self.counts[-1] == 0


def _out_of_range(q: float) -> float | None:
    if math.isnan(q):
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    return None


def _answer(q: float, p: _Prepared) -> tuple[float, bool, bool, str]:
    """``BucketQuantile`` after the q checks, plus which branch answered."""
    if p.no_data:
        return math.nan, False, False, _NO_DATA
    bounds, counts, forced, fixed = p.bounds, p.counts, p.forced, p.fixed
    rank = q * counts[-1]
    b = _search(counts, rank)
    if b == len(counts) - 1:
        return bounds[-2], forced, fixed, _TOP
    if b == 0 and bounds[0] <= 0:
        return bounds[0], forced, fixed, _VALUE
    bucket_start = 0.0
    bucket_end = bounds[b]
    count = counts[b]
    if b > 0:
        bucket_start = bounds[b - 1]
        count -= counts[b - 1]
        rank -= counts[b - 1]
    value = bucket_start + (bucket_end - bucket_start) * _go_div(rank, count)
    return value, forced, fixed, _VALUE


def bucket_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> tuple[float, bool, bool]:
    """The raw port of ``BucketQuantile``: ``(value, forced_monotonic, fixed_precision)``.

    ``buckets`` are ``(upper_bound, cumulative_count)`` pairs in any order, one of which
    should have the bound ``+Inf`` (without one the answer is NaN, as in Prometheus).
    Every "undefined" answer is NaN here, exactly as in Prometheus;
    :func:`histogram_quantile` maps them onto :class:`Quantile`. NaN bounds raise
    ``ValueError`` (Prometheus assumes they never occur).
    """
    special = _out_of_range(q)
    if special is not None:
        return special, False, False
    value, forced, fixed, _ = _answer(q, _Prepared(buckets))
    return value, forced, fixed


def _search(counts: list[float], rank: float) -> int:
    """``sort.Search(len(counts)-1, counts[i] >= rank)``: first finite bucket ≥ rank."""
    n = len(counts) - 1
    # Counts are monotonic after repair, so bisect is the same binary search; a NaN rank
    # never satisfies ``>=`` and falls through to ``n`` as in Go.
    if math.isnan(rank):
        return n
    return bisect.bisect_left(counts, rank, 0, n)


def histogram_quantiles(
    qs: Sequence[float], bounds: Sequence[float], buckets: Sequence[float]
) -> list[Quantile]:
    """:func:`histogram_quantile` for several ``q`` at once (the buckets prepared once)."""
    if len(buckets) != len(bounds) + 1:
        raise ValueError(
            f"need len(bounds)+1 cumulative counts, got {len(buckets)} for {len(bounds)} bounds"
        )
    prepared: _Prepared | None = None
    out: list[Quantile] = []
    for q in qs:
        special = _out_of_range(q)
        if special is not None:
            out.append(Quantile(value=special))
            continue
        if prepared is None:
            pairs = list(zip(bounds, buckets[:-1], strict=True))
            pairs.append((math.inf, buckets[-1]))
            prepared = _Prepared(pairs)
        value, _, _, kind = _answer(q, prepared)
        if kind == _NO_DATA:
            out.append(Quantile(value=None))
        else:
            out.append(Quantile(value=value, ge_top_bucket=kind == _TOP))
    return out


def histogram_quantile(q: float, bounds: Sequence[float], buckets: Sequence[float]) -> Quantile:
    """The ``q`` quantile of a cumulative histogram, with Prometheus' exact semantics.

    ``bounds`` are the finite upper bounds; ``buckets`` the cumulative counts, one more
    than ``bounds`` (the last is the ``+Inf`` bucket). See the module docstring for every
    edge case; in short: NaN/-Inf/+Inf for a NaN/negative/>1 ``q``, ``value=None`` for no
    observations or fewer than two buckets, ``ge_top_bucket=True`` when the rank falls in
    the ``+Inf`` bucket.
    """
    return histogram_quantiles((q,), bounds, buckets)[0]


def cumulative_counts(n_buckets: int, increments: Mapping[int, float]) -> list[float]:
    """Sparse per-bucket increments (index → increase) → dense cumulative counts.

    ``n_buckets`` includes the ``+Inf`` bucket (``len(bounds) + 1``). Indices outside
    ``[0, n_buckets)`` are an error. Exact for integer counts below 2**53.
    """
    dense = [0.0] * n_buckets
    for index, value in increments.items():
        if not 0 <= index < n_buckets:
            raise ValueError(f"bucket index {index} outside 0..{n_buckets - 1}")
        dense[index] = value
    running = 0.0
    for i, value in enumerate(dense):
        running += value
        dense[i] = running
    return dense


def quantile_of_delta(q: float, hd: HistogramDelta) -> Quantile:
    """``histogram_quantile`` over a sparse :class:`HistogramDelta` (its increments)."""
    return quantiles_of_delta((q,), hd)[0]


def quantiles_of_delta(qs: Sequence[float], hd: HistogramDelta) -> list[Quantile]:
    """Several quantiles of a sparse :class:`HistogramDelta`, prepared once."""
    sparse = _sparse_quantiles(qs, hd)
    if sparse is not None:
        return sparse
    return histogram_quantiles(qs, hd.bounds, cumulative_counts(len(hd.bounds) + 1, hd.buckets))


# Below this many observations two different whole counts are never "almost equal"
# (their difference is at least 1, their sum under 1e12): step 3 changes nothing.
_SPARSE_MAX_TOTAL = 2.0**38

# Whether a layout's bounds are finite and strictly increasing, per layout seen: a day of
# minute windows asks it 14,400 times of the same ten layouts.
_PLAIN_BOUNDS: dict[tuple[float, ...], bool] = {}
_PLAIN_BOUNDS_CAP = 4096


def _plain_bounds(bounds: tuple[float, ...]) -> bool:
    """Whether ``bounds`` are non-empty, finite and strictly increasing (remembered)."""
    try:
        plain = _PLAIN_BOUNDS.get(bounds)
    except TypeError:  # not hashable (a list): not remembered
        plain = None
    if plain is None:
        plain = bool(bounds) and -math.inf < bounds[0] and bounds[-1] < math.inf
        plain = plain and all(map(operator.lt, bounds, itertools.islice(bounds, 1, None)))
        try:
            if len(_PLAIN_BOUNDS) >= _PLAIN_BOUNDS_CAP:
                _PLAIN_BOUNDS.clear()
            _PLAIN_BOUNDS[bounds] = plain
        except TypeError:
            pass
    return plain


def _sparse_quantiles(qs: Sequence[float], hd: HistogramDelta) -> list[Quantile] | None:
    """The common case of :func:`quantiles_of_delta` without building dense counts.

    Only for what needs none of steps 2–3 — strictly increasing finite bounds, whole
    non-negative increments (floats), fewer than ``_SPARSE_MAX_TOTAL`` observations —
    where the cumulative counts are already monotonic; the same arithmetic as
    :func:`_answer`, so the same floats. None for anything else (the full path decides).
    """
    bounds = hd.bounds
    if not _plain_bounds(bounds):
        return None
    n = len(bounds)
    buckets = hd.buckets
    index = list(buckets)
    values = list(buckets.values())
    if not all(map(operator.lt, index, itertools.islice(index, 1, None))):
        index.sort()
        values = [buckets[i] for i in index]
    if index and (index[0] < 0 or index[-1] > n):
        return None
    try:  # whole (NaN and infinities are not), then non-negative
        if not all(map(float.is_integer, values)) or (values and min(values) < 0):
            return None
    except TypeError:  # not floats
        return None
    cums = list(itertools.accumulate(values))  # left to right, as the dense running sum
    total = cums[-1] if cums else 0.0
    if total >= _SPARSE_MAX_TOTAL:
        return None
    out: list[Quantile] = []
    for q in qs:
        if not 0.0 <= q <= 1.0:  # NaN too
            out.append(Quantile(_out_of_range(q)))
            continue
        if total == 0:
            out.append(Quantile(None))
            continue
        rank = q * total
        if rank <= 0:  # every count is >= 0 >= rank: the first bucket
            b, j = 0, 0
            through = cums[0] if index[0] == 0 else 0.0
        else:  # buckets without an increment hold the count before them, < rank
            j = bisect.bisect_left(cums, rank)
            b, through = index[j], cums[j]
        if b == n:
            out.append(Quantile(bounds[-1], True))
            continue
        if b == 0 and bounds[0] <= 0:
            out.append(Quantile(bounds[0]))
            continue
        bucket_start = 0.0
        count = through
        if b > 0:
            before = cums[j - 1] if j > 0 else 0.0
            bucket_start = bounds[b - 1]
            count -= before
            rank -= before
        out.append(Quantile(bucket_start + (bounds[b] - bucket_start) * _go_div(rank, count)))
    return out
