"""The p99 spike finder of the incident review (pure).

A window is *hot* for a signal (TTFT or ITL p99) when its p99 is over the SLO — as the
diagnosis judged it on the histogram (``over``, or ``unproven``: said so in the reason;
a point without a judgement compares the value) — or over ``k`` × the **preceding
baseline**: the median p99 of the last ``baseline_windows``
windows that were not hot (so an ongoing spike never raises its own baseline; with no
such windows yet only the SLO counts). Hot windows of either signal that touch or
overlap — at most ``gap`` windows apart — form one spike, from the start of its first
window to the end of its last. A spike carries the peak of each signal (with the "≥"
flag of a lower bound), the dominant class (the most frequent problem class in it, the
most severe on a tie; the most frequent class when none is a problem) and the class
sequence.
"""

from __future__ import annotations

import statistics
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass

from app.diagnose.classes import PROBLEM_CLASSES, DiagnosisClass, severity
from app.read.points import Point, Timeline
from app.ui.figures import Run, band_runs

SIGNALS = ("ttft", "itl")


@dataclass(frozen=True, slots=True)
class Peak:
    signal: str
    value: float
    ge: bool
    at: float
    slo: float
    baseline: float | None
    reason: str  # "over SLO", "over SLO (unproven)" or "k× baseline"


@dataclass(frozen=True, slots=True)
class Spike:
    target: str
    model_name: str
    start: float
    end: float
    peaks: tuple[Peak, ...]
    dominant: str
    runs: tuple[Run, ...]

    @property
    def peak_at(self) -> float:
        return max(self.peaks, key=lambda p: p.value / p.slo).at


def _value(p: Point, signal: str) -> tuple[float | None, bool]:
    if signal == "ttft":
        return p.ttft_p99, p.ttft_p99_ge
    return p.itl_p99, p.itl_p99_ge


def _over(p: Point, signal: str, value: float, slo: float) -> str | None:
    """The reason a point is over its SLO (None: it is not): the diagnosis' judgement."""
    verdict = p.ttft_slo if signal == "ttft" else p.itl_slo
    if verdict is None:
        return "over SLO" if value > slo else None
    return {"over": "over SLO", "unproven": "over SLO (unproven)"}.get(verdict)


def hot_windows(
    points: Sequence[Point],
    signal: str,
    slo: float,
    *,
    k: float,
    baseline_windows: int,
) -> dict[int, tuple[float | None, str]]:
    """Index → (baseline, reason) of the windows hot for one signal."""
    recent: deque[float] = deque(maxlen=baseline_windows)
    out: dict[int, tuple[float | None, str]] = {}
    for i, p in enumerate(points):
        value, _ = _value(p, signal)
        if value is None:
            continue
        base = statistics.median(recent) if recent else None
        over = _over(p, signal, value, slo)
        if over is not None:
            out[i] = (base, over)
        elif base is not None and base > 0 and value > k * base:
            out[i] = (base, f"{value / base:.1f}× baseline")
        else:
            recent.append(value)
    return out


def find_spikes(
    timeline: Timeline,
    *,
    k: float = 3.0,
    baseline_windows: int = 20,
    gap: int = 1,
) -> list[Spike]:
    """The spikes of one stream's timeline, oldest first."""
    points = timeline.points
    slos = {"ttft": timeline.slo_ttft_p99, "itl": timeline.slo_itl_p99}
    hot = {
        s: hot_windows(points, s, slos[s], k=k, baseline_windows=baseline_windows) for s in SIGNALS
    }
    indices = sorted(set(hot["ttft"]) | set(hot["itl"]))
    groups: list[list[int]] = []
    for i in indices:
        if groups and i - groups[-1][-1] <= gap + 1:
            groups[-1].append(i)
        else:
            groups.append([i])
    spikes = []
    for g in groups:
        inside = points[g[0] : g[-1] + 1]
        peaks = []
        for s in SIGNALS:
            mine = [i for i in g if i in hot[s]]
            if not mine:
                continue
            best = max(mine, key=lambda i: _value(points[i], s)[0] or 0.0)
            value, ge = _value(points[best], s)
            base, reason = hot[s][best]
            peaks.append(Peak(s, value or 0.0, ge, points[best].end, slos[s], base, reason))
        spikes.append(
            Spike(
                target=timeline.target,
                model_name=timeline.model_name,
                start=inside[0].end - timeline.length,
                end=inside[-1].end,
                peaks=tuple(peaks),
                dominant=dominant_class(inside),
                runs=tuple(band_runs(inside, timeline.step)),
            )
        )
    return spikes


def dominant_class(points: Sequence[Point]) -> str:
    """The most frequent problem class (most severe on a tie), else the most frequent."""
    counts = Counter(p.cls for p in points)
    problems = {c: n for c, n in counts.items() if c in PROBLEM_CLASSES}
    pool = problems or counts
    if not pool:
        return DiagnosisClass.INSUFFICIENT_DATA.value
    return max(pool, key=lambda c: (pool[c], severity(c)))
