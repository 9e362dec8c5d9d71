"""Burn rates and budgets of every SLO on every fleet, cheaply, every evaluation.

A burn rate over ``w`` ending at ``end`` is the SLO's counts (``app.fleet.slo``) over
``(end − w, end]``, summed over the fleet's replicas — like
``sum(rate(bad[w])) / sum(rate(total[w]))`` at ``end``. Each replica's counts come from
a :class:`~app.fleet.count_cache.CountCache` per SLO key (cached 5-minute chunks and
whole hours), kept between evaluations.

Burn windows (``BURN_WINDOWS``, up to a day) are exact. The budget's period (30 days by
default) starts at the first whole hour inside it (and inside the history the source
can hold: the store's retention), and is filled ``fill_chunks`` chunks per
stream per evaluation, newest first, so a restart never stalls on a month of history;
until it is complete the budget says how much it covers (``Budget.covered_s``, the
``budget_from`` time).

Pure apart from reading deltas through :class:`~app.fleet.deltas.DeltaSource` (the
store, or a recording in memory); time is passed in.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.fleet.aggregate import FleetKey, fleet_key
from app.fleet.count_cache import CHUNK_S, HOUR, CountCache
from app.fleet.deltas import DeltaSource, Stream
from app.fleet.slo import (
    Budget,
    SloCounts,
    SloSpec,
    attainment,
    budget,
    burn_rate,
)
from app.pacing import BACKGROUND_SHARE, Pacer
from app.probeconfig import PROBE_LABEL

__all__ = [
    "BURN_WINDOWS",
    "SloStatus",
    "SloTracker",
    "matches",
]

BURN_WINDOWS: tuple[tuple[str, float], ...] = (
    ("5m", 300.0),
    ("30m", 1800.0),
    ("1h", 3600.0),
    ("2h", 7200.0),
    ("6h", 21600.0),
    ("1d", 86400.0),
)
FILL_CHUNKS = 576  # two days of chunks per stream per evaluation


def matches(
    selector: Iterable[tuple[str, str]], model_name: str, labels: Mapping[str, str]
) -> bool:
    """Whether a stream is selected: ``model_name`` and target labels, all must equal."""
    for key, value in selector:
        have = model_name if key == "model_name" else labels.get(key)
        if have != value:
            return False
    return True


@dataclass(frozen=True, slots=True)
class SloStatus:
    """One SLO on one fleet at ``end``: burn rates, counts per window, budget.

    ``burn[w]`` is the fastest objective's burn rate over window ``w`` (``"5m"``…``"1d"``)
    and ``burn_objective[w]`` which objective that is; ``latest`` the counts of the latest
    ``window.length`` window; ``budget_from`` the start of the data the budget covers.
    """

    spec: SloSpec
    key: FleetKey
    members: tuple[str, ...]
    end: float
    burn: dict[str, float | None]
    burn_objective: dict[str, str | None]
    counts: dict[str, SloCounts]
    latest: SloCounts
    latest_s: float
    budget: Budget
    budget_from: float
    per_replica: dict[str, SloCounts] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "slo": self.spec.name,
            "fleet": self.key.name,
            "model_name": self.key.model_name,
            "labels": dict(self.key.labels),
            "target": self.spec.target,
            "period_s": self.spec.period_s,
            "objectives": self.spec.bounds(),
            "replicas": list(self.members),
            "end": self.end,
            "burn_rates": dict(self.burn),
            "burn_objectives": dict(self.burn_objective),
            "latest": {"window_s": self.latest_s, **self.latest.to_dict()},
            "windows": {w: c.to_dict() for w, c in self.counts.items()},
            "budget": {**self.budget.to_dict(), "from": self.budget_from},
            "per_replica": {t: c.to_dict() for t, c in self.per_replica.items()},
        }


class SloTracker:
    """Evaluates every SLO on every fleet it selects; caches counts between calls."""

    def __init__(
        self,
        source: DeltaSource,
        specs: Sequence[SloSpec],
        group_by: Sequence[str] = (),
        *,
        latest_s: float = 60.0,
        fill_chunks: int = FILL_CHUNKS,
        retention_s: float | None = None,
    ) -> None:
        self.source = source
        self.specs = list(specs)
        self.group_by = list(group_by)
        self.latest_s = latest_s
        self.fill_chunks = fill_chunks
        self.retention_s = retention_s
        self._caches: dict[tuple[object, ...], CountCache] = {}
        self._lock = threading.Lock()
        self.last: list[SloStatus] = []
        # Streams with counts cached after the last evaluation (``_count_held``).
        self.streams_held = 0

    def period_start(self, spec: SloSpec, end: float) -> float:
        """Where the budget's period starts at ``end``: the first whole hour inside the
        period, or inside the history the source can still hold (its ``earliest()``, or
        ``retention_s``), whichever is later."""
        start = end - spec.period_s
        if self.retention_s is not None:
            start = max(start, end - self.retention_s)
        earliest = getattr(self.source, "earliest", None)
        first = earliest() if callable(earliest) else None
        if first is not None:
            start = max(start, math.floor(first / (CHUNK_S * HOUR)) * CHUNK_S * HOUR)
        hour = CHUNK_S * HOUR
        return math.ceil(start / hour) * hour

    def _count_held(self) -> int:
        """Streams with SLO counts cached (under the lock): every stream with data in an
        SLO's period, removed targets' too (their requests count in the budget)."""
        held: set[Stream] = set()
        for cache in self._caches.values():
            held.update(s for s, packed in cache.chunks.items() if packed)
            held.update(s for s, packed in cache.hours.items() if packed)
            held.update(s for s, packed in cache.days.items() if packed)
        return len(held)

    def _cache(self, spec: SloSpec) -> CountCache:
        cache = self._caches.get(spec.key)
        if cache is None:
            cache = self._caches[spec.key] = CountCache(self.source, spec)
        return cache

    def fleets(
        self, spec: SloSpec, streams: Iterable[Stream], labels_of: Mapping[str, Mapping[str, str]]
    ) -> dict[FleetKey, list[str]]:
        """The fleets an SLO selects, with their member targets (a probe's target is no
        replica: ``aggregate.group_streams``)."""
        out: dict[FleetKey, list[str]] = {}
        for target, model in streams:
            labels = labels_of.get(target, {})
            if PROBE_LABEL in labels:
                continue
            if model not in spec.exclude_models and matches(spec.selector, model, labels):
                out.setdefault(fleet_key(model, labels, self.group_by), []).append(target)
        return {k: sorted(set(v)) for k, v in sorted(out.items())}

    def evaluate(
        self,
        end: float,
        streams: Sequence[Stream],
        labels_of: Mapping[str, Mapping[str, str]],
        *,
        closed_until: float | None = None,
        share: float = BACKGROUND_SHARE,
        reuse_from: float | None = None,
        stop: threading.Event | None = None,
    ) -> list[SloStatus]:
        """Every (SLO, fleet) at ``end``; chunks ending after ``closed_until`` (default
        ``end``) are read, never cached. ``share``: of the interpreter (:mod:`app.pacing`).
        ``reuse_from``: the last evaluation's statuses when they all end at or after it
        (one that ran while this call waited for the lock is not done twice). ``stop``
        set: the count ends between two fleets, what it counted returned and not kept as
        :attr:`last` (its source is about to close)."""
        closed = end if closed_until is None else min(end, closed_until)
        out: list[SloStatus] = []
        pace = Pacer(share)  # leave the scrape loop its share of the interpreter
        with self._lock:
            last = self.last
            if reuse_from is not None and last and min(s.end for s in last) >= reuse_from:
                return list(last)
            for spec in self.specs:
                cache = self._cache(spec)
                cache.begin()
                for key, members in self.fleets(spec, streams, labels_of).items():
                    if stop is not None and stop.is_set():
                        return out
                    pace()
                    out.append(self._status(cache, spec, key, members, end, closed))
            keep = max((s.period_s for s in self.specs), default=0.0) + 86400.0
            windows = [w for _, w in BURN_WINDOWS] + [self.latest_s]
            for counted, cache in self._caches.items():
                starts = {self.period_start(s, end) for s in self.specs if s.key == counted}
                cache.prune(end, keep, windows=windows, period_starts=starts)
            self.last = out
            self.streams_held = self._count_held()
        return out

    def fleet_statuses(
        self,
        end: float,
        key: FleetKey,
        members: Sequence[str],
        labels_of: Mapping[str, Mapping[str, str]],
        *,
        closed_until: float | None = None,
    ) -> list[SloStatus]:
        """Every SLO on one fleet at ``end`` (its page: a few streams' counts, not the
        whole fleet's), leaving :attr:`last` as it is."""
        closed = end if closed_until is None else min(end, closed_until)
        streams = [(t, key.model_name) for t in members]
        out: list[SloStatus] = []
        with self._lock:
            for spec in self.specs:
                selected = self.fleets(spec, streams, labels_of).get(key)
                if selected:
                    cache = self._cache(spec)
                    cache.begin()
                    out.append(self._status(cache, spec, key, selected, end, closed))
        return out

    def _status(
        self,
        cache: CountCache,
        spec: SloSpec,
        key: FleetKey,
        members: Sequence[str],
        end: float,
        closed: float,
    ) -> SloStatus:
        streams = [(t, key.model_name) for t in members]
        counts: dict[str, SloCounts] = {}
        burn: dict[str, float | None] = {}
        which: dict[str, str | None] = {}
        for label, seconds in BURN_WINDOWS:
            total = SloCounts()
            for s in streams:
                total = total + cache.range(s, end - seconds, end, closed_until=closed)[0]
            counts[label] = total
            burn[label], which[label] = burn_rate(total, spec.target)
        per_replica: dict[str, SloCounts] = {}
        latest = SloCounts()
        for s in streams:
            c = cache.range(s, end - self.latest_s, end, closed_until=closed)[0]
            per_replica[s[0]] = c
            latest = latest + c
        period_start = self.period_start(spec, end)
        fill = [self.fill_chunks]
        period = SloCounts()
        since = period_start
        span = 0.0  # the longest-covered replica's seconds: how much of the period is held
        for s in streams:
            fill[0] = self.fill_chunks
            part, frm = cache.range(s, period_start, end, closed_until=closed, fill=fill)
            period = period + part
            since = max(since, frm)
            span = max(span, part.covered)
        return SloStatus(
            spec=spec,
            key=key,
            members=tuple(members),
            end=end,
            burn=burn,
            burn_objective=which,
            counts=counts,
            latest=latest,
            latest_s=self.latest_s,
            budget=budget(
                period, spec.target, spec.min_events, span_s=span, period_s=spec.period_s
            ),
            budget_from=since,
            per_replica=per_replica,
        )

    def series(
        self,
        spec: SloSpec,
        key: FleetKey,
        members: Sequence[str],
        *,
        start: float,
        end: float,
        step: float,
        window_s: float,
        closed_until: float | None = None,
    ) -> list[dict[str, Any]]:
        """Attainment, burn rate (over ``window_s``) and budget left at every multiple of
        ``step`` in ``(start, end]``, oldest first: the SLO's history on one fleet."""
        closed = end if closed_until is None else min(end, closed_until)
        streams = [(t, key.model_name) for t in members]
        out: list[dict[str, Any]] = []
        with self._lock:
            cache = self._cache(spec)
            cache.begin()
            t = (math.floor(start / step) + 1) * step
            while t <= end:
                win = SloCounts()
                period = SloCounts()
                period_start = self.period_start(spec, t)
                since = period_start
                span = 0.0
                for s in streams:
                    win = win + cache.range(s, t - window_s, t, closed_until=closed)[0]
                    fill = [self.fill_chunks]
                    part, frm = cache.range(s, period_start, t, closed_until=closed, fill=fill)
                    period = period + part
                    since = max(since, frm)
                    span = max(span, part.covered)
                rate, objective = burn_rate(win, spec.target)
                left = budget(
                    period, spec.target, spec.min_events, span_s=span, period_s=spec.period_s
                )
                out.append(
                    {
                        "end": t,
                        "attainment": attainment(win),
                        "burn_rate": rate,
                        "objective": objective,
                        "error_share": win.share("error"),
                        "abort_share": win.share("abort"),
                        "requests": win.finished,
                        "budget_remaining": left.remaining,
                        "budget_burn_rate": left.burn,
                        "budget_from": since,
                    }
                )
                t += step
        return out
