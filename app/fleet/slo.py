"""SLO attainment from histogram buckets, burn rates, error budgets and goodput. Pure.

**Attainment** of a latency objective ("TTFT ≤ 2 s") is the share of observations at or
below the bound: the cumulative bucket count at ``le="2"`` over the total, exactly
``sum(rate(h_bucket{le="$slo"}[w])) / sum(rate(h_count[w]))`` of vLLM's own dashboards
(``docs/vllm-signals.md``, "When vLLM observes"). When the bound is not a bucket edge (vLLM's TTFT
buckets jump from 1 s to 2.5 s, so the MLPerf 2 s objective is not one), the count is
interpolated linearly inside the bucket that holds the bound — the same assumption
``histogram_quantile`` makes — and flagged ``interpolated``; ``good_min``/``good_max`` are
the counts at the bucket's two edges, the histogram's resolution. Edge cases:

* the bound is below the first bucket's bound: the first bucket starts at 0 (as in
  ``histogram_quantile``), interpolated from 0;
* the bound is above the highest finite bound: the ``+Inf`` bucket cannot be judged; its
  observations count as misses (``good`` = the highest finite bucket's count, a lower
  bound) and ``beyond_top`` is set;
* no observations: ``total`` 0 and the ratio is ``None``, never 1.

Every count is a linear function of the bucket counts, so counts of intervals, windows and
replicas simply add up: the attainment of a fleet is the attainment of its summed
histogram, and the attainment of a day is the sum of its hours.

**Objectives** are ``ttft`` and ``tpot`` (one observation per request), ``itl`` (one per
token gap: a share of gaps, not of requests) and ``errors`` (finished requests whose
``finished_reason`` is not one of the SLO's bad reasons, from
``vllm:request_success_total``). An SLO with several objectives is met when each is:
every objective has the budget ``1 − target`` of its own events, the SLO's **burn rate**
is the fastest-burning objective's ``(1 − attainment) / (1 − target)``, and its **budget
remaining** the smallest objective's ``1 − bad / ((1 − target) · total)`` over the period
(negative once overspent) — so "TTFT p99 ≤ 2 s and ITL p99 ≤ 100 ms" is the SLO with
target 0.99 and those two objectives. A budget is judged only once its period holds
``min_events`` events of every objective that has any: at target 0.99 one slow request
among the first hundred would read "overspent", which says nothing about the month.

**Goodput** (DistServe; vLLM's ``benchmark_serving --goodput``) is requests per second
that met both the TTFT and the TPOT objective (the ITL bound applied to TPOT when the SLO
has no TPOT objective) and did not fail. Histograms give each objective's misses but not
which requests missed both, so goodput is a range: at least ``n − misses_ttft −
misses_tpot − failed`` (no request missed two: the conservative figure reported as
``goodput``), at most ``n − max(...)`` (every miss on the same requests). The range is
narrow when either objective is nearly always met. TTFT is counted over requests that got
their first token in the window and scaled to the finished ones.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from app.fleet.budget import Budget, from_per_objective
from app.model import HistogramDelta, IntervalDelta, Window
from app.windows.exact import sum_histogram_deltas

__all__ = [
    "OBJECTIVES",
    "Budget",
    "Goodput",
    "SloCounts",
    "SloSpec",
    "Tally",
    "attainment",
    "budget",
    "burn_rate",
    "counts_of_sums",
    "delta_counts",
    "good_below",
    "goodput",
    "window_counts",
]

# objective → histogram signal it is read from (``errors`` reads the finished counters)
OBJECTIVES: dict[str, str] = {"ttft": "ttft", "itl": "itl", "tpot": "tpot"}
_REL = 1e-9


@dataclass(frozen=True, slots=True)
class SloSpec:
    """One SLO: its objectives (seconds; None = not part of it), target and period.

    ``selector`` picks the streams it applies to: ``model_name`` and target labels, all
    of which must be equal (empty: every model) — except ``exclude_models``.
    """

    name: str
    target: float = 0.99
    period_s: float = 30 * 86400.0
    ttft: float | None = 2.0
    itl: float | None = 0.1
    tpot: float | None = None
    bad_reasons: tuple[str, ...] = ("error",)
    selector: tuple[tuple[str, str], ...] = ()
    exclude_models: tuple[str, ...] = ()
    min_events: float = 0.0  # events an objective needs before the budget is judged

    def bounds(self) -> dict[str, float]:
        """Latency objectives with their bounds."""
        out = {}
        for name in OBJECTIVES:
            bound = getattr(self, name)
            if bound is not None:
                out[name] = float(bound)
        return out

    @property
    def goodput_tpot(self) -> float | None:
        """The per-request decode bound goodput uses: TPOT, else the ITL objective."""
        return self.tpot if self.tpot is not None else self.itl

    @property
    def key(self) -> tuple[object, ...]:
        """What the counts depend on (SLOs with equal keys share cached counts)."""
        return (self.ttft, self.itl, self.tpot, self.bad_reasons)


@dataclass(frozen=True, slots=True)
class Tally:
    """Good and total events of one objective; additive.

    ``good_min``/``good_max`` bracket ``good`` by the bucket holding the bound (equal to
    it on a bucket edge); ``interpolated`` and ``beyond_top`` as in the module docstring.
    """

    good: float = 0.0
    total: float = 0.0
    good_min: float = 0.0
    good_max: float = 0.0
    interpolated: bool = False
    beyond_top: bool = False

    def __add__(self, other: Tally) -> Tally:
        return Tally(
            self.good + other.good,
            self.total + other.total,
            self.good_min + other.good_min,
            self.good_max + other.good_max,
            self.interpolated or other.interpolated,
            self.beyond_top or other.beyond_top,
        )

    @property
    def bad(self) -> float:
        return max(0.0, self.total - self.good)

    @property
    def ratio(self) -> float | None:
        """good / total; None with no events."""
        return self.good / self.total if self.total > 0 else None

    def to_dict(self) -> dict[str, object]:
        return {
            "good": self.good,
            "total": self.total,
            "good_min": self.good_min,
            "good_max": self.good_max,
            "ratio": self.ratio,
            "interpolated": self.interpolated,
            "beyond_top": self.beyond_top,
        }


def _close(a: float, b: float) -> bool:
    return a == b or abs(a - b) <= _REL * max(abs(a), abs(b))


def good_below(hd: HistogramDelta, bound: float) -> Tally:
    """Observations at or below ``bound`` in a (sparse, non-cumulative) histogram delta."""
    n_buckets = len(hd.bounds) + 1
    counts = [0.0] * n_buckets
    for index, inc in hd.buckets.items():
        if 0 <= index < n_buckets:
            counts[index] = inc
    total = math.fsum(counts)
    if total <= 0:
        return Tally()
    below = 0.0  # cumulative count up to the previous bound
    lo = 0.0
    for i, hi in enumerate(hd.bounds):
        here = counts[i]
        if _close(bound, hi):
            return Tally(below + here, total, below + here, below + here)
        if bound < hi:
            if bound <= lo:  # at or below the lower edge of the first bucket
                return Tally(below, total, below, below + here, here > 0)
            frac = (bound - lo) / (hi - lo)
            return Tally(below + here * frac, total, below, below + here, here > 0)
        below += here
        lo = hi
    top = counts[-1]
    return Tally(below, total, below, below + top, False, top > 0)


@dataclass(frozen=True, slots=True)
class SloCounts:
    """Additive counts of one stream (or fleet) over some time, for one SLO's objectives.

    ``tallies`` per objective (``ttft``, ``itl``, ``tpot``, ``errors``); ``goodput_tpot``
    the TPOT histogram at the goodput bound; ``finished`` every finished request and
    ``by_reason`` per ``finished_reason``; ``covered`` the seconds of deltas summed
    (replica-seconds for a fleet).
    """

    tallies: Mapping[str, Tally] = field(default_factory=dict)
    goodput_tpot: Tally | None = None
    finished: float | None = None
    by_reason: Mapping[str, float] = field(default_factory=dict)
    covered: float = 0.0

    @property
    def empty(self) -> bool:
        """Nothing counted and no time covered (a chunk before the first delta)."""
        return (
            not self.tallies
            and self.goodput_tpot is None
            and self.finished is None
            and not self.by_reason
            and self.covered == 0.0
        )

    def __add__(self, other: SloCounts) -> SloCounts:
        # Frozen, so either side can stand for the sum when the other adds nothing:
        # sums over a day of chunks are mostly empty ones on a young store.
        if other.empty:
            return self
        if self.empty:
            return other
        tallies = dict(self.tallies)
        for name, t in other.tallies.items():
            tallies[name] = tallies[name] + t if name in tallies else t
        reasons = dict(self.by_reason)
        for name, v in other.by_reason.items():
            reasons[name] = reasons.get(name, 0.0) + v
        gp = self.goodput_tpot
        if other.goodput_tpot is not None:
            gp = other.goodput_tpot if gp is None else gp + other.goodput_tpot
        finished = self.finished
        if other.finished is not None:
            finished = other.finished if finished is None else finished + other.finished
        return SloCounts(tallies, gp, finished, reasons, self.covered + other.covered)

    def share(self, reason: str) -> float | None:
        """Share of finished requests that ended with ``reason`` (None: none finished)."""
        if not self.finished:
            return None
        return self.by_reason.get(reason, 0.0) / self.finished

    def to_dict(self) -> dict[str, object]:
        return {
            "objectives": {k: t.to_dict() for k, t in sorted(self.tallies.items())},
            "finished": self.finished,
            "error_share": self.share("error"),
            "abort_share": self.share("abort"),
            "covered_s": self.covered,
        }


def _tally(hds: Iterable[HistogramDelta], bound: float) -> Tally | None:
    """The tally of several deltas of one signal: summed per bucket layout, then judged."""
    groups: dict[tuple[float, ...], list[HistogramDelta]] = {}
    for hd in hds:
        groups.setdefault(hd.bounds, []).append(hd)
    out: Tally | None = None
    for same in groups.values():
        summed = same[0] if len(same) == 1 else sum_histogram_deltas(same)
        if summed is not None:
            t = good_below(summed, bound)
            out = t if out is None else out + t
    return out


def _counts(
    histograms: Mapping[str, list[HistogramDelta]],
    increases: Mapping[str, float],
    spec: SloSpec,
    covered: float,
) -> SloCounts:
    tallies: dict[str, Tally] = {}
    for name, bound in spec.bounds().items():
        t = _tally(histograms.get(OBJECTIVES[name], []), bound)
        if t is not None:
            tallies[name] = t
    reasons = {k.split(":", 1)[1]: v for k, v in increases.items() if k.startswith("finished:")}
    finished = math.fsum(reasons.values()) if reasons else None
    if finished is not None and spec.bad_reasons:
        failed = math.fsum(reasons.get(r, 0.0) for r in spec.bad_reasons)
        ok = finished - failed
        tallies["errors"] = Tally(ok, finished, ok, ok)
    gp_bound = spec.goodput_tpot
    gp = _tally(histograms.get("tpot", []), gp_bound) if gp_bound is not None else None
    return SloCounts(tallies, gp, finished, reasons, covered)


def counts_of_sums(
    histograms: Mapping[str, list[HistogramDelta]],
    increases: Mapping[str, float],
    spec: SloSpec,
    covered: float,
) -> SloCounts:
    """The SLO counts of histograms already summed (per signal, one delta per bucket
    layout: a roll-up's sums), the ``finished:*`` increases and the covered seconds."""
    return _counts(histograms, increases, spec, covered)


def window_counts(w: Window, spec: SloSpec) -> SloCounts:
    """The SLO counts of one window (a replica's or a fleet's summed window)."""
    return _counts({k: [v] for k, v in w.histograms.items()}, w.increases, spec, w.covered)


def delta_counts(deltas: Iterable[IntervalDelta], spec: SloSpec) -> SloCounts:
    """The SLO counts of some interval deltas of one stream (any bucket layouts)."""
    wanted = {OBJECTIVES[n] for n in spec.bounds()} | {"tpot"}
    histograms: dict[str, list[HistogramDelta]] = {}
    increases: dict[str, float] = {}
    covered = 0.0
    for d in deltas:
        covered += d.end - d.start
        for name, hd in d.histograms.items():
            if name in wanted:
                histograms.setdefault(name, []).append(hd)
        for name, v in d.counters.items():
            if name.startswith("finished:"):
                increases[name] = increases.get(name, 0.0) + v
    return _counts(histograms, increases, spec, covered)


def attainment(counts: SloCounts) -> dict[str, float | None]:
    """Share of good events per objective (None where no event happened)."""
    return {name: t.ratio for name, t in sorted(counts.tallies.items())}


def burn_rate(counts: SloCounts, target: float) -> tuple[float | None, str | None]:
    """The fastest burn rate over the objectives, and which objective it is.

    ``(1 − attainment) / (1 − target)``: 1 spends the budget exactly over the period,
    14.4 spends 2 % of a 30-day budget in an hour. ``(None, None)`` with no events at all.
    """
    allowed = 1.0 - target
    best: tuple[float | None, str | None] = (None, None)
    for name, t in sorted(counts.tallies.items()):
        ratio = t.ratio
        if ratio is None:
            continue
        rate = (1.0 - ratio) / allowed
        if best[0] is None or rate > best[0]:
            best = (rate, name)
    return best


def budget(
    counts: SloCounts,
    target: float,
    min_events: float = 0.0,
    *,
    span_s: float = 0.0,
    period_s: float = 0.0,
) -> Budget:
    """Budget left per objective: ``1 − bad / ((1 − target) · total)``
    (:mod:`app.fleet.budget`: early in the period, a burn rate and its projection).

    Edge cases: an objective without events has None and is left out of the SLO's
    budget; no events at all give None; while an objective with events has fewer than
    ``min_events`` of them, every value is None (the budget is not judged yet).
    ``span_s``: the seconds the data spans; ``period_s``: the SLO's (0: never early).
    """
    allowed = 1.0 - target
    totals = [t.total for t in counts.tallies.values() if t.total > 0]
    events = min(totals) if totals else 0.0
    per: dict[str, float | None] = {}
    for name, t in sorted(counts.tallies.items()):
        judged = t.total > 0 and events >= min_events
        per[name] = 1.0 - t.bad / (allowed * t.total) if judged else None
    return from_per_objective(per, counts.covered, events, min_events, span_s, period_s)


@dataclass(frozen=True, slots=True)
class Goodput:
    """Requests that met TTFT and TPOT and did not fail: an estimate inside a range.

    ``good`` assumes no request missed two objectives (interpolated counts);
    ``good_min`` adds the bucket resolution to that (the lower bucket edges), ``good_max``
    assumes every miss fell on the same requests (upper edges). ``per_s*`` divide by the
    seconds given.
    """

    requests: float | None
    good: float | None
    good_min: float | None
    good_max: float | None
    per_s: float | None
    per_s_min: float | None
    per_s_max: float | None
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {
            "requests": self.requests,
            "good": self.good,
            "good_min": self.good_min,
            "good_max": self.good_max,
            "goodput_per_s": self.per_s,
            "goodput_min_per_s": self.per_s_min,
            "goodput_max_per_s": self.per_s_max,
            "approximated": True,
            "notes": list(self.notes),
        }


def _misses(n: float, t: Tally) -> tuple[float, float, float]:
    """Misses among ``n`` requests from a tally's ratio: (estimate, most, fewest)."""
    return (
        n * (1.0 - t.good / t.total),
        n * (1.0 - t.good_min / t.total),
        n * (1.0 - t.good_max / t.total),
    )


def goodput(counts: SloCounts, spec: SloSpec, seconds: float) -> Goodput:
    """Goodput over ``seconds`` (the window's length) from one stream's or fleet's counts."""
    gp = counts.goodput_tpot
    n = counts.finished if counts.finished is not None else (gp.total if gp else None)
    if not n:
        return Goodput(n, None, None, None, None, None, None, ("no finished requests",))
    notes = []
    misses: list[tuple[float, float, float]] = []
    ttft = counts.tallies.get("ttft")
    if ttft is not None and ttft.total > 0:
        misses.append(_misses(n, ttft))
        notes.append("TTFT misses scaled from first tokens to finished requests")
    elif spec.ttft is not None:
        notes.append("no TTFT observations: TTFT not judged")
    if gp is not None and gp.total > 0:
        misses.append(_misses(n, gp))
        if spec.tpot is None:
            notes.append("TPOT judged against the ITL objective")
    elif spec.goodput_tpot is not None:
        notes.append("no TPOT histogram: decode speed not judged")
    failed = math.fsum(counts.by_reason.get(r, 0.0) for r in spec.bad_reasons)
    misses.append((failed, failed, failed))
    if any(t is not None and t.interpolated for t in (ttft, gp)):
        notes.append("a bound inside a bucket: interpolated")
    good = max(0.0, n - math.fsum(m[0] for m in misses))
    low = max(0.0, n - math.fsum(m[1] for m in misses))
    high = max(0.0, n - max(m[2] for m in misses))
    if seconds > 0:
        return Goodput(
            n, good, low, high, good / seconds, low / seconds, high / seconds, tuple(notes)
        )
    return Goodput(n, good, low, high, None, None, None, tuple(notes))
