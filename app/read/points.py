"""Windows as the pages draw them: chart points, a stream's timeline, the overview's cards.

A :class:`Point` is one window and its diagnosis reduced to what the charts plot; a
:class:`Timeline` a stream's points over a range at one resolution (:func:`resolution`);
a :class:`Card` one stream on the overview, ranked worst first (:func:`card_rank`). The
overview's class strips may come from the evaluation rounds' classes
(:func:`on_grid`) and its cards from the rounds' latest windows (:func:`fresh_rounds`).

**Resolution.** A range is cut into at most ``budget`` windows: the step is the
configured one (15 s) or the next coarser of :data:`STEPS` that fits, and the window
length is the configured one (60 s) or the step when that is longer (so windows tile
the range and every observation lands in some window). A day at the defaults is 1,440
windows of 60 s; spikes shorter than the window are still inside one window's p99.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from app.diagnose.classes import DiagnosisClass, severity
from app.diagnose.records import Diagnosis
from app.fleet.slo import good_below
from app.model import Quantile, Window
from app.read.source import TargetInfo
from app.windows.probefacts import ProbeFacts, is_probe_window, probe_facts

STEPS: tuple[float, ...] = (15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)
DEFAULT_BUDGET = 2000
# The overview's class strip: each card's last 15 minutes.
RECENT_S = 900.0
# The evaluation round's latest windows serve the overview up to this many steps old.
FRESH_STEPS = 2
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
    # Requests per second: the estimated arrivals and the completions
    # (``app.windows.derived``), so that a surge shows as one.
    arrivals_per_s: float | None = None
    completions_per_s: float | None = None
    # First tokens later than the TTFT SLO in the window (from its buckets: interpolated
    # inside the bucket that holds the SLO, as ``app.fleet.slo.good_below``).
    ttft_over: float | None = None


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
        arrivals_per_s=_finite(w.derived.arrival_rate),
        completions_per_s=_finite(w.derived.completion_rate),
        ttft_over=_over_slo(w, ttft, d.slo_ttft_p99),
    )


def _over_slo(w: Window, signal: str, slo: float) -> float | None:
    """Observations of ``signal`` in the window above ``slo`` (None: no histogram)."""
    hd = w.histograms.get(signal)
    if hd is None:
        return None
    t = good_below(hd, slo)
    return t.bad


def probe_reading(w: Window) -> ProbeFacts | None:
    """What a probe's window says a client saw (``app.windows.probefacts``: the probe's
    panel on its target page); None for any other stream's window."""
    return probe_facts(w)


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


def on_grid(
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


def target_error(info: TargetInfo | None) -> str | None:
    """Why the target is down, or what its last scrape left out (``card.up`` tells)."""
    if info is None or info.last_error is None:
        return None
    return f"{info.last_error_kind}: {info.last_error}"


def card_rank(c: Card) -> tuple[int, int, int, float, str, str]:
    """The overview's order: firing alerts, down, the worst class, furthest over its SLO."""
    ratio = 0.0
    if c.point is not None and c.diagnosis is not None:
        for value, slo in (
            (c.point.ttft_p99, c.diagnosis.slo_ttft_p99),
            (c.point.itl_p99, c.diagnosis.slo_itl_p99),
        ):
            if value is not None and slo > 0:
                ratio = max(ratio, value / slo)
    return (-len(c.firing), int(c.up), -severity(c.cls), -ratio, c.target, c.model_name)
