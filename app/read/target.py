"""The pages' read side of streams: windows → diagnoses → chart points, for any source.

Diagnoses are computed here from the windows rather than read from the ``diagnoses``
table, the way the evaluation round judges a window (``app.evaluate.stream``: the
service's configuration, the server settings the stream's latest page reports), so a
hint on a page is the hint the API stores for that window. That is one code path for
the live store, a recording and a Prometheus range, and it works for any window length
or step the page asks for. Points of windows that can no
longer change (older than the source's ``settled`` delay) are cached per instance, so a
live page refreshing every few seconds only computes its newest windows. A problem
window's changes come from its run's baseline (``app.read.compare``); the records and
the resolution from ``app.read.points``.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace

from app.diagnose.changes import COMPARED
from app.diagnose.config import DiagnosisConfig
from app.diagnose.records import Diagnosis
from app.evaluate.stream import judge_window
from app.model import Window
from app.pacing import pace
from app.read.compare import RunBaselines
from app.read.points import (
    DEFAULT_BUDGET,
    FRESH_STEPS,
    RECENT_S,
    Card,
    Point,
    Timeline,
    card_rank,
    fresh_rounds,
    on_grid,
    point_of,
    resolution,
    target_error,
)
from app.read.source import Observed, WindowSource
from app.read.windows import grid_runs

_CACHE_CAP = 200_000
# Cached points older than this before the newest one of their stream are dropped: the
# pages look back at most a day by preset (a custom range further back is recomputed).
_CACHE_KEEP_S = 2 * 86400.0
# Streams remembered as viewed (the warmer keeps the most recent of them computed).
VIEWED_KEPT = 256
# How long the overview waits for the service's first round's windows (seconds; after a
# start with nothing kept, 1,000 streams' windows take a few) before windowing them itself.
FIRST_ROUND_WAIT_S = 10.0

PointKey = tuple[str, str, float, float]
"""A stream at one resolution: (target, model, window length, step)."""


class UiData:
    """Timelines, current diagnoses and overview cards over one source (one per app)."""

    def __init__(
        self,
        source: WindowSource,
        config: DiagnosisConfig,
        *,
        length: float = 60.0,
        step: float = 15.0,
        budget: int = DEFAULT_BUDGET,
    ) -> None:
        self.source = source
        self.config = config
        self.length = length
        self.step = step
        self.budget = budget
        # Settled windows' points; None for a window with no data at all (nothing scraped).
        self._cache: dict[PointKey, dict[float, Point | None]] = {}
        self._cached = 0
        self._lock = threading.Lock()
        # One computation per (stream, resolution) at a time: a live refresh that arrives
        # while a cold day is being computed waits for it and then reads the cache.
        self._key_locks: dict[PointKey, threading.Lock] = {}
        # The latest settled window's diagnosis of each (stream, length), by its end: the
        # overview asks for every stream's on each refresh; one kept per stream.
        self._diagnosed: dict[
            tuple[str, str, float], tuple[float, tuple[Window, Diagnosis] | None]
        ] = {}
        # Inside the service: the evaluation round's latest window and diagnosis of every
        # stream (it computes them each round anyway); the overview orders by them while
        # they are fresh instead of windowing 1,000 streams on its first view.
        self.latest: Callable[[], Sequence[tuple[Window, Diagnosis]]] | None = None
        # …and a wait (at most its argument's seconds) while the service's first round is
        # under way and none is fresh: its windows then serve the cards, where windowing
        # every stream beside it would double the work at start-up (``Evaluator.wait_judged``).
        self.wait_latest: Callable[[float], bool] | None = None
        # Streams whose views were asked for, oldest first, with when (the warmer's list).
        self._viewed: OrderedDict[tuple[str, str], float] = OrderedDict()
        # …and each stream's classes over the last minutes, as the rounds judged them
        # (``app.evaluate.recent``): the cards' strips, once they cover ``RECENT_S``.
        self.recent_of: Callable[[str, str], Sequence[tuple[float, str, str | None]]] | None = None
        # Each run's healthy baseline, for what changed.
        self.baselines = RunBaselines(source, config)

    # -- time -------------------------------------------------------------------------
    def now(self) -> float:
        return self.source.now()

    def aligned_end(self, ts: float, step: float | None = None) -> float:
        """The last window end on the step grid at or before ``ts``."""
        s = step or self.step
        return math.floor(ts / s + 1e-9) * s

    def slo(self, target: str, model: str) -> tuple[float, float]:
        slo = self.config.slo_for(target, model)
        return slo.ttft_p99, slo.itl_p99

    # -- windows ------------------------------------------------------------------------
    def _diagnose(self, o: Observed) -> Diagnosis:
        """The window judged as the evaluation round judges it (its comparison with the
        run's baseline is :meth:`diagnosis_at`'s, for the window a card explains)."""
        return judge_window(
            o.window,
            self.config,
            failed_scrapes=o.failed_scrapes,
            attempted_scrapes=o.attempted_scrapes,
        )

    def timeline(
        self, target: str, model: str, start: float, end: float, *, warm: bool = False
    ) -> Timeline:
        """Points of the windows ending on the grid in ``(start, end]``; a call that is
        not the warmer's (``warm``) marks the stream as viewed (:meth:`viewed`)."""
        if not warm:
            with self._lock:
                self._viewed.pop((target, model), None)
                self._viewed[(target, model)] = time.monotonic()
                while len(self._viewed) > VIEWED_KEPT:
                    self._viewed.popitem(last=False)
        length, step = resolution(
            start, end, length=self.length, step=self.step, budget=self.budget
        )
        first = (math.floor(start / step) + 1) * step
        last = self.aligned_end(end, step)
        ttft_slo, itl_slo = self.slo(target, model)
        points = self._points(target, model, first, last, length, step) if last >= first else []
        return Timeline(
            target=target,
            model_name=model,
            start=start,
            end=end,
            length=length,
            step=step,
            points=tuple(points),
            slo_ttft_p99=ttft_slo,
            slo_itl_p99=itl_slo,
        )

    def _points(
        self, target: str, model: str, first: float, last: float, length: float, step: float
    ) -> list[Point]:
        key = (target, model, length, step)
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            return self._points_locked(key, first, last)

    def _points_locked(self, key: PointKey, first: float, last: float) -> list[Point]:
        target, model, length, step = key
        settled_until = self.source.now() - self.source.settled
        with self._lock:
            cached = dict(self._cache.get(key, {}))
        n = int(round((last - first) / step)) + 1
        ends = [first + k * step for k in range(n)]
        todo = [e for e in ends if e not in cached]
        fresh: dict[float, Point | None] = {}
        # Compute the missing ends in contiguous runs (one read per run).
        for lo, hi in grid_runs(todo, step):
            for o in self.source.observe(
                target, model, first_end=lo, end=hi, length=length, step=step
            ):
                empty = o.window.intervals == 0 and not o.attempted_scrapes
                fresh[o.window.end] = None if empty else point_of(o.window, self._diagnose(o))
        self._keep(key, {e: p for e, p in fresh.items() if e <= settled_until})
        out = []
        for e in ends:
            p = cached[e] if e in cached else fresh.get(e)
            if p is not None:
                out.append(p)
        return out

    def _keep(self, key: PointKey, keep: dict[float, Point | None]) -> None:
        """Cache the settled points of a stream at one resolution (within the caps)."""
        if not keep:
            return
        with self._lock:
            if self._cached + len(keep) > _CACHE_CAP:
                self._cache.clear()
                self._cached = 0
            points = self._cache.setdefault(key, {})
            points.update(keep)
            self._cached += len(keep)
            horizon = max(keep) - _CACHE_KEEP_S
            if min(points) < horizon:
                for e in [e for e in points if e < horizon]:
                    del points[e]
                    self._cached -= 1

    def diagnosis_at(
        self,
        target: str,
        model: str,
        end: float,
        length: float | None = None,
        *,
        compare: bool = True,
    ) -> tuple[Window, Diagnosis] | None:
        """The window of ``length`` (default the configured one) ending at ``end``; with
        ``compare``, a problem window's changes against the healthy baseline."""
        size = length or self.length
        key = (target, model, size)
        hit = self._diagnosed.get(key)
        if hit is not None and hit[0] == end:
            got = hit[1]
        else:
            obs = self.source.observe(target, model, first_end=end, end=end, length=size, step=size)
            got = (obs[0].window, self._diagnose(obs[0])) if obs else None
            if end <= self.source.now() - self.source.settled:  # it can no longer change
                with self._lock:
                    if hit is None or hit[0] < end:
                        self._diagnosed[key] = (end, got)
        if got is None or not compare or str(got[1].cls) not in COMPARED:
            return got
        return got[0], self.baselines.compare(got[0], got[1], self.timeline)

    def current(
        self, target: str, model: str, *, compare: bool = True
    ) -> tuple[Window, Diagnosis] | None:
        """The latest complete window of a stream."""
        return self.diagnosis_at(target, model, self.aligned_end(self.now()), compare=compare)

    # -- overview ---------------------------------------------------------------------------
    def cards(
        self,
        firing: dict[tuple[str, str], list[str]] | None = None,
        *,
        judged: list[tuple[Window, Diagnosis]] | None = None,
    ) -> list[Card]:
        """One card per stream (a down target without streams gets one), worst first:
        each stream's latest window and diagnosis, what the order needs (appended to
        ``judged`` where given: the fleets' views read them too). The class strip of the
        last 15 minutes (``recent``) is left out: it costs a window and a diagnosis per
        step, so only the cards a page shows get it (:meth:`with_recent`)."""
        firing = firing or {}
        infos = {t.name: t for t in self.source.targets()}
        streams = self.source.streams()
        fresh = self._fresh_latest()
        out: list[Card] = []
        seen: set[str] = set()
        for target, model in streams:
            pace()  # a background thread's share of the interpreter (app.pacing), if paced
            info = infos.get(target)
            if info is None and self.source.live:
                continue  # a stream of a target no longer configured
            seen.add(target)
            cur = fresh.get((target, model)) or self.current(target, model, compare=False)
            if cur is not None and judged is not None:
                judged.append(cur)
            out.append(
                Card(
                    target=target,
                    model_name=model,
                    up=info.up if info else True,
                    error=target_error(info),
                    point=None if cur is None else point_of(cur[0], cur[1]),
                    diagnosis=None if cur is None else cur[1],
                    firing=tuple(firing.get((target, model), []) + firing.get((target, ""), [])),
                )
            )
        for name, info in infos.items():
            if name not in seen:
                out.append(Card(name, "", info.up, target_error(info), None, None))
        out.sort(key=card_rank)
        return out

    def viewed(self, within_s: float) -> list[tuple[str, str]]:
        """The streams viewed in the last ``within_s`` seconds, most recent first."""
        oldest = time.monotonic() - within_s
        with self._lock:
            return [k for k, at in reversed(self._viewed.items()) if at >= oldest]

    def _fresh_latest(self) -> dict[tuple[str, str], tuple[Window, Diagnosis]]:
        """The evaluation round's latest windows that are at most ``FRESH_STEPS`` steps
        behind the UI's latest window end (none outside the service)."""
        if self.latest is None:
            return {}
        end = self.aligned_end(self.now())
        fresh = fresh_rounds(self.latest(), end, self.step, self.length)
        if not fresh and self.wait_latest is not None and self.wait_latest(FIRST_ROUND_WAIT_S):
            fresh = fresh_rounds(self.latest(), end, self.step, self.length)
        return fresh

    def with_recent(self, cards: Sequence[Card]) -> list[Card]:
        """``cards`` with the class strip of their last ``RECENT_S`` seconds: the rounds'
        classes where they cover it (inside the service, once it has run that long),
        else windowed and diagnosed from the store."""
        end = self.aligned_end(self.now())
        return [
            c if not c.model_name else replace(c, recent=self._recent(c.target, c.model_name, end))
            for c in cards
        ]

    def _recent(self, target: str, model: str, end: float) -> tuple[Point, ...]:
        judged = self.recent_of(target, model) if self.recent_of is not None else ()
        if judged and judged[0][0] <= end - RECENT_S + FRESH_STEPS * self.step:
            return on_grid(judged, end - RECENT_S, end, self.step)
        return tuple(self.timeline(target, model, end - RECENT_S, end).points)
