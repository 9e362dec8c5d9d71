"""Headroom: how much more traffic a server takes before a p99 breaks its SLO (pure).

The calibrated twin (:func:`app.twin.whatif.calibrate`) is run at traffic × k — the
span's own arrival timeline, scaled — and k is searched: doubled from today's traffic
until TTFT p99 or ITL p99 passes its SLO (or halved, when today's already does), then
narrowed to within ``TOLERANCE``: where the line between the bracket's p99s (in logs) says
the SLO is met, then a step of ``TOLERANCE`` across it, alternating with a bisection.
Each k is judged on the median of the calibration's seeds, corrected as a prediction is.

What breaks first is read from the twin at the first k that breaks (``Limit``):

* ``kv``: the KV pool is full (usage ≥ 0.9) or sequences are preempted;
* ``queue``: requests wait for a slot (``max_num_seqs`` or the token budget): requests
  waiting on average, or a TTFT that broke with more queue time than prefill time in it;
* ``decode``: ITL p99 breaks with no queue — every step carries more sequences and
  prompt chunks (decode is bandwidth-bound; prefill chunks interleave);
* ``prefill``: TTFT p99 breaks with no queue — the prompts' own compute.

Where the span's queue grows through its end (``app.twin.incident``) there is no traffic
multiple to search: the server is past its limit now, and the queue is what broke. The
answer is the capacity the traffic needs now, ``λ ÷ μ`` (×k of one replica's), and the
replicas that end the growth — no twin run. Where a p99 is over its SLO without a
growing queue, the search's multiple is below 1 and the answer is said as the capacity
needed, ``1 ÷ k``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from app.twin.engine import Knobs
from app.twin.incident import Incident
from app.twin.whatif import Calibration, Figures, estimate

TOLERANCE = 0.05  # the search stops when the bracket is narrower than 5 %
LOWEST = 0.05  # below 5 % of today's traffic, "already over"
HIGHEST = 16.0  # above 16 × today's traffic, "at least"
KV_FULL = 0.9
QUEUE = 1.0  # requests waiting on average from which TTFT is the queue's


class Limit(StrEnum):
    QUEUE = "queue"
    KV = "kv"
    DECODE = "decode"
    PREFILL = "prefill"


LIMIT_WORDS = {
    Limit.QUEUE: "the queue breaks first (requests wait for a slot)",
    Limit.KV: "the KV cache breaks first (the pool fills, sequences are preempted)",
    Limit.DECODE: "decode breaks first (every step carries more sequences and chunks)",
    Limit.PREFILL: "prefill breaks first (the prompts' own compute)",
}


@dataclass(frozen=True, slots=True)
class Headroom:
    """``rate_scale``: the largest traffic × k that keeps both p99s within their SLOs
    (0 when even ``LOWEST`` breaks; ``HIGHEST`` with ``at_least`` when nothing breaks up
    to it); ``breaks_at``: the smallest k found to break; ``breaks``: which p99
    (``ttft_p99``/``itl_p99``); ``limit``: what breaks first; ``at_break``: the twin's
    figures there."""

    rate_scale: float
    at_least: bool
    breaks_at: float | None
    breaks: tuple[str, ...]
    limit: Limit | None
    slo_ttft_p99: float
    slo_itl_p99: float
    at_break: Figures | None
    evaluations: int
    # A growing queue (module docstring): today's traffic needs ×needs_now capacity.
    needs_now: float | None = None
    replicas_needed: int | None = None
    incident: Incident | None = None

    def text(self) -> str:
        """``1.6× today's traffic before TTFT p99 breaks 2 s; the queue breaks first``."""
        if self.incident is not None and self.needs_now is not None:
            inc = self.incident
            lam, mu = inc.arrival_rate, inc.completion_rate
            assert lam is not None and mu is not None
            need = "more than 64" if self.replicas_needed is None else str(self.replicas_needed)
            return (
                f"needs ×{self.needs_now:.2g} capacity now: arrivals {lam.mid:.3g}/s against "
                f"{mu.mid:.3g}/s one replica completes, and the queue grows; {need} "
                f"replicas end the growth; {LIMIT_WORDS[Limit.QUEUE]}"
            )
        if self.at_least:
            return (
                f"at least {self.rate_scale:g}× today's traffic keeps TTFT p99 within "
                f"{_s(self.slo_ttft_p99)} and ITL p99 within {_s(self.slo_itl_p99)}"
            )
        which = " and ".join(
            f"{'TTFT' if b == 'ttft_p99' else 'ITL'} p99 breaks "
            f"{_s(self.slo_ttft_p99 if b == 'ttft_p99' else self.slo_itl_p99)}"
            for b in self.breaks
        )
        first = f"; {LIMIT_WORDS[self.limit]}" if self.limit is not None else ""
        if self.rate_scale < 1.0:
            if self.rate_scale <= 0:
                return f"over its SLO even at {LOWEST:g}× today's traffic: {which}{first}"
            return (
                f"over its SLO now: needs ×{1 / self.rate_scale:.2g} capacity ({which} above "
                f"{self.rate_scale:.2g}× today's traffic){first}"
            )
        return f"{self.rate_scale:.2g}× today's traffic before {which}{first}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "rate_scale": round(self.rate_scale, 3),
            "at_least": self.at_least,
            "breaks_at": None if self.breaks_at is None else round(self.breaks_at, 3),
            "breaks": list(self.breaks),
            "limit": None if self.limit is None else self.limit.value,
            "slo": {"ttft_p99": self.slo_ttft_p99, "itl_p99": self.slo_itl_p99},
            "at_break": None if self.at_break is None else self.at_break.to_dict(),
            "text": self.text(),
            "evaluations": self.evaluations,
            "needs_now": self.capacity_now(),
            "replicas_needed": self.replicas_needed,
            "incident": None if self.incident is None else self.incident.to_dict(),
        }

    def capacity_now(self) -> float | None:
        """The capacity today's traffic needs, × today's (None: it has room)."""
        if self.needs_now is not None:
            return round(self.needs_now, 3)
        if not self.at_least and 0 < self.rate_scale < 1.0:
            return round(1 / self.rate_scale, 3)
        return None


def _s(v: float) -> str:
    return f"{v * 1000:.0f} ms" if v < 1 else f"{v:g} s"


def _broken(f: Figures, slo_ttft: float, slo_itl: float) -> tuple[str, ...]:
    out = []
    ttft, itl = f.value("ttft_p99"), f.value("itl_p99")
    if ttft is not None and ttft > slo_ttft:
        out.append("ttft_p99")
    if itl is not None and itl > slo_itl:
        out.append("itl_p99")
    return tuple(out)


def limit_of(f: Figures, breaks: tuple[str, ...]) -> Limit:
    """What breaks first, from the twin's figures where a p99 broke (module docstring)."""
    if (f.kv_usage_max or 0.0) >= KV_FULL or (f.preemptions_per_s or 0.0) > 0:
        return Limit.KV
    queue, prefill = f.queue_time_mean or 0.0, f.prefill_time_mean or 0.0
    if (f.waiting_avg or 0.0) >= QUEUE or ("ttft_p99" in breaks and queue > prefill):
        return Limit.QUEUE
    if "ttft_p99" in breaks and "itl_p99" not in breaks:
        return Limit.PREFILL
    return Limit.DECODE


def growing_headroom(incident: Incident, slo_ttft: float, slo_itl: float) -> Headroom | None:
    """A growing queue's headroom: the capacity the traffic needs now (no twin run)."""
    k = incident.capacity_needed()
    if not incident.growing or k is None:
        return None
    return Headroom(
        1 / k, False, 1.0, ("ttft_p99",), Limit.QUEUE, slo_ttft, slo_itl, None, 0, k,
        incident.replicas_needed, incident,
    )  # fmt: skip


def headroom(
    cal: Calibration,
    slo_ttft_p99: float,
    slo_itl_p99: float,
    incident: Incident | None = None,
) -> Headroom:
    """The search of the module docstring (none where ``incident`` grows)."""
    if incident is not None and incident.growing:
        room = growing_headroom(incident, slo_ttft_p99, slo_itl_p99)
        if room is not None:
            return room
    memo: dict[float, tuple[str, ...]] = {}
    figures: dict[float, Figures] = {}

    def breaks(k: float) -> tuple[str, ...]:
        if k not in memo:
            f = estimate(cal, Knobs(rate_scale=k))[0]
            figures[k] = f
            memo[k] = _broken(f, slo_ttft_p99, slo_itl_p99)
        return memo[k]

    good: float | None
    bad: float | None
    if breaks(1.0):
        good, bad = None, 1.0
        k = 0.5
        while k >= LOWEST:
            if not breaks(k):
                good = k
                break
            bad = k
            k /= 2
        if good is None:
            return _result(0.0, False, bad, memo, figures, slo_ttft_p99, slo_itl_p99)
    else:
        good, bad = 1.0, None
        k = 2.0
        while k <= HIGHEST:
            if breaks(k):
                bad = k
                break
            good = k
            k *= 2
        if bad is None:
            return _result(good, True, None, memo, figures, slo_ttft_p99, slo_itl_p99)

    def excess(k: float) -> float:
        return _excess(figures[k], slo_ttft_p99, slo_itl_p99)

    step = 0
    while bad / good > 1 + TOLERANCE:
        # Where the p99 meets its SLO, read off the line between the bracket's ends (in
        # logs), then a step of TOLERANCE across it to close the bracket; every other
        # step a plain bisection, so a bent curve still converges.
        x = math.sqrt(good * bad)
        if step % 2 == 0:
            x = _crossing(good, bad, excess(good), excess(bad), x)
        step += 1
        if breaks(x):
            bad = x
            near = x / (1 + TOLERANCE)
            if near > good and not breaks(near):
                good = near
        else:
            good = x
            near = x * (1 + TOLERANCE)
            if near < bad and breaks(near):
                bad = near
    return _result(good, False, bad, memo, figures, slo_ttft_p99, slo_itl_p99)


def _excess(f: Figures, slo_ttft: float, slo_itl: float) -> float:
    """How far the worse p99 is over its SLO, in logs (negative: within it)."""
    out = -math.inf
    for v, slo in ((f.value("ttft_p99"), slo_ttft), (f.value("itl_p99"), slo_itl)):
        if v is not None and v > 0 and slo > 0:
            out = max(out, math.log(v / slo))
    return out


def _crossing(good: float, bad: float, e_good: float, e_bad: float, fallback: float) -> float:
    """The k where the line through (log k, excess) at the bracket's ends crosses 0, kept
    inside the bracket by half a tolerance (``fallback`` where the line says nothing)."""
    if not (math.isfinite(e_good) and math.isfinite(e_bad)) or e_bad <= e_good:
        return fallback
    t = -e_good / (e_bad - e_good)
    x = math.exp(math.log(good) + t * (math.log(bad) - math.log(good)))
    lo, hi = good * (1 + TOLERANCE / 2), bad / (1 + TOLERANCE / 2)
    return fallback if lo >= hi else min(max(x, lo), hi)


def _result(
    good: float,
    at_least: bool,
    bad: float | None,
    memo: dict[float, tuple[str, ...]],
    figures: dict[float, Figures],
    slo_ttft: float,
    slo_itl: float,
) -> Headroom:
    if bad is None:
        return Headroom(good, at_least, None, (), None, slo_ttft, slo_itl, None, len(memo))
    f = figures[bad]
    which = memo[bad]
    return Headroom(good, at_least, bad, which, limit_of(f, which), slo_ttft, slo_itl, f, len(memo))
