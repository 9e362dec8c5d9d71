"""Replays: a recording (or a watched URL, or a Prometheus range) judged window by window.

The scrapes come from ``app.sources`` (``read_scrapes``: a folder read page by page
through the service's own ``process`` step; ``observe``: a live URL), so a replay
judges exactly what the service would have stored. A page that cannot be used is a
failed scrape: the next good page's delta covers the gap, and the windows that contain
it are told how many scrapes failed.

* :func:`diagnose_scrapes` — the diagnosis timeline: windows ``(end - length, end]``
  every ``step`` s, per stream (``phasewatch replay``). A problem window carries what
  changed against the stream's healthy baseline, taken from the same timeline
  (``app.evaluate.baseline.Timeline``).
* :func:`replay` — which alerts would have fired? At every window end
  (``start + length + k·step``, the timeline's ends) the round's own code
  (:func:`app.evaluate.round.judge`, ``SloInputs``) builds the instances and the state
  machine evaluates every rule, time taken from the recording: the transitions (pending,
  firing, resolved) with their labels and annotations, for post-incident review and to
  try a rule file before deploying it. :func:`replay_fleet`: several recordings as the
  replicas of one fleet, for the SLO rules.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.alerts.rules import Rule
from app.alerts.state import Alert, Transition, evaluate
from app.diagnose import DEFAULT_CONFIG, Diagnosis, DiagnosisConfig, diagnose
from app.evaluate.baseline import Compare, deltas_timeline
from app.evaluate.instances import SloInputs, scrape_status
from app.evaluate.round import StreamWindow, TargetRound, judge
from app.fleet.deltas import MemorySource
from app.fleet.imbalance import DEFAULT_THRESHOLDS, ImbalanceThresholds
from app.fleet.slo import SloSpec
from app.model import Window
from app.sources.recording import ReplayedScrapes, read_scrapes
from app.windows.aggregate import window, windows

__all__ = [
    "DEFAULT_UI_BASE_URL",
    "Replay",
    "diagnose_observed",
    "diagnose_recording",
    "diagnose_scrapes",
    "replay",
    "replay_alerts",
    "replay_fleet",
    "replay_recording",
]

DEFAULT_UI_BASE_URL = "http://127.0.0.1:8321/ui"


def _with_info(w: Window, scrapes: ReplayedScrapes) -> Window:
    """The window with its stream's ``cache_config_info`` as of its end (the server's
    settings the hints start from)."""
    info = scrapes.info_at(w.model_name, w.end)
    return dataclasses.replace(w, info=info) if info else w


def diagnose_scrapes(
    scrapes: ReplayedScrapes,
    *,
    length: float = 60.0,
    step: float = 15.0,
    config: DiagnosisConfig = DEFAULT_CONFIG,
) -> list[Diagnosis]:
    """Windows ``(end - length, end]`` every ``step`` s, per stream, diagnosed in time order.

    The window ends are ``start + length + k·step`` (the alert replay's too). A
    recording shorter than one window gets one window over all of it. A target that
    never showed a stream is diagnosed as stream "" (insufficient data, saying why). A
    problem window has its ``changes`` against the healthy windows before its run.
    """
    out: list[Diagnosis] = []
    for model in sorted(scrapes.deltas) or [""]:
        deltas = scrapes.deltas.get(model, [])
        target = scrapes.target
        timeline = deltas_timeline(deltas, target, model, config)
        ws = windows(
            deltas,
            start=scrapes.start,
            end=scrapes.end,
            length=length,
            step=step,
            target=target,
            model_name=model,
        )
        if not ws and scrapes.end > scrapes.start:
            ws = [
                window(
                    deltas, start=scrapes.start, end=scrapes.end, target=target, model_name=model
                )
            ]
        for w in ws:
            w = _with_info(w, scrapes)
            failed, attempted = scrapes.counts(w.start, w.end)
            d = diagnose(w, config, failed_scrapes=failed, attempted_scrapes=attempted)
            out.append(timeline.judge(w, d))
    out.sort(key=lambda d: (d.end, d.model_name))
    return out


def diagnose_recording(
    folder: str | Path,
    *,
    length: float = 60.0,
    step: float = 15.0,
    config: DiagnosisConfig = DEFAULT_CONFIG,
    target: str | None = None,
) -> list[Diagnosis]:
    """The diagnosis timeline of a recording folder; ValueError when it has no pages."""
    scrapes = read_scrapes(Path(folder), target)
    return diagnose_scrapes(scrapes, length=length, step=step, config=config)


def diagnose_observed(
    scrapes: ReplayedScrapes,
    config: DiagnosisConfig = DEFAULT_CONFIG,
    *,
    compare: Compare | None = None,
) -> list[Diagnosis]:
    """One window over everything observed, per stream; ``compare`` adds a problem
    window's changes against the stream's past (``app.evaluate.baseline.history_for_url``)."""
    out = []
    for model in sorted(scrapes.deltas) or [""]:
        w = window(
            scrapes.deltas.get(model, []),
            start=scrapes.start,
            end=scrapes.end,
            target=scrapes.target,
            model_name=model,
        )
        w = _with_info(w, scrapes)
        failed, attempted = scrapes.counts(scrapes.start - 1e-9, scrapes.end)
        d = diagnose(w, config, failed_scrapes=failed, attempted_scrapes=attempted)
        out.append(d if compare is None else compare(w, d))
    return out


@dataclass
class Replay:
    """A recording's diagnosis timeline and the alert transitions it would have caused."""

    diagnoses: list[Diagnosis] = field(default_factory=list)
    transitions: list[Transition] = field(default_factory=list)


def replay(
    scrapes: ReplayedScrapes,
    rules: Sequence[Rule],
    *,
    length: float = 60.0,
    step: float = 15.0,
    config: DiagnosisConfig = DEFAULT_CONFIG,
    labels: dict[str, str] | None = None,
    ui_base_url: str = DEFAULT_UI_BASE_URL,
    resolved_retention: float = 900.0,
    slos: Sequence[SloSpec] = (),
    fire_on_unproven: bool = False,
) -> Replay:
    """Diagnose every window end of the recording and evaluate ``rules`` there.

    ``config`` carries the thresholds and every stream's SLOs (the service's:
    ``app.evaluate.settings.diagnosis_config``). With ``slos``, the SLO rules too, the
    recording's target being a fleet of one. ``fire_on_unproven``: the
    ``alerts.fire_on_unproven`` setting, the rules' field of that name.
    """
    labels = labels or {}
    target = scrapes.target
    source = MemorySource({(target, m): ds for m, ds in scrapes.deltas.items()})
    slo_inputs = SloInputs(source, slos, config, latest_s=length, ui_base_url=ui_base_url)
    by_model = {
        model: {
            round(w.end, 6): _with_info(w, scrapes)
            for w in windows(
                deltas,
                start=scrapes.start,
                end=scrapes.end,
                length=length,
                step=step,
                target=target,
                model_name=model,
            )
        }
        for model, deltas in scrapes.deltas.items()
    }
    stale = scrapes.stale_after()
    timelines = {m: deltas_timeline(ds, target, m, config) for m, ds in scrapes.deltas.items()}

    def compare(w: Window, d: Diagnosis) -> Diagnosis:
        return timelines[w.model_name].judge(w, d)

    prev: dict[str, Alert] = {}
    out = Replay()
    k = 0
    while (end := scrapes.start + length + k * step) <= scrapes.end:
        k += 1
        failed, attempted = scrapes.counts(end - length, end)
        streams = [
            StreamWindow(w, failed, attempted)
            for model in sorted(by_model)
            if (w := by_model[model].get(round(end, 6))) is not None
        ]
        status = scrape_status(scrapes.record_at(end))
        judged = judge(
            [TargetRound(target, labels, status, streams)],
            now=end,
            config=config,
            stale_after=stale,
            ui_base_url=ui_base_url,
            compare=compare,
            fire_on_unproven=fire_on_unproven,
        )
        out.diagnoses.extend(d for _, d in judged.streams)
        slo_instances = slo_inputs.instances(end, source.streams(), {target: labels})
        instances = [*judged.instances, *(slo_instances or [])]  # never None: not in the background
        result = evaluate(rules, instances, end, prev, resolved_retention=resolved_retention)
        prev = result.alerts
        out.transitions.extend(result.transitions)
    return out


def replay_fleet(
    recordings: Sequence[ReplayedScrapes],
    rules: Sequence[Rule],
    slos: Sequence[SloSpec],
    *,
    length: float = 60.0,
    step: float = 15.0,
    config: DiagnosisConfig = DEFAULT_CONFIG,
    labels_of: dict[str, dict[str, str]] | None = None,
    group_by: Sequence[str] = (),
    thresholds: ImbalanceThresholds = DEFAULT_THRESHOLDS,
    ui_base_url: str = DEFAULT_UI_BASE_URL,
    resolved_retention: float = 900.0,
) -> list[Transition]:
    """The SLO rules of ``rules`` over several recordings replayed together as replicas
    (one target each; a model's targets form a fleet), at the window ends of the
    earliest recording's timeline. Time comes from the recordings."""
    source = MemorySource({(rs.target, m): ds for rs in recordings for m, ds in rs.deltas.items()})
    inputs = SloInputs(
        source,
        slos,
        config,
        group_by=group_by,
        latest_s=length,
        thresholds=thresholds,
        ui_base_url=ui_base_url,
    )
    slo_rules = [r for r in rules if r.scope == "slo"]
    start = min(rs.start for rs in recordings)
    last = max(rs.end for rs in recordings)
    prev: dict[str, Alert] = {}
    out: list[Transition] = []
    k = 0
    while (end := start + length + k * step) <= last:
        k += 1
        instances = inputs.instances(end, source.streams(), labels_of or {}) or []
        result = evaluate(slo_rules, instances, end, prev, resolved_retention=resolved_retention)
        prev = result.alerts
        out.extend(result.transitions)
    return out


def replay_alerts(
    scrapes: ReplayedScrapes, rules: Sequence[Rule], **kwargs: Any
) -> list[Transition]:
    """Only the transitions of :func:`replay`."""
    return replay(scrapes, rules, **kwargs).transitions


def replay_recording(
    folder: str | Path, rules: Sequence[Rule], **kwargs: Any
) -> list[dict[str, Any]]:
    """``replay DIR --json``'s ``alerts`` list: transitions as JSON objects, oldest first."""
    scrapes = read_scrapes(Path(folder))
    return [t.to_dict() for t in replay_alerts(scrapes, rules, **kwargs)]
