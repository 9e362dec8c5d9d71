"""The hints' predicted effects, from the what-if twin (``app.evaluate.effects`` says what
they are for; ``app.diagnose.effects`` what a prediction means).

:func:`stream_effects` prices a stream's hint settings on its twin (``app.read.twincache``:
fitted on the last 15 minutes, shared with the headroom answers), each setting's result
cached per stream, settings and 5-minute bucket. It computes on demand: the target page
and the incident exports call it.

:class:`TwinEffects` is the service's :class:`~app.evaluate.effects.EffectSource`: an
evaluation round only reads what is cached and queues the rest; :meth:`TwinEffects.work`,
a scheduled job of its own, prices the queue under a CPU budget (``cpu_share`` of one
core on average: a twin costs seconds of CPU, and at 1,000 targets the scrape rounds
come first). A stream queued twice is priced once. The job cannot price every problem
stream of a large fleet every 5 minutes (a twin is 0.5–2 s of CPU: 1,000 streams would
need several cores), so it prices the worst first: the stream whose TTFT or ITL p99 is
furthest over its SLO (:func:`urgency` — the streams an on-call engineer is paged for),
the newest among equals; past twice :data:`MAX_QUEUED` streams the queue is cut back to
the :data:`MAX_QUEUED` most urgent. Pricing a stream also prepares its headroom
(``app.read.headroom``, the same twin), so the target page never waits on a fit.

An effect is said from the window it is shown beside: the twin's ratio applied to that
window's p99s (:func:`rebased`), or — where that window's queue grows — in the
incident's terms read at its end (``app.read.backlog``), with only an engine setting's
capacity left to the job.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from app.diagnose import Diagnosis
from app.diagnose.config import DiagnosisConfig
from app.diagnose.effects import Effect, Figure
from app.evaluate.effects import attach, settings_of
from app.model import Window
from app.pacing import Pacer, Stopped, paced
from app.read.backlog import (
    backlog_effect,
    growing,
    known_capacity,
    priced_capacity,
)
from app.read.headroom import stream_headroom
from app.read.twincache import Intervals, TwinCache, bucket_end, fitted
from app.twin.whatif import Calibration, ChangeError, knobs_for, predict_from

Setting = tuple[str, float]
MAX_QUEUED = 256
MAX_ROOMS = 16384
DEFAULT_CPU_SHARE = 0.02
# While it prices a stream, the job takes at most this share of the interpreter: a twin is
# seconds of CPU in one go, and a thread that runs that long slows every scrape round
# (``app.pacing``); ``cpu_share`` bounds its average.
PRICING_SHARE = 0.25
# What a pricing is taken to cost before one has been timed (CPU seconds): a twin's fit
# and replays, 0.5–2 s (module docstring).
FIRST_GUESS_S = 1.5


def effect_of(cal: Calibration, setting: Setting, slo_ttft: float, slo_itl: float) -> Effect:
    """The twin's prediction of one setting: today's p99 (measured), today's × the twin's
    effect (its prediction ÷ its own replay, so the replay's bias divides out) and the
    interval moved alike."""
    key, value = setting
    change = f"{key}={value:g}"
    try:
        knobs, _ = knobs_for(cal.twin, {key: value})
        w = predict_from(cal, {key: value}, knobs)
    except (ChangeError, ValueError) as exc:
        return Effect(change, None, None, error=str(exc))

    def figure(name: str, slo: float) -> Figure | None:
        base, pred, k = w.baseline.value(name), w.predicted.value(name), w.effect.get(name)
        if base is None or pred is None or k is None or pred <= 0:
            return None
        shown = base * k
        lo, hi = w.interval.get(name) or (pred, pred)
        return Figure(base, shown, lo * shown / pred, hi * shown / pred, slo)

    return Effect(change, figure("ttft_p99", slo_ttft), figure("itl_p99", slo_itl), w.replay_error)


def stream_effects(
    intervals: Intervals,
    target: str,
    model: str,
    settings: Sequence[Setting],
    *,
    now: float,
    config: DiagnosisConfig,
    cache: TwinCache | None = None,
    info: Mapping[str, str] | None = None,
    shown: Window | None = None,
) -> dict[Setting, Effect]:
    """Each setting's effect on the stream's twin over its last 15 minutes (computed now
    where not cached). With ``shown``, the window on the page: from its p99s, or — where
    its queue grows — in the incident's terms (``app.read.backlog``)."""
    if not settings:
        return {}
    if shown is not None:
        inc = growing(intervals, shown, config)
        if inc is not None:
            return {
                s: backlog_effect(
                    inc,
                    s,
                    priced_capacity(
                        intervals, target, model, s, now=now, config=config, cache=cache, info=info
                    ),
                )
                for s in settings
            }
        steady = stream_effects(
            intervals, target, model, settings, now=now, config=config, cache=cache, info=info
        )
        return rebased(steady, shown)
    slo = config.slo_for(target, model)
    f = fitted(intervals, target, model, now=now, config=config, cache=cache, info=dict(info or {}))
    out: dict[Setting, Effect] = {}
    for s in settings:
        cal = f.calibration

        def make(cal: Calibration | None = cal, s: Setting = s) -> Effect:
            if cal is None:
                return Effect(f"{s[0]}={s[1]:g}", None, None, error=f.error or "no twin")
            return effect_of(cal, s, slo.ttft_p99, slo.itl_p99)

        key = _key(config, target, model, now, s)
        out[s] = cache.get(key, make) if cache is not None else make()
    return out


def rebased(effects: Mapping[Setting, Effect], shown: Window) -> dict[Setting, Effect]:
    """Each effect from the p99s ``shown`` (``Effect.rebased``)."""
    ttft, itl = _p99(shown, "ttft"), _p99(shown, "itl")
    return {s: e.rebased(ttft, itl) for s, e in effects.items()}


def _p99(w: Window, signal: str) -> float | None:
    q = w.quantiles.get(signal, {}).get("p99")
    return None if q is None else q.value


def _key(
    config: DiagnosisConfig, target: str, model: str, now: float, s: Setting
) -> tuple[object, ...]:
    slo = config.slo_for(target, model)
    server = repr(config.server_for(target))
    return ("effect", target, model, bucket_end(now), server, slo.ttft_p99, slo.itl_p99, s)


def urgency(window: Window, config: DiagnosisConfig) -> float:
    """How far the window's worst p99 is over its SLO, as a multiple of it (TTFT p99 39 s
    under a 2 s SLO: 19.5); 0 where neither p99 is known."""
    slo = config.slo_for(window.target, window.model_name)
    worst = 0.0
    for signal, limit in (("ttft", slo.ttft_p99), ("itl", slo.itl_p99)):
        q = window.quantiles.get(signal, {}).get("p99")
        if q is not None and q.value is not None and limit > 0:
            worst = max(worst, q.value / limit)
    return worst


@dataclass(frozen=True, slots=True)
class _Asked:
    end: float
    settings: tuple[Setting, ...]
    info: Mapping[str, str]
    urgency: float = 0.0
    growing: bool = False


class TwinEffects:
    """The service's effect source (module docstring)."""

    def __init__(
        self,
        intervals: Intervals,
        config: DiagnosisConfig,
        cache: TwinCache,
        *,
        cpu_share: float = DEFAULT_CPU_SHARE,
        clock: Callable[[], float] = time.monotonic,
        cpu: Callable[[], float] = time.thread_time,
        pricing_share: float | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        if not 0 < cpu_share <= 1:
            raise ValueError(f"cpu_share must be in (0, 1], got {cpu_share}")
        # While pricing: PRICING_SHARE, or more where the average allows more.
        self.pricing_share = pricing_share or max(PRICING_SHARE, cpu_share)
        self.intervals = intervals
        self.config = config
        self.cache = cache
        self.cpu_share = cpu_share
        self._clock = clock
        self._cpu = cpu
        self._since = clock()
        self.spent_s = 0.0
        self.priced = 0
        self.failed = 0  # priced streams whose twin could say nothing (every effect an error)
        self._queue: OrderedDict[tuple[str, str], _Asked] = OrderedDict()
        # Streams whose headroom is prepared for a bucket (app.read.headroom's cache).
        self._rooms: set[tuple[str, str, float]] = set()
        self._lock = threading.Lock()
        # Set when its owner shuts down: a pricing in progress ends at its next step.
        self.stop = stop

    def effects(self, window: Window, settings: Sequence[Setting]) -> Mapping[Setting, Effect]:
        target, model = window.target, window.model_name
        inc = growing(self.intervals, window, self.config)
        found: dict[Setting, Effect] = {}
        if inc is not None:  # the queue grows: the incident's terms, from the state now
            for s in settings:
                cap = known_capacity(self.cache, self.config, window, s)
                if cap is not None:
                    found[s] = backlog_effect(inc, s, cap)
        else:
            cached = cached_effects(self.cache, self.config, target, model, window.end, settings)
            found = rebased(cached, window)
        missing = [s for s in settings if s not in found]
        room = (target, model, bucket_end(window.end))
        if missing or room not in self._rooms:
            asked = _Asked(
                window.end,
                tuple(settings),
                dict(window.info or {}),
                urgency(window, self.config),
                inc is not None,
            )
            with self._lock:
                self._queue.pop((target, model), None)
                self._queue[(target, model)] = asked
                if len(self._queue) > 2 * MAX_QUEUED:  # trimmed in batches: O(log n) a stream
                    self._trim()
        return found

    def _trim(self) -> None:
        """Keep the :data:`MAX_QUEUED` most urgent (the newest among equals), in order."""
        ranked = sorted(enumerate(self._queue.items()), key=lambda e: (e[1][1].urgency, e[0]))
        keep = {key for _, (key, _) in ranked[-MAX_QUEUED:]}
        for key in [k for k in self._queue if k not in keep]:
            del self._queue[key]

    def _next(self) -> tuple[tuple[str, str], _Asked] | None:
        """Take the most urgent queued stream (the newest among equals)."""
        if not self._queue:
            return None
        best: tuple[str, str] | None = None
        top = -1.0
        for key, asked in self._queue.items():  # later entries win ties
            if asked.urgency >= top:
                best, top = key, asked.urgency
        assert best is not None
        return best, self._queue.pop(best)

    @property
    def queued(self) -> int:
        with self._lock:
            return len(self._queue)

    def due_in(self, target: str, model: str) -> tuple[float, int] | None:
        """About how many seconds until the queued stream is priced, and how many streams
        are priced before it (None: not queued): the budget's debt, then the streams
        more urgent than it and itself, each at the mean CPU a pricing has cost so far
        (:data:`FIRST_GUESS_S` before any), paid at ``cpu_share``. An estimate: a stream
        more urgent may be queued meanwhile."""
        with self._lock:
            asked = self._queue.get((target, model))
            if asked is None:
                return None
            ahead = sum(1 for a in self._queue.values() if a.urgency > asked.urgency)
        mean = self.spent_s / self.priced if self.priced else FIRST_GUESS_S
        debt = max(0.0, self.spent_s - self.cpu_share * (self._clock() - self._since))
        return (debt + (ahead + 1) * mean) / self.cpu_share, ahead

    def within_budget(self) -> bool:
        return self.spent_s <= self.cpu_share * (self._clock() - self._since)

    def work(self) -> int:
        """Price queued streams, the most urgent first, while the CPU budget allows; the
        number priced."""
        done = 0
        while self.within_budget():
            with self._lock:
                picked = self._next()
            if picked is None:
                break
            (target, model), asked = picked
            t0 = self._cpu()
            try:
                with paced(Pacer(self.pricing_share, stop=self.stop)):
                    failed = self._price(target, model, asked)
            except Stopped:
                break  # its owner stops (the store closes): nothing more is priced
            self.spent_s += self._cpu() - t0
            self.priced += 1
            self.failed += failed
            done += 1
        return done

    def _price(self, target: str, model: str, asked: _Asked) -> bool:
        """Price one queued stream, and prepare its headroom; whether the twin could say
        nothing."""
        stream_headroom(
            self.intervals,
            target,
            model,
            now=asked.end,
            config=self.config,
            cache=self.cache,
            info=asked.info or None,
        )
        with self._lock:
            if len(self._rooms) >= MAX_ROOMS:
                self._rooms.clear()
            self._rooms.add((target, model, bucket_end(asked.end)))
        if asked.growing:  # the engine settings' capacity (the traffic's need no twin)
            caps = [
                priced_capacity(self.intervals, target, model, s, now=asked.end,
                                config=self.config, cache=self.cache, info=asked.info)
                for s in asked.settings
            ]  # fmt: skip
            return bool(caps) and all(isinstance(c, str) for c in caps)
        found = stream_effects(
            self.intervals,
            target,
            model,
            asked.settings,
            now=asked.end,
            config=self.config,
            cache=self.cache,
            info=asked.info,
        )
        return bool(found) and all(e.error is not None for e in found.values())


def cached_effects(
    cache: TwinCache,
    config: DiagnosisConfig,
    target: str,
    model: str,
    end: float,
    settings: Sequence[Setting],
) -> dict[Setting, Effect]:
    """The effects already priced for a stream's window ending at ``end`` (no twin run)."""
    out: dict[Setting, Effect] = {}
    for s in settings:
        hit = cache.peek(_key(config, target, model, end, s))
        if isinstance(hit, Effect):
            out[s] = hit
    return out


def priced(
    d: Diagnosis,
    intervals: Intervals,
    *,
    config: DiagnosisConfig,
    cache: TwinCache | None = None,
    info: Mapping[str, str] | None = None,
    now: float | None = None,
    compute: bool = True,
    window: Window | None = None,
) -> Diagnosis:
    """``d`` with its hints' effects on the twin of the 15 minutes before ``now`` (default
    ``d.end``): computed where ``compute``, else only those already cached. With
    ``window`` (the diagnosed one), from its p99s or in the incident's terms."""
    settings = settings_of(d)
    if not settings:
        return d
    at = d.end if now is None else now
    if not compute:
        if cache is None:
            return d
        inc = None if window is None else growing(intervals, window, config)
        if inc is not None and window is not None:  # the incident's terms, no twin run
            known = {s: known_capacity(cache, config, window, s) for s in settings}
            return attach(
                d, {s: backlog_effect(inc, s, c) for s, c in known.items() if c is not None}
            )
        cached = cached_effects(cache, config, d.target, d.model_name, at, settings)
        return attach(d, cached if window is None else rebased(cached, window))
    found = stream_effects(
        intervals,
        d.target,
        d.model_name,
        settings,
        now=at,
        config=config,
        cache=cache,
        info=info,
        shown=window,
    )
    return attach(d, found)
