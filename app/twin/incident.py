"""A span whose queue grows: the incident's own terms, by a fluid model (pure).

A steady span has a p99 the twin can replay. A span whose queue grows through its end has
none: the p99 is whatever the backlog has reached when the window closes, and it grows
with every window. Such a span is answered as capacity planners answer a surge, with a
fluid model of the queue:

* **arrival rate λ** — requests arriving per second over the recent growing tiles
  (completions + rejections + the change of running and waiting: ``Derived.arrival_rate``);
* **completion rate μ per replica** — requests finished per second over the same tiles,
  while a queue stood in front of the engine (the server was saturated: this is its
  capacity for this workload, whatever bounds it — ``max_num_seqs``, the token budget,
  the KV pool or the step time);
* **backlog B** — the requests waiting at the span's end: the latest page's, also when
  the span is not a whole number of tiles (``latest``: a whatif span's tiles start at its
  first page, so the last tile can end up to a tile before the latest page — 0.002 s on a
  real vLLM's 5 s grid of pages was enough to leave the last page out, and the backlog
  read 372 where the server had 399 waiting).

A backlog drains at ``μ − λ`` when ``λ < μ``, and grows by ``λ − μ`` otherwise. With N
replicas the assumed routing is **the queued requests stay where they are** (a vLLM
queue is inside one engine and cannot move) **and new arrivals split evenly** (a
round-robin balancer): the replica holding the backlog receives ``λ/N`` and drains at
``μ − λ/N``; the new replicas start empty. A request arriving ``t`` seconds after the
change waits for the ``B(t) = B − (μ − λ/N)·t`` requests ahead of it to be admitted, at
``μ`` a second, then for its own first token (the queue-free TTFT seen on this span,
``floor``): its TTFT is under the SLO once ``B(t)/μ + floor ≤ SLO``. That arrival time
is ``under_slo_after_s``; ``drain_s`` is when ``B(t)`` reaches zero. The replicas
needed to end the growth: the smallest N with ``N·μ > λ``.

Each rate carries an interval (``low``/``mid``/``high``: ±2 standard errors, the larger
of the tiles' spread and the counts' Poisson noise), and each answer is given at the
interval's ends too. A change of an engine setting (``max_num_seqs``, the token budget,
the KV pool, the lengths) moves μ by the twin's saturated throughput with and without it
(``capacity``): the twin prices the ratio; the measured μ is what it multiplies.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.model import Window

REGIMES = ("steady", "growing")
QUEUED = 1.0  # requests waiting on average in a tile from which it has a queue
QUIET = 0.5  # … and under which it had none (its TTFT is queue-free)
RECENT_TILES = 6  # the rates are read over the last few tiles of the growing stretch
MIN_TILES = 2
MAX_REPLICAS = 64
ROUTING = (
    "the queued requests stay on the replica that holds them; new arrivals split evenly "
    "over the replicas"
)


@dataclass(frozen=True, slots=True)
class Rate:
    """A rate in requests per second with its interval (±2 standard errors)."""

    low: float
    mid: float
    high: float

    def to_list(self) -> list[float]:
        return [round(self.low, 4), round(self.mid, 4), round(self.high, 4)]


@dataclass(frozen=True, slots=True)
class Drain:
    """What one change does to the growing queue (module docstring): per replica of the
    ``replicas`` that share the traffic; seconds from the moment the change serves."""

    replicas: int
    arrival_per_replica: float
    capacity: float  # μ with the change, per replica
    drain_s: float | None  # None: it never drains
    under_slo_after_s: float | None  # None: never (or the queue-free TTFT is over the SLO)
    still_grows_by: float  # req/s on the replica holding the backlog; 0 where it drains
    drain_range: tuple[float | None, float | None]  # at μ's high and low ends
    under_slo_range: tuple[float | None, float | None]
    why_never: str | None = None

    def text(self, backlog: float, slo: float) -> str:
        """``the 272 queued drain in ≈ 40 s (31–52 s); TTFT p99 under 2 s from ≈ 35 s
        (27–46 s)`` or ``still grows by 2.1 req/s: the queue never drains``; the ranges are
        the answers at μ's interval ends (their error)."""
        if self.drain_s is None:
            return f"still grows by {self.still_grows_by:.2g} req/s: the queue never drains"
        out = f"the {backlog:.0f} queued drain in ≈ {_dur(self.drain_s)}{_span(self.drain_range)}"
        if self.under_slo_after_s is None:
            return out + f"; TTFT p99 stays over {_slo(slo)} ({self.why_never})"
        if self.under_slo_after_s <= 0:
            return out + f"; TTFT p99 under {_slo(slo)} at once"
        return (
            out + f"; TTFT p99 under {_slo(slo)} from ≈ {_dur(self.under_slo_after_s)}"
            f"{_span(self.under_slo_range)}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "replicas": self.replicas,
            "arrival_per_replica": round(self.arrival_per_replica, 4),
            "completion_rate_per_replica": round(self.capacity, 4),
            "drain_s": _round(self.drain_s),
            "drain_s_range": [_round(v) for v in self.drain_range],
            "under_slo_after_s": _round(self.under_slo_after_s),
            "under_slo_after_s_range": [_round(v) for v in self.under_slo_range],
            "still_grows_by": round(self.still_grows_by, 4),
        }


@dataclass(frozen=True, slots=True)
class Incident:
    """The regime of a span's end and, when growing, its fluid model."""

    regime: str  # "steady" | "growing"
    why: str
    since: float | None = None  # when the queue started to stand (Unix s)
    arrival_rate: Rate | None = None
    completion_rate: Rate | None = None  # per replica, saturated
    backlog: float = 0.0
    running: float = 0.0
    floor_ttft: float | None = None  # queue-free TTFT p99 (s) seen on the span
    slo_ttft: float = 0.0

    @property
    def growing(self) -> bool:
        return self.regime == "growing"

    @property
    def replicas_needed(self) -> int | None:
        """The smallest N with N·μ > λ (at μ's and λ's mid values)."""
        return _needed(self.arrival_rate, self.completion_rate, "mid")

    @property
    def replicas_range(self) -> tuple[int | None, int | None]:
        """At the favourable and unfavourable ends of the intervals."""
        lam, mu = self.arrival_rate, self.completion_rate
        if lam is None or mu is None:
            return None, None
        good = _needed(Rate(lam.low, lam.low, lam.low), Rate(mu.high, mu.high, mu.high), "mid")
        bad = _needed(Rate(lam.high, lam.high, lam.high), Rate(mu.low, mu.low, mu.low), "mid")
        return good, bad

    def capacity_needed(self) -> float | None:
        """The capacity the traffic needs now, as a multiple of today's: λ ÷ μ."""
        lam, mu = self.arrival_rate, self.completion_rate
        if lam is None or mu is None or mu.mid <= 0:
            return None
        return lam.mid / mu.mid

    def drain(self, replicas: int = 1, rate_scale: float = 1.0, capacity: float = 1.0) -> Drain:
        """The queue with ``replicas`` sharing the traffic (× ``rate_scale``) and each
        replica's completion rate × ``capacity`` (module docstring)."""
        lam, mu = self.arrival_rate, self.completion_rate
        if lam is None or mu is None:
            raise ValueError("a steady span has no fluid model")
        n = max(replicas, 1)

        def one(mu_v: float) -> tuple[float | None, float | None, float, str | None]:
            arr = lam.mid * rate_scale / n
            cap = mu_v * capacity
            if cap <= arr:
                return None, None, arr - cap, None
            net = cap - arr
            drain = self.backlog / net
            floor = self.floor_ttft or 0.0
            if floor >= self.slo_ttft:
                why = f"the queue-free TTFT p99 {_dur(floor)} is over it"
                return drain, None, 0.0, why
            allowed = (self.slo_ttft - floor) * cap  # requests ahead of one that meets it
            return drain, max(0.0, self.backlog - allowed) / net, 0.0, None

        d, u, grows, why = one(mu.mid)
        hi = one(mu.high)
        lo = one(mu.low)
        return Drain(
            n,
            lam.mid * rate_scale / n,
            mu.mid * capacity,
            d,
            u,
            grows,
            (hi[0], lo[0]),
            (hi[1], lo[1]),
            why,
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"regime": self.regime, "why": self.why}
        if not self.growing:
            return out
        lam, mu = self.arrival_rate, self.completion_rate
        good, bad = self.replicas_range
        out.update(
            {
                "since": self.since,
                "arrival_rate": None if lam is None else lam.to_list(),
                "completion_rate_per_replica": None if mu is None else mu.to_list(),
                "backlog": round(self.backlog, 1),
                "running": round(self.running, 1),
                "replicas_needed": self.replicas_needed,
                "replicas_needed_range": [good, bad],
                "floor_ttft_p99": _round(self.floor_ttft),
                "slo_ttft_p99": self.slo_ttft,
                "routing": ROUTING,
            }
        )
        return out


def _needed(lam: Rate | None, mu: Rate | None, at: str) -> int | None:
    if lam is None or mu is None:
        return None
    lv, mv = getattr(lam, at), getattr(mu, at)
    if mv <= 0:
        return None
    n = math.floor(lv / mv) + 1
    return n if n <= MAX_REPLICAS else None


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 1)


def _dur(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def _span(r: tuple[float | None, float | None]) -> str:
    lo, hi = r
    if lo is None and hi is None:
        return ""
    if hi is None:
        return f" ({_dur(lo or 0.0)} – never)"
    return f" ({_dur(lo or 0.0)}–{_dur(hi)})"


def _slo(s: float) -> str:
    return f"{s * 1000:.0f} ms" if s < 1 else f"{s:g} s"


def _gauge(w: Window, name: str, which: str) -> float | None:
    g = w.gauges.get(name)
    return None if g is None else getattr(g, which)


def _queued(w: Window) -> bool:
    avg = _gauge(w, "waiting", "avg")
    return avg is not None and avg >= QUEUED


def _rate(counts: Sequence[float], seconds: Sequence[float]) -> Rate:
    """The pooled rate of per-tile counts, ±2 standard errors (the larger of the tiles'
    spread and the Poisson noise of the total)."""
    total, t = sum(counts), sum(seconds)
    mid = total / t
    se = math.sqrt(max(total, 1.0)) / t
    per = [c / s for c, s in zip(counts, seconds, strict=True) if s > 0]
    if len(per) >= 2:
        se = max(se, statistics.stdev(per) / math.sqrt(len(per)))
    return Rate(max(mid - 2 * se, 0.0), mid, mid + 2 * se)


def incident_of(tiles: Sequence[Window], slo_ttft: float, latest: Window | None = None) -> Incident:
    """The regime at the span's end and, when its queue grows, the fluid model
    (module docstring). ``tiles``: the span's windows in time order; ``latest``: a window
    ending at the span's end (its latest page), read for the backlog now when it ends
    after the last tile."""
    tiles = [w for w in tiles if w.covered > 0]
    if len(tiles) < MIN_TILES:
        return Incident("steady", "too few windows to see a trend", slo_ttft=slo_ttft)
    j = len(tiles)
    while j > 0 and _queued(tiles[j - 1]):
        j -= 1
    stretch = tiles[j:]
    if len(stretch) < MIN_TILES:
        return Incident("steady", "no queue stands through the span's end", slo_ttft=slo_ttft)
    recent = stretch[-RECENT_TILES:]
    secs = [w.covered for w in recent]
    came = [(w.derived.arrival_rate or 0.0) * w.covered for w in recent]
    rejected = [(w.derived.rejection_rate or 0.0) * w.covered for w in recent]
    lam = _rate(came, secs)
    # μ where the queue stood through the whole tile (the batch was full from its start).
    full = [w for w in recent if (_gauge(w, "waiting", "first") or 0.0) >= QUEUED]
    full = full if len(full) >= MIN_TILES else recent
    mu = _rate(
        [(w.derived.completion_rate or 0.0) * w.covered for w in full], [w.covered for w in full]
    )
    first, last = recent[0], recent[-1]
    q0 = (_gauge(first, "waiting", "first") or 0.0) + (_gauge(first, "running", "first") or 0.0)
    q1 = (_gauge(last, "waiting", "last") or 0.0) + (_gauge(last, "running", "last") or 0.0)
    grew = q1 - q0  # over the tiles λ and μ are read on (their noise is the yardstick)
    now = last
    if (
        latest is not None
        and latest.end > last.end
        and _gauge(latest, "waiting", "last") is not None
    ):
        now = latest
    backlog = _gauge(now, "waiting", "last") or 0.0
    running = _gauge(now, "running", "last") or 0.0
    noise = 3.0 * math.sqrt(sum(came) + mu.mid * sum(secs)) + 1.0
    span_s = sum(secs)
    seen = (
        f"waiting {(_gauge(first, 'waiting', 'first') or 0):.0f} → {backlog:.0f} over "
        f"{_dur(span_s)}; arrivals {lam.mid:.3g}/s, completions {mu.mid:.3g}/s"
    )
    if grew - sum(rejected) <= noise or lam.mid <= mu.mid:
        return Incident("steady", f"the queue does not grow beyond its noise ({seen})",
                        slo_ttft=slo_ttft)  # fmt: skip
    quiet = [
        q.value
        for w in tiles[:j]
        if (a := _gauge(w, "waiting", "avg")) is not None and a < QUIET
        if (q := w.quantiles.get("ttft", {}).get("p99")) is not None and q.value is not None
    ]
    if not quiet:  # no queue-free window: the prefill's own p99 where the page has it
        quiet = [
            q.value
            for w in stretch
            if (q := w.quantiles.get("prefill_time", {}).get("p99")) is not None
            and q.value is not None
        ]
    floor = statistics.median(quiet) if quiet else None
    return Incident(
        "growing",
        f"the queue grows ({seen})",
        since=stretch[0].start,
        arrival_rate=lam,
        completion_rate=mu,
        backlog=backlog,
        running=running,
        floor_ttft=floor,
        slo_ttft=slo_ttft,
    )
