"""Is a p99 over its SLO — and does the histogram prove it, or only suggest it?

A histogram measures how many observations fall in each bucket, not where inside it.
``histogram_quantile`` interpolates linearly inside the bucket holding the rank; that
value is the convention (it is what Grafana shows), but the comparison with an SLO is
only *proven* when the whole bucket lies on one side of it:

* bucket ``(lo, hi]`` with ``lo ≥ SLO`` → over, proven; ``hi ≤ SLO`` → within, proven;
* the bucket straddles the SLO → **unproven**: over when it is more likely than not
  that more than 1 % of the observations exceed the SLO, each observation in the bucket
  exceeding it with the estimated share (binomial). With 17 requests the p99 rank is the
  slowest one; one request somewhere in 1.0–2.5 s is over 2 s only with odds 1 in 3,
  yet interpolation calls it "2.47 s".
  Linear interpolation assumes the bucket's observations are spread evenly. The
  histogram's exact ``_sum`` says more: subtracting the other buckets (each at its
  midpoint; ``+Inf`` at the top bound) leaves the mean inside the straddling bucket, and
  the most even spread with that mean (a truncated exponential — uniform when the mean
  is the midpoint, as Prometheus assumes) gives the share above the SLO. A TTFT
  cluster at 1.1 s in vLLM's 1.0–2.5 s bucket is then not read as "p99 2.47 s".
* the rank is in ``+Inf`` → "≥ top bound": over when the bound is above the SLO, else
  unknown.

Unproven verdicts lower the confidence.

**One judgement** (:func:`verdict`): every place that says a p99 is over its SLO reads
this judgement, never the interpolated value alone — the classifier (a breach holds when
it is ``over`` or ``unproven``; unproven lowers the confidence), the alert rules (the
``ttft_slo`` / ``itl_slo`` fields: the default pack fires on ``over`` only unless
``alerts.fire_on_unproven``), and the UI's markers (▲ over, ≈ unproven):

* ``over`` — the bucket edges prove more than 1 % of the observations above the SLO;
* ``unproven`` — the p99 lies in a bucket around the SLO and, by the bucket's mean, more
  likely than not over it: a breach the histogram cannot prove;
* ``within`` — the bucket edges prove it within, or the straddling bucket is more likely
  than not within;
* None — cannot tell (no observations; only a lower bound below the SLO).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.diagnose.records import Evidence
from app.model import HistogramDelta
from app.windows.quantile import cumulative_counts

OVER = "over"
UNPROVEN = "unproven"
WITHIN = "within"
VERDICTS: tuple[str, ...] = (OVER, UNPROVEN, WITHIN)


@dataclass(frozen=True, slots=True)
class Breach:
    """``holds``: p99 over SLO (None: cannot tell); ``proven``: the bucket settles it."""

    holds: bool | None
    proven: bool
    evidence: Evidence

    @property
    def verdict(self) -> str | None:
        """``over`` / ``unproven`` / ``within`` / None (module docstring)."""
        return verdict(self.holds, self.proven)


def verdict(holds: bool | None, proven: bool) -> str | None:
    """The one judgement of "p99 over its SLO given the bucket edges" (module docstring)."""
    if holds is None:
        return None
    if not holds:
        return WITHIN
    return OVER if proven else UNPROVEN


def _rank_bucket(hist: HistogramDelta, q: float) -> tuple[int, list[float]]:
    """Index of the bucket holding the ``q`` rank (Prometheus' search) and the counts."""
    cumulative = cumulative_counts(len(hist.bounds) + 1, hist.buckets)
    rank = q * cumulative[-1]
    i = next((k for k, c in enumerate(cumulative[:-1]) if c >= rank), len(hist.bounds))
    return i, cumulative


def judge(
    rule: str,
    signal: str,
    value: float | None,
    ge: bool,
    hist: HistogramDelta | None,
    slo: float,
    q: float = 0.99,
) -> Breach:
    """Compare the ``q`` quantile (value, "≥" flag, histogram) with an SLO."""

    def ev(holds: bool | None, note: str = "") -> Evidence:
        return Evidence(rule, signal, value, ">", slo, holds, "s", ge, note)

    if value is None:
        return Breach(None, False, ev(None, "no observations"))
    if ge:
        if value > slo:
            return Breach(True, True, ev(True))
        return Breach(None, False, ev(None, "only a lower bound, and it is below the SLO"))
    if hist is None or hist.count <= 0:
        return Breach(value > slo, True, ev(value > slo))
    i, cumulative = _rank_bucket(hist, q)
    lo = hist.bounds[i - 1] if i > 0 else 0.0
    hi = hist.bounds[i] if i < len(hist.bounds) else float("inf")
    if lo >= slo:
        return Breach(True, True, ev(True))
    if hi <= slo:
        return Breach(False, True, ev(False))
    total = cumulative[-1]
    in_bucket = cumulative[i] - (cumulative[i - 1] if i > 0 else 0.0)
    mean = _bucket_mean(hist, i, lo, hi)
    share = _share_above(slo - lo, hi - lo, mean - lo)
    certain = total - cumulative[i]  # in buckets wholly above the SLO
    needed = math.floor((1.0 - q) * total) + 1 - certain
    holds = _more_likely_than_not(in_bucket, share, needed)
    above = certain + in_bucket * share
    note = (
        f"p99 lies in bucket ({lo:g}, {hi:g}] s around the SLO: unproven; "
        f"≈{above:.1f} of {total:.0f} observations over the SLO (bucket mean {mean:.3g} s)"
    )
    return Breach(holds, False, ev(holds, note))


def _more_likely_than_not(n: float, p: float, k: float) -> bool:
    """P(Binomial(n, p) ≥ k) > 0.5; the normal median (mean) for large n."""
    if k <= 0:
        return True
    if n > 1000 or n != int(n):
        return n * p >= k
    n_int, k_int = int(n), math.ceil(k)
    if k_int > n_int:
        return False
    below = sum(math.comb(n_int, j) * p**j * (1 - p) ** (n_int - j) for j in range(k_int))
    return below < 0.5


def _bucket_mean(hist: HistogramDelta, i: int, lo: float, hi: float) -> float:
    """Mean inside bucket ``i`` from the exact sum minus the other buckets' midpoints."""
    others = 0.0
    for k, count in hist.buckets.items():
        if k == i or count <= 0:
            continue
        if k < len(hist.bounds):
            low = hist.bounds[k - 1] if k > 0 else 0.0
            others += count * (low + hist.bounds[k]) / 2
        else:
            others += count * (hist.bounds[-1] if hist.bounds else 0.0)
    count_i = hist.buckets.get(i, 0.0)
    if count_i <= 0 or not math.isfinite(hist.sum):
        return (lo + hi) / 2
    return min(hi, max(lo, (hist.sum - others) / count_i))


def _share_above(s: float, width: float, mean: float) -> float:
    """P(X > s) for X on [0, width] with the most even density of the given mean.

    The maximum-entropy density on an interval with a fixed mean is exponential in x
    (uniform at the midpoint). Its rate is found by bisection on the mean.
    """
    if width <= 0:
        return 0.0
    m = min(max(mean / width, 1e-6), 1 - 1e-6)
    t = min(max(s / width, 0.0), 1.0)

    def mean_of(rate: float) -> float:  # mean / width of density ∝ exp(-rate·u) on [0, 1]
        if abs(rate) < 1e-9:
            return 0.5
        return 1 / rate - 1 / math.expm1(rate)

    lo_r, hi_r = -200.0, 200.0
    for _ in range(100):
        mid = (lo_r + hi_r) / 2
        if mean_of(mid) > m:
            lo_r = mid
        else:
            hi_r = mid
    rate = (lo_r + hi_r) / 2
    if abs(rate) < 1e-9:
        return 1 - t
    if rate > 0:  # decreasing density
        return math.exp(-rate * t) * math.expm1(-rate * (1 - t)) / math.expm1(-rate)
    r = -rate  # increasing density
    return math.expm1(-r * (1 - t)) / math.expm1(-r)
