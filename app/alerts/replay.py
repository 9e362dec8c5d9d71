"""Which alerts would have fired? Rules evaluated over a recording, at its window ends.

The recording folder is read page by page through the service's own collector step
(as ``app.diagnose.replay`` does), and at every window end — ``start + length + k·step``,
the same ends the diagnosis timeline uses — each stream's window is diagnosed and every
rule evaluated with the state machine, time taken from the recording. The result is the
list of transitions (pending, firing, resolved) with their labels and annotations: for
post-incident review, and to try a rule file before deploying it.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.alerts.fields import ScrapeStatus
from app.alerts.inputs import SloInputs, evaluate_stream, target_input
from app.alerts.rules import Rule
from app.alerts.state import Alert, Transition, evaluate
from app.collector import TargetState, process
from app.config import ScrapeConfig, SloConfig, TargetConfig
from app.diagnose import DEFAULT_CONFIG, Diagnosis, DiagnosisConfig
from app.evaluate.settings import with_slo
from app.fleet.deltas import MemorySource
from app.fleet.imbalance import DEFAULT_THRESHOLDS, ImbalanceThresholds
from app.fleet.slo import SloSpec
from app.model import IntervalDelta
from app.scrape.client import read_file
from app.windows.aggregate import windows

__all__ = [
    "Replay",
    "ReplayedScrapes",
    "read_scrapes",
    "replay",
    "replay_alerts",
    "replay_fleet",
    "replay_recording",
]

DEFAULT_UI_BASE_URL = "http://127.0.0.1:8321/ui"
_PAGE = re.compile(r"^(\d+(?:\.\d+)?)\.prom$")


def list_pages(folder: Path) -> list[tuple[float, Path]]:
    """The ``<unix-seconds>.prom`` pages of a recording folder, oldest first."""
    pages = []
    for path in folder.iterdir():
        m = _PAGE.match(path.name)
        if m and path.is_file():
            pages.append((float(m.group(1)), path))
    return sorted(pages)


@dataclass
class ReplayedScrapes:
    """Every page of a recording: its scrape outcome and the deltas it produced."""

    target: str
    statuses: list[tuple[float, ScrapeStatus]] = field(default_factory=list)
    deltas: dict[str, list[IntervalDelta]] = field(default_factory=dict)

    @property
    def start(self) -> float:
        return self.statuses[0][0] if self.statuses else 0.0

    @property
    def end(self) -> float:
        return self.statuses[-1][0] if self.statuses else 0.0

    def status_at(self, t: float) -> ScrapeStatus:
        """The latest scrape at or before ``t``."""
        found = ScrapeStatus()
        for ts, status in self.statuses:
            if ts > t:
                break
            found = status
        return found

    def counts(self, start: float, end: float) -> tuple[int, int]:
        """(failed, attempted) scrapes in ``(start, end]``."""
        inside = [s for ts, s in self.statuses if start < ts <= end]
        return sum(1 for s in inside if not s.ok), len(inside)

    def stale_after(self) -> float:
        gaps = [b[0] - a[0] for a, b in zip(self.statuses, self.statuses[1:], strict=False)]
        return 3.0 * (statistics.median(gaps) if gaps else 5.0)


def read_scrapes(folder: Path, target: str | None = None) -> ReplayedScrapes:
    """Read a recording folder; ValueError when it has no pages."""
    pages = list_pages(folder)
    if not pages:
        raise ValueError(f"{folder}: no <unix-seconds>.prom pages")
    name = target or re.sub(r"[^A-Za-z0-9_.:@-]", "_", folder.resolve().name)[-128:] or "target"
    out = ReplayedScrapes(name)
    state = TargetState(TargetConfig(name="recording", url="http://recording"))
    cap = ScrapeConfig().max_body_bytes
    for ts, path in pages:
        outcome = process(state, read_file(path, max_bytes=cap), ts)
        rec = outcome.record
        out.statuses.append((ts, ScrapeStatus(ts, rec.ok, rec.error_kind)))
        for d in outcome.deltas:
            out.deltas.setdefault(d.model_name, []).append(d)
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
    slo: SloConfig | None = None,
    labels: dict[str, str] | None = None,
    ui_base_url: str = DEFAULT_UI_BASE_URL,
    resolved_retention: float = 900.0,
    slos: Sequence[SloSpec] = (),
) -> Replay:
    """Diagnose every window end of the recording and evaluate ``rules`` there.

    ``config`` carries the thresholds and every stream's SLOs; ``slo``, a settings
    ``slo`` section, is applied to it (:func:`_resolved`). With ``slos``, the SLO rules
    too, the recording's target being a fleet of one.
    """
    config = _resolved(config, slo)
    labels = labels or {}
    target = scrapes.target
    source = MemorySource({(target, m): ds for m, ds in scrapes.deltas.items()})
    slo_inputs = SloInputs(source, slos, config, latest_s=length, ui_base_url=ui_base_url)
    by_model = {
        model: {
            round(w.end, 6): w
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
    prev: dict[str, Alert] = {}
    out = Replay()
    k = 0
    while (end := scrapes.start + length + k * step) <= scrapes.end:
        k += 1
        tgt = target_input(
            target,
            scrapes.status_at(end),
            now=end,
            stale_after=stale,
            labels=labels,
            ui_base_url=ui_base_url,
        )
        instances = [tgt]
        failed, attempted = scrapes.counts(end - length, end)
        for model in sorted(by_model):
            w = by_model[model].get(round(end, 6))
            if w is None:
                continue
            diagnosis, inst, _ = evaluate_stream(
                w,
                tgt,
                config,
                failed_scrapes=failed,
                attempted_scrapes=attempted,
                labels=labels,
                ui_base_url=ui_base_url,
            )
            out.diagnoses.append(diagnosis)
            instances.append(inst)
        instances.extend(slo_inputs.instances(end, source.streams(), {target: labels}))
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
        instances = inputs.instances(end, source.streams(), labels_of or {})
        result = evaluate(slo_rules, instances, end, prev, resolved_retention=resolved_retention)
        prev = result.alerts
        out.extend(result.transitions)
    return out


def _resolved(config: DiagnosisConfig, slo: SloConfig | None) -> DiagnosisConfig:
    """``config`` with a settings ``slo`` section applied, when one is given (app/cli/
    passes ``Settings.slo``)."""
    return config if slo is None else with_slo(config, slo)


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
