"""A token-length histogram → a lognormal, or the histogram's own buckets (pure).

vLLM's request token histograms (``request_prompt_tokens``, ``request_generation_tokens``)
have coarse 1-2-5 buckets, but their ``_sum`` / ``_count`` give the exact mean. The fit
keeps that mean and picks the spread ``sigma`` whose bucket probabilities explain the
counts best (binned maximum likelihood over a grid): ``median = mean / exp(sigma² / 2)``.
A load generator's fixed lengths (every answer 128 tokens) come out as ``sigma = 0``.

One lognormal cannot be two kinds of request: short chat prompts beside long documents
(70 % of 64 tokens and 30 % of 900) fill two buckets far apart, and the lognormal that
best explains them (σ 1.15, median 162) spreads the prompts over every length between
and past the two: replayed, and priced by the step time fitted on them, they made a TTFT
tail 1.75× the server's (budget's A of tests/data/vllm_real: 35 ms against 20). Where
the histogram itself rejects the lognormal — the likelihood ratio of the buckets' own
shares over the lognormal's past a chi-square test at p = 10⁻⁶ (:func:`_reject`) — the
lengths are the buckets' (``pieces``): each bucket's share of the requests, uniform
inside its bounds, all scaled by one factor so that the mean is the exact one. ``sigma``
and ``median`` stay the lognormal's, as a summary.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from app.model import HistogramDelta

SIGMAS: tuple[float, ...] = tuple(round(0.05 * i, 2) for i in range(0, 51))  # 0 … 2.5
# The lognormal is rejected when 2 × (the buckets' own log-likelihood − the lognormal's)
# is over the chi-square quantile at this p (degrees of freedom: the buckets with requests
# less 2 — the shares sum to 1, the lognormal has one free spread): a test strict enough
# that rounding and the spread's grid do not reject a lognormal's own histogram.
REJECT_P_Z = 4.753  # the normal quantile of p = 10⁻⁶
# A piece: its share of the requests and its bounds (lo, hi], in tokens.
Piece = tuple[float, float, float]


@dataclass(frozen=True, slots=True)
class LengthFit:
    """A lognormal token count: ``median · exp(sigma · N(0, 1))``; ``n`` requests."""

    median: float
    sigma: float
    mean: float
    n: float
    # The histogram's buckets where the lognormal is rejected (module docstring), their
    # bounds already scaled so that their mean is ``mean``; () for the lognormal.
    pieces: tuple[Piece, ...] = ()

    def scaled(self, k: float) -> LengthFit:
        """The same shape, every length ``k`` times longer."""
        pieces = tuple((w, lo * k, hi * k) for w, lo, hi in self.pieces)
        return LengthFit(self.median * k, self.sigma, self.mean * k, self.n, pieces)

    def quantile(self, q: float) -> float:
        """The length at ``q`` (0 < q < 1) of the pieces; the lognormal's without."""
        if not self.pieces:
            z = statistics.NormalDist().inv_cdf(min(max(q, 1e-9), 1 - 1e-9))
            return self.median * math.exp(self.sigma * z)
        acc = 0.0
        for w, lo, hi in self.pieces:
            if q <= acc + w or (w, lo, hi) == self.pieces[-1]:
                return lo + (hi - lo) * min(max((q - acc) / w, 0.0), 1.0)
            acc += w
        return self.pieces[-1][2]

    def mean_error(self) -> float:
        """The relative standard error of ``mean`` as the mean of ``n`` draws: the
        lengths' coefficient of variation (the pieces', uniform inside their bounds, or
        the lognormal's ``√(exp(σ²) − 1)``) over ``√n``. The histogram's mean is exact for
        the requests that finished; as the mean of the lengths the server is sent, it is
        a sample's."""
        if self.n <= 0 or self.mean <= 0:
            return 0.0
        if self.pieces:
            second = sum(w * (lo * lo + lo * hi + hi * hi) / 3.0 for w, lo, hi in self.pieces)
            first = sum(w * (lo + hi) / 2.0 for w, lo, hi in self.pieces)
            cv = math.sqrt(max(second - first * first, 0.0)) / first if first > 0 else 0.0
        else:
            cv = math.sqrt(math.expm1(self.sigma * self.sigma))
        return cv / math.sqrt(self.n)

    def shape(self) -> str:
        """How the lengths are drawn, for a line of text."""
        if self.pieces:
            return f"{len(self.pieces)} buckets of the histogram, not one lognormal"
        return f"σ {self.sigma:g}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "mean": round(self.mean, 1),
            "median": round(self.median, 1),
            "sigma": self.sigma,
            "requests": self.n,
        }
        if self.pieces:
            out["buckets"] = [
                {"share": round(w, 4), "from": round(lo, 1), "to": round(hi, 1)}
                for w, lo, hi in self.pieces
            ]
        return out


def _cdf(x: float, median: float, sigma: float) -> float:
    if x <= 0:
        return 0.0
    if sigma <= 0:
        return 1.0 if x >= median else 0.0
    return 0.5 * (1.0 + math.erf(math.log(x / median) / (sigma * math.sqrt(2.0))))


def _loglik(h: HistogramDelta, median: float, sigma: float) -> float:
    total = 0.0
    lo = 0.0
    edges = [*h.bounds, math.inf]
    for i, hi in enumerate(edges):
        n = h.buckets.get(i, 0.0)
        if n <= 0:
            lo = hi
            continue
        # Token counts are whole numbers: the bucket ``le=hi`` holds (lo, hi].
        p = (1.0 if math.isinf(hi) else _cdf(hi + 0.5, median, sigma)) - _cdf(
            lo + 0.5, median, sigma
        )
        total += n * math.log(max(p, 1e-12))
        lo = hi
    return total


def fit_lengths(h: HistogramDelta) -> LengthFit | None:
    """The lognormal of a token histogram's window increase; None with no requests."""
    if h.count <= 0 or h.sum <= 0:
        return None
    mean = h.sum / h.count
    best: tuple[float, float] | None = None
    for sigma in SIGMAS:
        median = mean / math.exp(sigma * sigma / 2.0)
        ll = _loglik(h, median, sigma)
        # Strictly better only: among equals the narrowest (a fixed length stays fixed).
        if best is None or ll > best[0] + 1e-9 * max(1.0, abs(best[0])):
            best = (ll, sigma)
    assert best is not None
    ll, sigma = best
    return LengthFit(mean / math.exp(sigma * sigma / 2.0), sigma, mean, h.count, _pieces(h, ll))


def _pieces(h: HistogramDelta, lognormal_ll: float) -> tuple[Piece, ...]:
    """The buckets as pieces where they reject the lognormal (module docstring), else ()."""
    edges = [*h.bounds, math.inf]
    raw: list[Piece] = []
    own = 0.0
    lo = 0.0
    for i, hi in enumerate(edges):
        n = h.buckets.get(i, 0.0)
        if n > 0:
            share = n / h.count
            own += n * math.log(share)
            # Past the last bound: as far again (no bound to read).
            raw.append((share, lo, hi if math.isfinite(hi) else 2.0 * max(lo, 1.0)))
        lo = hi
    if not _reject(2.0 * (own - lognormal_ll), max(len(raw) - 2, 1)):
        return ()
    mid = sum(w * (a + b) / 2.0 for w, a, b in raw)
    k = (h.sum / h.count) / mid if mid > 0 else 1.0
    return tuple((w, a * k, b * k) for w, a, b in raw)


def _reject(g: float, dof: int) -> bool:
    """Whether a likelihood-ratio statistic ``g`` is past the chi-square quantile of
    ``dof`` degrees of freedom at :data:`REJECT_P_Z` (Wilson–Hilferty)."""
    c = 2.0 / (9.0 * dof)
    return g > dof * (1.0 - c + REJECT_P_Z * math.sqrt(c)) ** 3
