"""A token-length histogram → a lognormal (pure).

vLLM's request token histograms (``request_prompt_tokens``, ``request_generation_tokens``)
have coarse 1-2-5 buckets, but their ``_sum`` / ``_count`` give the exact mean. The fit
keeps that mean and picks the spread ``sigma`` whose bucket probabilities explain the
counts best (binned maximum likelihood over a grid): ``median = mean / exp(sigma² / 2)``.
A load generator's fixed lengths (every answer 128 tokens) come out as ``sigma = 0``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.model import HistogramDelta

SIGMAS: tuple[float, ...] = tuple(round(0.05 * i, 2) for i in range(0, 51))  # 0 … 2.5


@dataclass(frozen=True, slots=True)
class LengthFit:
    """A lognormal token count: ``median · exp(sigma · N(0, 1))``; ``n`` requests."""

    median: float
    sigma: float
    mean: float
    n: float

    def scaled(self, k: float) -> LengthFit:
        """The same shape, every length ``k`` times longer."""
        return LengthFit(self.median * k, self.sigma, self.mean * k, self.n)

    def to_dict(self) -> dict[str, float]:
        return {
            "mean": round(self.mean, 1),
            "median": round(self.median, 1),
            "sigma": self.sigma,
            "requests": self.n,
        }


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
    sigma = best[1]
    return LengthFit(mean / math.exp(sigma * sigma / 2.0), sigma, mean, h.count)
