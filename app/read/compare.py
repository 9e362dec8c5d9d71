"""What changed, for the pages: a problem window against its run's healthy baseline.

A problem window's diagnosis (the target page's and the incident's card) carries its
changes against the stream's healthy baseline, found the way replay finds it
(``app.evaluate.baseline``): the classes of this stream's own timeline over the last
:data:`RUN_SEARCH_S` seconds say where the run began and which windows of the hour
before were healthy; their data come from the source. One baseline per run, kept. The
diagnosis is then compared as the service's round compares it
(``app.evaluate.baseline.compared``, under the same configuration): the hints that
address the headline change are built again with the baseline's numbers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from app.diagnose.changes import Baseline
from app.diagnose.config import DiagnosisConfig
from app.diagnose.records import Diagnosis
from app.evaluate.baseline import Segment, assemble, compared, healthy_spans, run_state
from app.model import Window
from app.read.points import Timeline
from app.read.source import WindowSource

# How far back a problem window's run is followed to where it began (and the healthy
# hour before it): a run longer than two hours has no baseline on the page.
RUN_SEARCH_S = 3 * 3600.0
_BASELINES_CAP = 1000

TimelineOf = Callable[[str, str, float, float], Timeline]
"""A stream's timeline over ``(start, end]`` (target, model, start, end)."""


class RunBaselines:
    """The healthy baseline of each run the pages have shown, and the comparison."""

    def __init__(self, source: WindowSource, config: DiagnosisConfig) -> None:
        self.source = source
        self.config = config
        self._lock = threading.Lock()
        # The healthy baseline of each run seen: (target, model, length, run start).
        self._baselines: dict[tuple[str, str, float, float], Baseline] = {}

    def compare(self, w: Window, d: Diagnosis, timeline: TimelineOf) -> Diagnosis:
        """``d`` with what changed against the healthy hour before its run began;
        ``timeline`` gives the stream's classes (the page's points)."""
        target, model = w.target, w.model_name
        tl = timeline(target, model, w.end - RUN_SEARCH_S, w.end)
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
            baseline = self._assemble(tl, run_start, str(d.cls))
            with self._lock:
                if len(self._baselines) >= _BASELINES_CAP:
                    self._baselines.clear()
                self._baselines[key] = baseline
        return compared(d, w, baseline, self.config)

    def _assemble(self, tl: Timeline, run_start: float, cls: str) -> Baseline:
        """The baseline of the run beginning at ``run_start`` (source reads)."""
        segments = [
            Segment(p.end - tl.length, p.end, p.cls) for p in tl.points if p.end <= run_start
        ]
        segments.append(Segment(run_start - tl.length, run_start, cls))
        target, model = tl.target, tl.model_name

        def window_of(a: float, b: float) -> Window | None:
            obs = self.source.observe(target, model, first_end=b, end=b, length=b - a, step=b - a)
            return obs[0].window if obs else None

        return assemble(healthy_spans(segments, run_start), run_start, window_of)
