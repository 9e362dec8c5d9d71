"""The p99 spike finder of the incident review (pure).

A window is *hot* for a signal (TTFT or ITL p99) when its p99 is over the SLO — as the
diagnosis judged it on the histogram (``over``, or ``unproven``: said so in the reason;
a point without a judgement compares the value) — or over ``k`` × the **preceding
baseline**: the median p99 of the last ``baseline_windows``
windows that were not hot (so an ongoing spike never raises its own baseline; with no
such windows yet only the SLO counts). Hot windows of either signal that touch or
overlap — at most ``gap`` windows apart — form one spike. A spike carries the peak of
each signal (with the "≥" flag of a lower bound), the dominant class (the most frequent
problem class in it, the most severe on a tie; the most frequent class when none is a
problem) and the class sequence.

**Its times.** A window's p99 covers its last ``length`` seconds. A spike starts where
the window before its first hot one ends (its first seconds came after that calm
window; with no such window, at the first hot window's start) and is **resolved** where
the first window after it that is not hot starts (everything after was within; at least
a step after the start), which is its end — or, still hot where the data ends, its
last hot window's end (``resolved_at`` None). Its windows do not end on a last window
alone in a class other than the dominant one (the drain's tail judged otherwise for one
window is no phase of the incident).

**Its impact**: the minutes over the SLO (each run of consecutive windows judged over
it, read as the spike's times are) and the requests whose first token came later than
the TTFT SLO — each window's count over the SLO times step ÷ length, over the windows
that overlap the spike, since windows overlap by ``length / step`` (an estimate: exact
when the misses spread evenly; on the ``incident`` scenario it is the simulator's count).

**Where its diagnosis is read** (``cause_at``): the p99 peaks where the queue is
longest — after the surge, as it drains, whose diagnosis says "the queue drains". So a
spike whose dominant class saw its queue grow (arrivals above completions) is read at
the last such window up to the peak, the surge at its height; any other at its peak.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, replace

from app.diagnose.classes import PROBLEM_CLASSES, DiagnosisClass, severity
from app.diagnose.records import fmt_value
from app.read.points import Point, Timeline
from app.ui.figures import Run, band_runs, utc

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
    resolved_at: float | None = None  # None: still hot where the data ends
    minutes_over: float = 0.0  # minutes of windows judged over an SLO
    requests_over: float | None = None  # first tokens later than the TTFT SLO (≈)
    cause_at: float | None = None  # the window its diagnosis is read at (None: the peak)
    cause: str = "peak"  # "peak", or "surge": the queue's last growing window
    ttft_slo: float | None = None  # the TTFT SLO the requests over it are counted against

    @property
    def peak_at(self) -> float:
        return max(self.peaks, key=lambda p: p.value / p.slo).at

    @property
    def diagnosed_at(self) -> float:
        """The window whose diagnosis the incident shows (see the module docstring)."""
        return self.peak_at if self.cause_at is None else self.cause_at

    @property
    def resolution_s(self) -> float | None:
        """Seconds from the start to the resolution (None: not resolved)."""
        return None if self.resolved_at is None else self.resolved_at - self.start


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
    for group in groups:
        g = _trim_tail(points, group, hot)
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
        before = points[g[0] - 1] if g[0] > 0 else None
        first = inside[0].end
        contiguous = before is not None and first - before.end <= 1.5 * timeline.step
        start = before.end if before is not None and contiguous else first - timeline.length
        calm = [p for i, p in enumerate(points) if i > group[-1] and not _hot(hot, i)]
        resolved = max(calm[0].end - timeline.length, start + timeline.step) if calm else None
        end = inside[-1].end if resolved is None else resolved
        over = [i for i in group if any(_over_slo(hot[s].get(i)) for s in SIGNALS)]
        dominant = dominant_class(inside)
        spike = Spike(
            target=timeline.target,
            model_name=timeline.model_name,
            start=start,
            end=end,
            peaks=tuple(peaks),
            dominant=dominant,
            runs=tuple(band_runs(inside, timeline.step)),
            resolved_at=resolved,
            minutes_over=_seconds_over(points, over, timeline) / 60.0,
            requests_over=_requests_over(points, start, end, timeline),
            ttft_slo=timeline.slo_ttft_p99,
        )
        cause = _surge_at(inside, dominant, spike.peak_at)
        spikes.append(spike if cause is None else replace(spike, cause_at=cause, cause="surge"))
    return spikes


def _hot(hot: dict[str, dict[int, tuple[float | None, str]]], i: int) -> bool:
    return any(i in hot[s] for s in SIGNALS)


def _over_slo(entry: tuple[float | None, str] | None) -> bool:
    """A hot window judged over the SLO (not only over its baseline)."""
    return entry is not None and entry[1].startswith("over SLO")


def _trim_tail(
    points: Sequence[Point], group: list[int], hot: dict[str, dict[int, tuple[float | None, str]]]
) -> list[int]:
    """The group without a last window alone in its class after two or more of the
    group's dominant class, unless it holds a signal's peak."""
    if len(group) < 3:
        return group
    last, prev, before = (points[i] for i in group[-3:][::-1])
    dominant = dominant_class(points[group[0] : group[-1] + 1])
    label = (prev.cls, prev.sub_cause)
    if last.cls == dominant or prev.cls != dominant or (before.cls, before.sub_cause) != label:
        return group
    for s in SIGNALS:
        mine = [i for i in group if i in hot[s]]
        if mine and max(mine, key=lambda i: _value(points[i], s)[0] or 0.0) == group[-1]:
            return group
    return group[:-1]


def _seconds_over(points: Sequence[Point], over: list[int], timeline: Timeline) -> float:
    """The seconds a run of ``n`` consecutive windows over the SLO stands for, as the
    spike's start and end are read: ``(n + 1)`` steps less a window's length (at least a
    step), summed over the runs."""
    total, run = 0.0, 0
    for k, i in enumerate(over):
        run += 1
        nxt = over[k + 1] if k + 1 < len(over) else None
        if nxt is None or points[nxt].end - points[i].end > 1.5 * timeline.step:
            total += max(timeline.step, (run + 1) * timeline.step - timeline.length)
            run = 0
    return total


def _requests_over(
    points: Sequence[Point], start: float, end: float, timeline: Timeline
) -> float | None:
    """First tokens later than the TTFT SLO in ``(start, end]``: each overlapping
    window's count times step ÷ length (None: no window had a TTFT histogram)."""
    share = min(1.0, timeline.step / timeline.length)
    counts = [
        p.ttft_over
        for p in points
        if p.end > start and p.end - timeline.length < end and p.ttft_over is not None
    ]
    return math.fsum(counts) * share if counts else None


def _surge_at(inside: Sequence[Point], dominant: str, peak_at: float) -> float | None:
    """The last window of the dominant class up to the peak whose queue grew (arrivals
    above completions): where a surge is read, not its drain. None: no such window."""
    growing = [
        p.end
        for p in inside
        if p.cls == dominant
        and p.end <= peak_at
        and p.arrivals_per_s is not None
        and p.completions_per_s is not None
        and p.arrivals_per_s > p.completions_per_s
    ]
    return growing[-1] if growing else None


def dominant_class(points: Sequence[Point]) -> str:
    """The most frequent problem class (most severe on a tie), else the most frequent."""
    counts = Counter(p.cls for p in points)
    problems = {c: n for c, n in counts.items() if c in PROBLEM_CLASSES}
    pool = problems or counts
    if not pool:
        return DiagnosisClass.INSUFFICIENT_DATA.value
    return max(pool, key=lambda c: (pool[c], severity(c)))


def diagnosis_heading(spike: Spike) -> str:
    """What the incident's diagnosis is, for the view and both exports."""
    if spike.cause == "surge":
        return (
            "Diagnosis at the surge's height (its queue's last growing window before the p99 peak)"
        )
    return "Diagnosis at the peak"


def duration_text(seconds: float) -> str:
    """``8 min 30 s``, ``1 h 5 min``, ``45 s``."""
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    if h:
        return f"{h} h {m} min"
    return f"{m} min {sec} s" if m else f"{sec} s"


def resolution_text(spike: Spike) -> str:
    """``resolved at 08:13:30 UTC, 8 min 30 s after the start`` or ``not resolved …``."""
    if spike.resolved_at is None or spike.resolution_s is None:
        return "not resolved where the data ends"
    return (
        f"resolved at {utc(spike.resolved_at)} UTC, "
        f"{duration_text(spike.resolution_s)} after the start"
    )


def impact_text(spike: Spike) -> str:
    """``8.5 min over the SLO; ≈ 5,438 requests got their first token later than the TTFT
    SLO (2.00 s)``."""
    minutes = f"{spike.minutes_over:.1f} min over the SLO"
    if spike.requests_over is None or spike.ttft_slo is None:
        return f"{minutes}; requests over it not known (no TTFT histogram)"
    return (
        f"{minutes}; ≈ {spike.requests_over:,.0f} requests got their first token later "
        f"than the TTFT SLO ({fmt_value(spike.ttft_slo, 's')})"
    )
