"""The post-incident report: diagnoses over a past range → timeline, spikes, evidence.

Pure: diagnoses and windows in, a :class:`Review` out; no I/O and no clock.

* **Timeline** — per stream, runs of consecutive windows with the same label (class and
  decode sub-cause). A run is named by the end times of its first and last windows: the
  class was seen in every window ending in ``[first_end, last_end]``.
* **Spikes** — windows whose TTFT or ITL p99 is over its SLO, or over ``spike_factor`` ×
  the stream's baseline (the median p99 of the windows in the range that had one);
  consecutive spike windows of one signal merge into one spike with its peak, the time
  of the peak and the class at the peak. A "≥" value (rank in the ``+Inf`` bucket) keeps
  its flag.
* **Findings** — for each run of a problem class, the diagnosis of its most confident
  window: the evidence of the deciding rule, and the hints.
* **Alerts** — what the alert rules would have fired, when the caller supplies them
  (``alerts``): ``(name, target, model_name, severity, starts_at, ends_at)`` records.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.diagnose.classes import PROBLEM_CLASSES
from app.diagnose.records import Diagnosis

__all__ = [
    "AlertEvent",
    "Finding",
    "Review",
    "Run",
    "Spike",
    "StreamReview",
    "build_review",
    "classes_seen",
]


@dataclass(frozen=True, slots=True)
class Run:
    """Consecutive windows with one label."""

    label: str
    cls: str
    first_end: float
    last_end: float
    windows: int
    ttft_p99_max: float | None
    itl_p99_max: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "class": self.cls,
            "first_end": self.first_end,
            "last_end": self.last_end,
            "windows": self.windows,
            "ttft_p99_max": self.ttft_p99_max,
            "itl_p99_max": self.itl_p99_max,
        }


@dataclass(frozen=True, slots=True)
class Spike:
    """Consecutive windows with one signal's p99 over its SLO or its baseline."""

    signal: str
    first_end: float
    last_end: float
    peak: float
    peak_ge: bool
    peak_end: float
    slo: float
    baseline: float | None
    reason: str  # "slo", "baseline" or "slo+baseline"
    class_at_peak: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "signal": self.signal,
            "first_end": self.first_end,
            "last_end": self.last_end,
            "peak": self.peak,
            "peak_ge": self.peak_ge,
            "peak_end": self.peak_end,
            "slo": self.slo,
            "baseline": self.baseline,
            "reason": self.reason,
            "class_at_peak": self.class_at_peak,
        }


@dataclass(frozen=True, slots=True)
class Finding:
    """The evidence and hints of one problem run (its most confident window)."""

    run: Run
    diagnosis: Diagnosis

    def to_dict(self) -> dict[str, Any]:
        d = self.diagnosis
        return {
            "label": self.run.label,
            "first_end": self.run.first_end,
            "last_end": self.run.last_end,
            "window_end": d.end,
            "summary": d.summary,
            "confidence": d.confidence,
            "evidence": [e.to_dict() for e in d.evidence if e.rule == d.cls.value],
            "hints": [h.to_dict() for h in d.hints],
        }


@dataclass(frozen=True, slots=True)
class AlertEvent:
    """An alert that would have fired over the range."""

    name: str
    target: str
    model_name: str
    severity: str
    starts_at: float
    ends_at: float | None
    summary: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "target": self.target,
            "model_name": self.model_name,
            "severity": self.severity,
            "starts_at": self.starts_at,
            "ends_at": self.ends_at,
            "summary": self.summary,
        }


@dataclass(frozen=True, slots=True)
class StreamReview:
    target: str
    model_name: str
    windows: int
    timeline: tuple[Run, ...]
    spikes: tuple[Spike, ...]
    findings: tuple[Finding, ...]
    baseline_ttft_p99: float | None
    baseline_itl_p99: float | None
    diagnoses: tuple[Diagnosis, ...] = field(repr=False, default=())

    @property
    def problem_windows(self) -> int:
        return sum(r.windows for r in self.timeline if _is_problem(r.cls))

    def to_dict(self, *, with_diagnoses: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "target": self.target,
            "model_name": self.model_name,
            "windows": self.windows,
            "problem_windows": self.problem_windows,
            "baseline_ttft_p99": self.baseline_ttft_p99,
            "baseline_itl_p99": self.baseline_itl_p99,
            "timeline": [r.to_dict() for r in self.timeline],
            "spikes": [s.to_dict() for s in self.spikes],
            "findings": [f.to_dict() for f in self.findings],
        }
        if with_diagnoses:
            out["diagnoses"] = [d.to_dict() for d in self.diagnoses]
        return out


@dataclass(frozen=True, slots=True)
class Review:
    """The whole report over ``[start, end]``."""

    source: str
    selector: str
    start: float
    end: float
    window: float
    step: float
    streams: tuple[StreamReview, ...]
    alerts: tuple[AlertEvent, ...] | None  # None: no alert rules were evaluated
    notes: tuple[str, ...] = ()

    def to_dict(self, *, with_diagnoses: bool = False) -> dict[str, Any]:
        return {
            "source": self.source,
            "selector": self.selector,
            "start": self.start,
            "end": self.end,
            "window": self.window,
            "step": self.step,
            "streams": [s.to_dict(with_diagnoses=with_diagnoses) for s in self.streams],
            "alerts": None if self.alerts is None else [a.to_dict() for a in self.alerts],
            "notes": list(self.notes),
        }


def _is_problem(cls: str) -> bool:
    return cls in PROBLEM_CLASSES


def timeline(diagnoses: Sequence[Diagnosis]) -> list[Run]:
    """Runs of consecutive windows (oldest first) with the same label."""
    runs: list[Run] = []
    group: list[Diagnosis] = []

    def close() -> None:
        if group:
            runs.append(
                Run(
                    label=group[0].label,
                    cls=group[0].cls.value,
                    first_end=group[0].end,
                    last_end=group[-1].end,
                    windows=len(group),
                    ttft_p99_max=_max(d.ttft_p99 for d in group),
                    itl_p99_max=_max(d.itl_p99 for d in group),
                )
            )

    for d in diagnoses:
        if group and d.label != group[0].label:
            close()
            group = []
        group.append(d)
    close()
    return runs


def _max(values: Any) -> float | None:
    vs = [v for v in values if v is not None]
    return max(vs) if vs else None


def _baseline(values: Sequence[float | None]) -> float | None:
    vs = [v for v in values if v is not None]
    return statistics.median(vs) if vs else None


def spikes(
    diagnoses: Sequence[Diagnosis], *, spike_factor: float = 3.0
) -> tuple[list[Spike], float | None, float | None]:
    """TTFT and ITL p99 spikes, and the two baselines (median p99 over the range)."""
    base_ttft = _baseline([d.ttft_p99 for d in diagnoses])
    base_itl = _baseline([d.itl_p99 for d in diagnoses])
    out: list[Spike] = []
    for signal, base in (("ttft_p99", base_ttft), ("itl_p99", base_itl)):
        current: list[tuple[Diagnosis, str]] = []
        for d in [*diagnoses, None]:
            reason = None if d is None else _spike_reason(d, signal, base, spike_factor)
            if reason is not None and d is not None:
                current.append((d, reason))
                continue
            if current:
                out.append(_spike(signal, current, base))
                current = []
    out.sort(key=lambda s: (s.first_end, s.signal))
    return out, base_ttft, base_itl


def _value(d: Diagnosis, signal: str) -> tuple[float | None, bool, float]:
    if signal == "ttft_p99":
        return d.ttft_p99, d.ttft_p99_ge, d.slo_ttft_p99
    return d.itl_p99, d.itl_p99_ge, d.slo_itl_p99


def _spike_reason(d: Diagnosis, signal: str, base: float | None, factor: float) -> str | None:
    value, _, slo = _value(d, signal)
    if value is None:
        return None
    over_slo = value > slo
    over_base = base is not None and base > 0 and value > factor * base
    if over_slo and over_base:
        return "slo+baseline"
    if over_slo:
        return "slo"
    return "baseline" if over_base else None


def _spike(signal: str, group: list[tuple[Diagnosis, str]], base: float | None) -> Spike:
    peak_d = max(group, key=lambda g: _value(g[0], signal)[0] or 0.0)[0]
    peak, ge, slo = _value(peak_d, signal)
    reasons = {r for _, r in group}
    reason = "slo+baseline" if "slo+baseline" in reasons or len(reasons) > 1 else reasons.pop()
    return Spike(
        signal=signal,
        first_end=group[0][0].end,
        last_end=group[-1][0].end,
        peak=peak or 0.0,
        peak_ge=ge,
        peak_end=peak_d.end,
        slo=slo,
        baseline=base,
        reason=reason,
        class_at_peak=peak_d.label,
    )


def findings(
    diagnoses: Sequence[Diagnosis],
    runs: Sequence[Run],
    price: Callable[[Diagnosis], Diagnosis] | None = None,
) -> list[Finding]:
    """For each problem run, its most confident window's diagnosis (with ``price``: its
    hints' predicted effects, ``app.read.effects``)."""
    out = []
    for run in runs:
        if not _is_problem(run.cls):
            continue
        inside = [d for d in diagnoses if run.first_end <= d.end <= run.last_end]
        best = max(inside, key=lambda d: (d.confidence, -d.end))
        out.append(Finding(run, best if price is None else price(best)))
    return out


def review_stream(
    target: str,
    model_name: str,
    diagnoses: Sequence[Diagnosis],
    *,
    spike_factor: float = 3.0,
    price: Callable[[Diagnosis], Diagnosis] | None = None,
) -> StreamReview:
    """One stream's part of the report (``diagnoses`` oldest first)."""
    ordered = sorted(diagnoses, key=lambda d: d.end)
    runs = timeline(ordered)
    found_spikes, base_ttft, base_itl = spikes(ordered, spike_factor=spike_factor)
    return StreamReview(
        target=target,
        model_name=model_name,
        windows=len(ordered),
        timeline=tuple(runs),
        spikes=tuple(found_spikes),
        findings=tuple(findings(ordered, runs, price)),
        baseline_ttft_p99=base_ttft,
        baseline_itl_p99=base_itl,
        diagnoses=tuple(ordered),
    )


def build_review(
    diagnoses: Sequence[Diagnosis],
    *,
    source: str,
    selector: str,
    start: float,
    end: float,
    window: float,
    step: float,
    alerts: Sequence[AlertEvent] | None = None,
    spike_factor: float = 3.0,
    notes: Sequence[str] = (),
    price: Callable[[Diagnosis], Diagnosis] | None = None,
) -> Review:
    """The report: one ``StreamReview`` per (target, model_name), problem streams first."""
    by_stream: dict[tuple[str, str], list[Diagnosis]] = {}
    for d in diagnoses:
        by_stream.setdefault((d.target, d.model_name), []).append(d)
    streams = [
        review_stream(t, m, ds, spike_factor=spike_factor, price=price)
        for (t, m), ds in by_stream.items()
    ]
    streams.sort(key=lambda s: (-s.problem_windows, s.target, s.model_name))
    return Review(
        source=source,
        selector=selector,
        start=start,
        end=end,
        window=window,
        step=step,
        streams=tuple(streams),
        alerts=None if alerts is None else tuple(sorted(alerts, key=lambda a: a.starts_at)),
        notes=tuple(notes),
    )


def classes_seen(review: Review) -> set[str]:
    """Every class that some window of some stream had (for tests and summaries)."""
    return {r.cls for s in review.streams for r in s.timeline}
