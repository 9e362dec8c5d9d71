"""The UI's read side: windows → diagnoses → chart points, for any :class:`WindowSource`.

Diagnoses are computed here from the windows with :func:`app.diagnose.diagnose` — the
same pure function the evaluation job runs — rather than read from the ``diagnoses``
table. That is one code path for the live store, a recording and a Prometheus range,
and it works for any window length or step the page asks for. Points of windows that
can no longer change (older than the source's ``settled`` delay) are cached per
instance, so a live page refreshing every few seconds only computes its newest windows.

**What changed.** A problem window's diagnosis (the target page's and the incident's
card) carries its changes against the stream's healthy baseline, found the way replay
finds it (``app.evaluate.baseline``): the classes of this stream's own timeline over the
last :data:`RUN_SEARCH_S` seconds say where the run began and which windows of the hour
before were healthy; their data come from the source. One baseline per run, kept.

**Resolution.** A range is cut into at most ``budget`` windows: the step is the
configured one (15 s) or the next coarser of :data:`STEPS` that fits, and the window
length is the configured one (60 s) or the step when that is longer (so windows tile
the range and every observation lands in some window). A day at the defaults is 1,440
windows of 60 s; spikes shorter than the window are still inside one window's p99.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from app.diagnose import Diagnosis, DiagnosisClass, DiagnosisConfig, diagnose
from app.diagnose.changes import COMPARED, Baseline, with_changes
from app.diagnose.classify import with_baseline
from app.evaluate.baseline import Segment, assemble, healthy_spans, run_state
from app.model import Quantile, Window
from app.read.windows import grid_runs
from app.ui import palette
from app.ui.source import Observed, TargetInfo, WindowSource
from app.windows.probefacts import is_probe_window

STEPS: tuple[float, ...] = (15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)
DEFAULT_BUDGET = 2000
_CACHE_CAP = 200_000
# Cached points older than this before the newest one of their stream are dropped: the
# pages look back at most a day by preset (a custom range further back is recomputed).
_CACHE_KEEP_S = 2 * 86400.0
# How far back a problem window's run is followed to where it began (and the healthy
# hour before it): a run longer than two hours has no baseline on the page.
RUN_SEARCH_S = 3 * 3600.0
_BASELINES_CAP = 1000

# The overview's class strip: each card's last 15 minutes.
RECENT_S = 900.0
# The evaluation round's latest windows serve the overview up to this many steps old.
FRESH_STEPS = 2
# Streams remembered as viewed (the warmer keeps the most recent of them computed).
VIEWED_KEPT = 256
# Rounds further apart than this leave gaps in a strip built from them.
MAX_ROUND_SPACING_S = 120.0


@dataclass(frozen=True, slots=True)
class Point:
    """One window as the charts draw it (window end ``end``, Unix seconds)."""

    end: float
    cls: str
    sub_cause: str | None
    ttft_p50: float | None
    ttft_p50_ge: bool
    ttft_p99: float | None
    ttft_p99_ge: bool
    itl_p50: float | None
    itl_p50_ge: bool
    itl_p99: float | None
    itl_p99_ge: bool
    running_avg: float | None
    waiting_avg: float | None
    waiting_max: float | None
    kv_max: float | None
    preemptions: float | None
    requests: float
    # The diagnosis' judgement of each SLO (``app.diagnose.slo.verdict``): the markers.
    ttft_slo: str | None = None
    itl_slo: str | None = None


@dataclass(frozen=True, slots=True)
class Timeline:
    """A stream's points over ``(start, end]`` at one resolution, with its SLOs."""

    target: str
    model_name: str
    start: float
    end: float
    length: float
    step: float
    points: tuple[Point, ...]
    slo_ttft_p99: float
    slo_itl_p99: float


@dataclass(frozen=True, slots=True)
class Card:
    """One stream on the overview."""

    target: str
    model_name: str
    up: bool
    error: str | None
    point: Point | None
    diagnosis: Diagnosis | None
    recent: tuple[Point, ...] = ()
    firing: tuple[str, ...] = field(default_factory=tuple)

    @property
    def cls(self) -> str:
        no_data = DiagnosisClass.INSUFFICIENT_DATA
        return no_data.value if self.diagnosis is None else self.diagnosis.cls.value


def _q(w: Window, signal: str, p: str) -> Quantile:
    return w.quantiles.get(signal, {}).get(p) or Quantile(None)


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def point_of(w: Window, d: Diagnosis) -> Point:
    """The chart point of a window and its diagnosis (a probe's: the client's TTFT and
    token gaps, ``app.windows.probefacts``)."""
    ttft, itl = ("probe_ttft", "probe_itl") if is_probe_window(w) else ("ttft", "itl")
    t50, t99 = _q(w, ttft, "p50"), _q(w, ttft, "p99")
    i50, i99 = _q(w, itl, "p50"), _q(w, itl, "p99")
    running = w.gauges.get("running")
    waiting = w.gauges.get("waiting")
    kv = w.gauges.get("kv_usage")
    return Point(
        end=w.end,
        cls=str(d.cls),
        sub_cause=None if d.sub_cause is None else str(d.sub_cause),
        ttft_p50=_finite(t50.value),
        ttft_p50_ge=t50.ge_top_bucket,
        ttft_p99=_finite(t99.value),
        ttft_p99_ge=t99.ge_top_bucket,
        itl_p50=_finite(i50.value),
        itl_p50_ge=i50.ge_top_bucket,
        itl_p99=_finite(i99.value),
        itl_p99_ge=i99.ge_top_bucket,
        running_avg=None if running is None else running.avg,
        waiting_avg=None if waiting is None else waiting.avg,
        waiting_max=None if waiting is None else waiting.max,
        kv_max=None if kv is None else kv.max,
        preemptions=w.increases.get("preemptions"),
        requests=w.observations.get(ttft, 0.0),
        ttft_slo=d.ttft_slo,
        itl_slo=d.itl_slo,
    )


def resolution(
    start: float, end: float, *, length: float, step: float, budget: int = DEFAULT_BUDGET
) -> tuple[float, float]:
    """(window length, step) for a range: at most ``budget`` windows, tiling the range.

    Past the coarsest of :data:`STEPS` the step is the next multiple of it that fits: a
    custom range of centuries is still ``budget`` windows, not millions.
    """
    span = max(end - start, step)
    chosen = step
    for s in (step, *(x for x in STEPS if x > step)):
        chosen = s
        if span / s <= budget:
            break
    if span / chosen > budget:
        chosen *= math.ceil(span / chosen / budget)
    return math.ceil(length / chosen - 1e-9) * chosen, chosen


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
        self._cache: dict[tuple[str, str, float, float], dict[float, Point | None]] = {}
        self._cached = 0
        self._lock = threading.Lock()
        # One computation per (stream, resolution) at a time: a live refresh that arrives
        # while a cold day is being computed waits for it and then reads the cache.
        self._key_locks: dict[tuple[str, str, float, float], threading.Lock] = {}
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
        # The healthy baseline of each run seen: (target, model, length, run start).
        self._baselines: dict[tuple[str, str, float, float], Baseline] = {}

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
        return diagnose(
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

    def _points_locked(
        self, key: tuple[str, str, float, float], first: float, last: float
    ) -> list[Point]:
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
        keep = {e: p for e, p in fresh.items() if e <= settled_until}
        if keep:
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
        out = []
        for e in ends:
            p = cached[e] if e in cached else fresh.get(e)
            if p is not None:
                out.append(p)
        return out

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
        return got[0], self._compared(target, model, *got)

    def current(
        self, target: str, model: str, *, compare: bool = True
    ) -> tuple[Window, Diagnosis] | None:
        """The latest complete window of a stream."""
        return self.diagnosis_at(target, model, self.aligned_end(self.now()), compare=compare)

    def _compared(self, target: str, model: str, w: Window, d: Diagnosis) -> Diagnosis:
        """``d`` with what changed against the healthy hour before its run began."""
        tl = self.timeline(target, model, w.end - RUN_SEARCH_S, w.end)
        run_start: float | None = None
        for p in tl.points:
            if p.end < w.end:
                run_start = run_state(p.cls, run_start, p.end)
        run_start = run_state(str(d.cls), run_start, w.end)
        if run_start is None:  # pragma: no cover - a compared class always runs
            return d
        key = (target, model, tl.length, run_start)
        with self._lock:
            baseline = self._baselines.get(key)
        if baseline is None:
            segments = [
                Segment(p.end - tl.length, p.end, p.cls) for p in tl.points if p.end <= run_start
            ]
            segments.append(Segment(run_start - tl.length, run_start, str(d.cls)))

            def window_of(a: float, b: float) -> Window | None:
                obs = self.source.observe(
                    target, model, first_end=b, end=b, length=b - a, step=b - a
                )
                return obs[0].window if obs else None

            baseline = assemble(healthy_spans(segments, run_start), run_start, window_of)
            with self._lock:
                if len(self._baselines) >= _BASELINES_CAP:
                    self._baselines.clear()
                self._baselines[key] = baseline
        d = with_baseline(d, w, baseline.derived, self.config)
        return with_changes(d, w, baseline)

    # -- overview ---------------------------------------------------------------------------
    def cards(self, firing: dict[tuple[str, str], list[str]] | None = None) -> list[Card]:
        """One card per stream (a down target without streams gets one), worst first:
        each stream's latest window and diagnosis, what the order needs. The class strip
        of the last 15 minutes (``recent``) is left out: it costs a window and a
        diagnosis per step, so only the cards a page shows get it (:meth:`with_recent`)."""
        firing = firing or {}
        infos = {t.name: t for t in self.source.targets()}
        streams = self.source.streams()
        fresh = self._fresh_latest()
        out: list[Card] = []
        seen: set[str] = set()
        for target, model in streams:
            info = infos.get(target)
            if info is None and self.source.live:
                continue  # a stream of a target no longer configured
            seen.add(target)
            cur = fresh.get((target, model)) or self.current(target, model, compare=False)
            out.append(
                Card(
                    target=target,
                    model_name=model,
                    up=info.up if info else True,
                    error=_error(info),
                    point=None if cur is None else point_of(cur[0], cur[1]),
                    diagnosis=None if cur is None else cur[1],
                    firing=tuple(firing.get((target, model), []) + firing.get((target, ""), [])),
                )
            )
        for name, info in infos.items():
            if name not in seen:
                out.append(Card(name, "", info.up, _error(info), None, None))
        out.sort(key=_card_rank)
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
            return _on_grid(judged, end - RECENT_S, end, self.step)
        return tuple(self.timeline(target, model, end - RECENT_S, end).points)


# How long the overview waits for the service's first round's windows (seconds; after a
# start with nothing kept, 1,000 streams' windows take a few) before windowing them itself.
FIRST_ROUND_WAIT_S = 10.0


def fresh_rounds(
    judged: Iterable[tuple[Window, Diagnosis]], latest_end: float, step: float, length: float
) -> dict[tuple[str, str], tuple[Window, Diagnosis]]:
    """Per stream, the round's window and diagnosis if it is at most ``FRESH_STEPS``
    steps behind ``latest_end`` (the UI's latest window end) and a whole ``length``
    long: what the overview shows instead of windowing the stream itself."""
    oldest = latest_end - FRESH_STEPS * step
    return {
        (w.target, w.model_name): (w, d)
        for w, d in judged
        if w.end >= oldest and w.end - w.start >= length - 1e-6
    }


def _on_grid(
    judged: Sequence[tuple[float, str, str | None]], start: float, end: float, step: float
) -> tuple[Point, ...]:
    """The rounds' classes on the UI's grid of window ends in ``(start, end]``: each end
    takes the latest round at or before it, if that round is not older than the rounds'
    usual spacing (a round missed is a gap in the strip, as a window without data is)."""
    ends = [e for e, _, _ in judged]
    gaps = sorted(b - a for a, b in zip(ends, ends[1:], strict=False))
    spacing = gaps[len(gaps) // 2] if gaps else step  # the rounds' usual cadence
    reach = max(step, min(spacing, MAX_ROUND_SPACING_S))
    out: list[Point] = []
    i = 0
    t = math.floor(start / step) * step + step
    while t <= end + 1e-9:
        while i + 1 < len(judged) and judged[i + 1][0] <= t:
            i += 1
        e, cls, sub = judged[i]
        if e <= t and t - e <= reach:
            out.append(_class_point(t, cls, sub))
        t += step
    return tuple(out)


def _class_point(end: float, cls: str, sub_cause: str | None) -> Point:
    """A strip's point: the window's end and its class, nothing else."""
    return Point(
        end=end,
        cls=cls,
        sub_cause=sub_cause,
        ttft_p50=None,
        ttft_p50_ge=False,
        ttft_p99=None,
        ttft_p99_ge=False,
        itl_p50=None,
        itl_p50_ge=False,
        itl_p99=None,
        itl_p99_ge=False,
        running_avg=None,
        waiting_avg=None,
        waiting_max=None,
        kv_max=None,
        preemptions=None,
        requests=0.0,
    )


def _error(info: TargetInfo | None) -> str | None:
    """Why the target is down, or what its last scrape left out (``card.up`` tells)."""
    if info is None or info.last_error is None:
        return None
    return f"{info.last_error_kind}: {info.last_error}"


def _card_rank(c: Card) -> tuple[int, int, int, float, str, str]:
    ratio = 0.0
    if c.point is not None and c.diagnosis is not None:
        for value, slo in (
            (c.point.ttft_p99, c.diagnosis.slo_ttft_p99),
            (c.point.itl_p99, c.diagnosis.slo_itl_p99),
        ):
            if value is not None and slo > 0:
                ratio = max(ratio, value / slo)
    return (-len(c.firing), int(c.up), -palette.severity(c.cls), -ratio, c.target, c.model_name)
