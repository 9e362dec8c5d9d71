"""A stream's healthy baseline: which windows, and their numbers, for "what changed".

A problem window is compared (``app.diagnose.changes``) with the windows of its stream
classed **healthy in the hour before the current run of problem windows began**, at
least ``MIN_HEALTHY_S`` of them — or, until the stream has that much (its first
incident), at least ``MIN_SHORT_S``: a short baseline, labelled so. The run is the
problem windows back to the last healthy or idle one (an ``insufficient_data`` window
in between does not end it: a failed scrape is no recovery); it began at the end of its
first problem window, so every window of one incident is compared with the same
baseline.

Which data counts as healthy: the spans of the healthy windows ending in the hour before
the run began, less every span a window of another class covered (overlapping windows
judge the same seconds: only the seconds every window judged healthy count), so a lone
healthy window amid problem windows adds nothing. Their numbers are those of one window
per contiguous span, merged (:func:`merge_derived`).

Where the classes and the data come from, per mode:

* **replay**, **review**, the **UI** (:class:`Timeline`): the timeline being judged, in
  time order — every window's class, and its deltas (a recording, a Prometheus range,
  the UI's source).
* **the service** (:class:`StoreBaselines`): the stored diagnosis rows (one per change
  of class, and a heartbeat) give the classes, ``Store.intervals`` the data; once per
  run of each stream, then kept until the stream is healthy again.
* **diagnose URL** (:func:`history_for_url`): a configured Prometheus source (the
  target's last hours, judged as a timeline) or store (as the service); else none, and
  the summary says so.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sqlite3
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from urllib.parse import urlsplit

from app.config import Settings
from app.diagnose import DEFAULT_CONFIG, Diagnosis, DiagnosisClass, DiagnosisConfig, diagnose
from app.diagnose.changes import (
    COMPARED,
    LOOKBACK_S,
    MIN_HEALTHY_S,
    MIN_SHORT_S,
    Baseline,
    with_changes,
)
from app.diagnose.classify import with_baseline
from app.diagnose.records import BaselineInfo
from app.model import Derived, IntervalDelta, Window
from app.sources.promapi import Matcher, parse_matchers, selector
from app.sources.prometheus import PrometheusSource, target_name
from app.store.diagnoses import HEARTBEAT_S, DiagnosisStore
from app.store.sqlite import Store, StoreError
from app.windows.aggregate import window, windows

__all__ = [
    "Compare",
    "Segment",
    "StoreBaselines",
    "Timeline",
    "assemble",
    "compared",
    "deltas_timeline",
    "healthy_spans",
    "history_for_url",
    "no_history",
    "merge_derived",
    "run_state",
]

WindowOf = Callable[[float, float], Window | None]
"""The window ``(start, end]`` of the stream (None: no data there)."""
Compare = Callable[[Window, Diagnosis], Diagnosis]
"""A diagnosis → the same with its changes against the stream's healthy baseline."""

_HEALTHY = DiagnosisClass.HEALTHY.value
_NO_DATA = DiagnosisClass.INSUFFICIENT_DATA.value
_PROBLEMS = COMPARED


@dataclass(frozen=True, slots=True)
class Segment:
    """Data ``(start, end]`` judged by windows of class ``cls``."""

    start: float
    end: float
    cls: str


def run_state(cls: str, run_start: float | None, end: float) -> float | None:
    """When the run of problem windows that a window of ``cls`` ending at ``end`` is in
    began (None: it is in none). A problem window continues a run or begins one; an
    ``insufficient_data`` window keeps the run going; any other class ends it."""
    if cls in _PROBLEMS:
        return end if run_start is None else run_start
    if cls == _NO_DATA:
        return run_start
    return None


def _union(spans: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(s for s in spans if s[1] > s[0]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _minus(
    spans: list[tuple[float, float]], holes: list[tuple[float, float]]
) -> list[tuple[float, float]]:
    out = []
    for a, b in spans:
        lo = a
        for ha, hb in holes:
            if hb <= lo or ha >= b:
                continue
            if ha > lo:
                out.append((lo, ha))
            lo = max(lo, hb)
            if lo >= b:
                break
        if lo < b:
            out.append((lo, b))
    return out


def healthy_spans(
    segments: Iterable[Segment], run_start: float, *, lookback: float = LOOKBACK_S
) -> list[tuple[float, float]]:
    """The data of the hour before ``run_start`` judged healthy by every window that saw
    it; sorted, disjoint."""
    segs = list(segments)
    lo = run_start - lookback
    good = _union((max(s.start, lo), min(s.end, run_start)) for s in segs if s.cls == _HEALTHY)
    bad = _union((s.start, s.end) for s in segs if s.cls != _HEALTHY)
    return _minus(good, bad)


# Which count weighs a derived number when windows are merged: a ratio of sums is the
# average of its windows' ratios weighted by their denominators.
_WEIGHTS: dict[str, Callable[[Window], float | None]] = {
    "prompt_tokens_mean": lambda w: w.observations.get("prompt_len"),
    "output_tokens_mean": lambda w: w.observations.get("gen_len"),
    "uncached_prompt_tokens_mean": lambda w: w.observations.get("ttft"),
    "prefix_cache_hit_rate": lambda w: w.increases.get("prefix_queries", w.covered),
    "external_prefix_cache_hit_rate": lambda w: w.increases.get("external_prefix_queries"),
    "spec_decode_acceptance": lambda w: w.increases.get("spec_draft_tokens"),
    # SGLang counts no drafts: its accept-length gauge is averaged over covered seconds.
    "spec_decode_accepted_per_draft": lambda w: w.increases.get("spec_drafts", w.covered),
    "tokens_per_step_mean": lambda w: w.observations.get("step_tokens"),
    "step_tokens_p99": lambda w: w.observations.get("step_tokens"),
}


def _covered(w: Window) -> float | None:
    return w.covered


def merge_derived(windows: Sequence[Window]) -> Derived:
    """One set of derived numbers for several windows (the spans of a baseline): rates
    and gauge averages weighted by covered seconds, means and ratios by their
    denominators (exact for those), ``step_tokens_p99`` by steps (an approximation),
    ``kv_usage_max`` the largest. A number no window has stays None."""
    values: dict[str, float | None] = {}
    for f in fields(Derived):
        name = f.name
        pairs = []
        for w in windows:
            v = getattr(w.derived, name)
            weight = _WEIGHTS.get(name, _covered)(w)
            if v is not None and math.isfinite(v) and weight is not None and weight > 0:
                pairs.append((v, weight))
        if not pairs:
            values[name] = None
        elif name == "kv_usage_max":
            values[name] = max(v for v, _ in pairs)
        else:
            total = math.fsum(wt for _, wt in pairs)
            values[name] = math.fsum(v * wt for v, wt in pairs) / total
    return Derived(**values)


def assemble(
    spans: Sequence[tuple[float, float]],
    run_start: float,
    window_of: WindowOf,
    *,
    min_healthy: float = MIN_HEALTHY_S,
    min_short: float = MIN_SHORT_S,
) -> Baseline:
    """The baseline of a run from its healthy spans: their numbers when they add up to
    ``min_healthy`` seconds, or — the stream's first incident — to ``min_short`` (a short
    baseline, ``BaselineInfo.short``: the healthy minutes just before the change); else
    none (the info says how much there was). The one rule of replay, the service,
    ``diagnose URL`` and the pages."""
    healthy = math.fsum(b - a for a, b in spans)
    info = BaselineInfo(
        run_start=run_start,
        healthy_s=round(healthy, 3),
        needed_s=min_healthy,
        start=spans[0][0] if spans else None,
        end=spans[-1][1] if spans else None,
        short_s=min_short,
    )
    if not info.enough:
        return Baseline(None, info)
    got = [w for a, b in spans if (w := window_of(a, b)) is not None and w.intervals > 0]
    if not got:
        return Baseline(None, info)
    return Baseline(merge_derived(got), info)


def compared(
    d: Diagnosis, w: Window, baseline: Baseline | None, config: DiagnosisConfig
) -> Diagnosis:
    """A problem window's diagnosis against its run's ``baseline``: its primary rule run
    again with the baseline's numbers (its sub-cause, evidence, summary and hints:
    ``with_baseline``), its changes ranked and the hints that address the headline
    change rebuilt under ``config``, the configuration the window was diagnosed with
    (``with_changes``). The one comparison step of replay (:class:`Timeline`), the
    service (:class:`StoreBaselines`) and the pages (``app.read.compare``)."""
    derived = None if baseline is None else baseline.derived
    d = with_baseline(d, w, derived, config)
    return with_changes(d, w, baseline, config=config)


class Timeline:
    """One stream judged window by window, oldest first (replay, review, the UI): keeps
    the classes of the last hour and the baseline of the current run.

    :meth:`judge` takes each window with its diagnosis and returns the diagnosis with
    its changes (a problem window) or as it was. ``window_of`` gives the stream's data
    for a baseline span; ``config`` is the one the windows were diagnosed with (their
    sub-causes and hints are decided again under it).
    """

    def __init__(
        self,
        window_of: WindowOf,
        *,
        lookback: float = LOOKBACK_S,
        min_healthy: float = MIN_HEALTHY_S,
        config: DiagnosisConfig = DEFAULT_CONFIG,
    ) -> None:
        self.window_of = window_of
        self.config = config
        self.lookback = lookback
        self.min_healthy = min_healthy
        self.segments: deque[Segment] = deque()
        self.run_start: float | None = None
        self.baseline: Baseline | None = None

    def note(self, start: float, end: float, cls: str) -> None:
        """A judged window whose diagnosis is not needed back (history before a range)."""
        self._advance(start, end, cls)

    def _advance(self, start: float, end: float, cls: str) -> bool:
        """Record a window; True when it begins a run (its baseline is due)."""
        before = self.run_start
        self.run_start = run_state(cls, self.run_start, end)
        if self.run_start is None:
            self.baseline = None
        began = self.run_start is not None and before is None
        self.segments.append(Segment(start, end, cls))
        horizon = end - self.lookback - 2 * (end - start)
        while self.segments and self.segments[0].end < horizon:
            self.segments.popleft()
        return began

    def judge(self, w: Window, d: Diagnosis) -> Diagnosis:
        cls = str(d.cls)
        if self._advance(w.start, w.end, cls) or (
            self.run_start is not None and self.baseline is None
        ):
            assert self.run_start is not None
            spans = healthy_spans(self.segments, self.run_start, lookback=self.lookback)
            self.baseline = assemble(
                spans, self.run_start, self.window_of, min_healthy=self.min_healthy
            )
        if cls not in _PROBLEMS:
            return d
        return compared(d, w, self.baseline, self.config)


class StoreBaselines:
    """The service's baselines, over the store: the classes from the stored diagnosis
    rows, the data from the stored deltas. Asked once per stream and round
    (:meth:`judge`); a run's baseline is assembled when the run is first seen (its first
    window, or the first round after a restart, walking the rows back to where it began)
    and kept until the stream is healthy or idle again."""

    # How far back the rows are walked to find where a run began after a restart.
    RUN_SEARCH_S = 6 * 3600.0

    def __init__(
        self,
        store: Store,
        *,
        length: float,
        lookback: float = LOOKBACK_S,
        min_healthy: float = MIN_HEALTHY_S,
        config: DiagnosisConfig = DEFAULT_CONFIG,
    ) -> None:
        self.store = store
        # The configuration the windows are diagnosed with (sub-causes and hints again).
        self.config = config
        self.rows = DiagnosisStore(store)
        self.length = length
        self.lookback = lookback
        self.min_healthy = min_healthy
        # (target, model) -> (run start, its baseline)
        self.runs: dict[tuple[str, str], tuple[float, Baseline]] = {}

    def _segments(self, target: str, model: str, start: float, end: float) -> list[Segment]:
        """The stored rows as data segments: a row's class holds for the windows ending
        from it to the next row (a heartbeat at least every ``HEARTBEAT_S`` while the
        service ran; after a longer gap, for a heartbeat's time)."""
        rows = self.rows.classes(target, model, start, end)
        out = []
        for i, (row_end, cls) in enumerate(rows):
            nxt = rows[i + 1][0] if i + 1 < len(rows) else end
            until = min(nxt, row_end + HEARTBEAT_S + self.length)
            out.append(Segment(row_end - self.length, until, cls))
        return out

    def _run_start(self, target: str, model: str, end: float) -> float:
        """Where the run the stream's current (problem) window is in began: at this
        window, unless the stored rows just before it are of the same run."""
        rows = self.rows.classes(target, model, end - self.RUN_SEARCH_S, end)
        start = end
        later = end
        for row_end, cls in reversed(rows):
            if row_end >= end:
                continue
            if later - row_end > HEARTBEAT_S + 2 * self.length:
                break  # a gap in the rows: the service was not judging the stream
            if cls in _PROBLEMS:
                start = row_end
            elif cls != _NO_DATA:
                break
            later = row_end
        return start

    def judge(self, w: Window, d: Diagnosis) -> Diagnosis:
        key = (w.target, w.model_name)
        cls = str(d.cls)
        if cls not in _PROBLEMS:
            if cls != _NO_DATA:
                self.runs.pop(key, None)
            return d
        run = self.runs.get(key)
        if run is None:
            try:
                run = self.runs[key] = self._assemble(w, cls)
            except sqlite3.Error as exc:
                # The baseline is a bonus: the round goes on, the next one tries again.
                return with_changes(
                    d, w, None, no_history=f"the stored history could not be read ({exc})"
                )
        return compared(d, w, run[1], self.config)

    def _assemble(self, w: Window, cls: str) -> tuple[float, Baseline]:
        """The run the stream's window is in, and its baseline (store reads)."""
        run_start = self._run_start(w.target, w.model_name, w.end)
        lo = run_start - self.lookback - self.length - HEARTBEAT_S
        segments = self._segments(w.target, w.model_name, lo, run_start)
        segments.append(Segment(run_start - self.length, run_start, cls))
        spans = healthy_spans(segments, run_start, lookback=self.lookback)

        def window_of(a: float, b: float) -> Window:
            deltas = self.store.intervals(w.target, w.model_name, a, b)
            return window(deltas, start=a, end=b, target=w.target, model_name=w.model_name)

        return run_start, assemble(spans, run_start, window_of, min_healthy=self.min_healthy)

    def forget(self, keep: Iterable[tuple[str, str]]) -> None:
        """Drop the runs of streams no longer judged."""
        alive = set(keep)
        for key in [k for k in self.runs if k not in alive]:
            del self.runs[key]


def deltas_timeline(
    deltas: Sequence[IntervalDelta],
    target: str,
    model: str,
    config: DiagnosisConfig = DEFAULT_CONFIG,
) -> Timeline:
    """A stream's :class:`Timeline` whose baseline data come from ``deltas``; ``config``:
    the one its windows are diagnosed with."""

    def window_of(a: float, b: float) -> Window:
        return window(deltas, start=a, end=b, target=target, model_name=model)

    return Timeline(window_of, config=config)


# How much of a stream's past ``diagnose URL`` reads from Prometheus: the hour of the
# baseline, and up to an hour of a run already going on.
URL_HISTORY_S = 2 * LOOKBACK_S


def no_history(reason: str) -> Compare:
    """A compare that has no history of any stream: the summary says ``reason``."""

    def compare(w: Window, d: Diagnosis) -> Diagnosis:
        return with_changes(d, w, None, no_history=reason)

    return compare


async def _prometheus_history(
    settings: Settings,
    url: str,
    *,
    before: float,
    length: float,
    step: float,
    config: DiagnosisConfig,
) -> Compare:
    source = settings.source
    target = target_name(urlsplit(url).netloc or url)
    matchers = [
        *parse_matchers(source.selector),
        Matcher(source.target_label, "=", json.dumps(target)),
    ]
    prom = PrometheusSource(source.model_copy(update={"selector": selector(None, matchers)}))
    try:
        resolution = max(source.step or settings.scrape.interval, 1.0)
        history = await prom.read(
            before - URL_HISTORY_S - length - resolution, before, step=min(resolution, step)
        )
    finally:
        await prom.aclose()
    hist = history.get(target)
    if hist is None or not hist.deltas:
        return no_history(
            f"Prometheus has no history of {source.target_label}={target!r} to compare with"
        )
    timelines: dict[str, Timeline] = {}
    first_end = (math.floor((before - URL_HISTORY_S) / step) + 1) * step
    for model in hist.models():
        deltas = [d for d in hist.deltas if d.model_name == model]
        tl = timelines[model] = deltas_timeline(deltas, target, model, config)
        for w in windows(
            deltas,
            start=first_end - length,
            end=before,
            length=length,
            step=step,
            target=target,
            model_name=model,
        ):
            failed = sum(1 for t in hist.failed if w.start < t <= w.end)
            ok = sum(1 for t in hist.ok if w.start < t <= w.end)
            tl.note(
                w.start,
                w.end,
                str(diagnose(w, config, failed_scrapes=failed, attempted_scrapes=ok + failed).cls),
            )

    def compare(w: Window, d: Diagnosis) -> Diagnosis:
        tl = timelines.get(w.model_name)
        if tl is None:
            return with_changes(
                d,
                w,
                None,
                no_history=f"Prometheus has no history of model {w.model_name!r} on {target!r}",
            )
        return tl.judge(w, d)

    return compare


async def history_for_url(
    settings: Settings,
    url: str,
    *,
    before: float,
    length: float,
    step: float,
    config: DiagnosisConfig,
) -> Compare:
    """How ``diagnose URL`` finds a stream's healthy past: a Prometheus source
    (``source.kind: prometheus``: the target whose ``source.target_label`` is the URL's
    host:port), else the store of a phasewatch service (``storage.path``, when the file
    exists and one of ``targets`` has this URL); else none, and the summary says why.
    The observed window (ending after ``before``) is then judged as the latest of them."""
    if settings.source.kind == "prometheus" and settings.source.url:
        return await _prometheus_history(
            settings, url, before=before, length=length, step=step, config=config
        )
    path = settings.storage.path
    names = [t.name for t in settings.targets if t.url == url]
    if path != ":memory:" and Path(path).is_file() and names:
        try:
            store = Store(path)
        except StoreError as exc:
            return no_history(f"cannot read the store: {exc}")
        baselines = StoreBaselines(store, length=length, config=config)

        def compare(w: Window, d: Diagnosis) -> Diagnosis:
            # The stream as the service names it: the configured target with this URL.
            return baselines.judge(dataclasses.replace(w, target=names[0]), d)

        return compare
    return no_history(
        "diagnose watched the server only now; configure a phasewatch store (storage.path "
        "with a target of this URL) or a Prometheus source (--config) to compare with its "
        "healthy past"
    )
