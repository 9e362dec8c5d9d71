"""The changes on a diagnosis: a problem window's :class:`Diagnosis` with its ranked
changes against the stream's baseline and the summary saying the headline
(:func:`with_changes`), and that sentence read back from a diagnosis's JSON form
(:func:`change_of`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.diagnose.changes.models import COMPARED
from app.diagnose.changes.rank import headline, rank
from app.diagnose.classify import with_changed_hints
from app.diagnose.config import DiagnosisConfig
from app.diagnose.hints import reorder
from app.diagnose.records import SHORT_BASELINE_S, BaselineInfo, Change, Diagnosis
from app.diagnose.render import change_sentence
from app.model import Derived, Window
from app.windows.probefacts import is_probe_window

__all__ = [
    "UNTOLD",
    "LOOKBACK_S",
    "MIN_HEALTHY_S",
    "MIN_SHORT_S",
    "Baseline",
    "change_of",
    "with_changes",
]

# The baseline: healthy windows of the hour before the run began, at least 10 minutes of
# them (a few minutes of healthy traffic is one burst, not a reference). Until a stream
# has that much — its first incident — the healthy minutes just before the change, at
# least 2 of them, are a **short** baseline, labelled so ("short baseline: the 4 healthy
# minutes before"): a surge 5 minutes after a start still says what rose.
LOOKBACK_S = 3600.0
MIN_HEALTHY_S = 600.0
MIN_SHORT_S = SHORT_BASELINE_S


# The note a diagnosis carries when the page lacks the measure of its class's change.
UNTOLD = "what changed cannot be told"


def untold(cls: str, window: Window) -> str | None:
    """Why the change behind ``cls`` is not on this window's page, or None.

    A stall is the engine's steps stopping; a page without the step histogram (vLLM
    before 0.7, SGLang) does not count them, and what it does count — completions,
    tokens — falls with any stall and names none (``models._stalled``)."""
    if cls == "stalled" and window.derived.steps_per_s is None:
        return f"{UNTOLD}: the page counts no engine steps, and a stall is the steps stopping"
    return None


@dataclass(frozen=True, slots=True)
class Baseline:
    """The derived numbers of a stream's healthy baseline (None: too little of it) and
    what it covered."""

    derived: Derived | None
    info: BaselineInfo


def with_changes(
    diagnosis: Diagnosis,
    window: Window,
    baseline: Baseline | None,
    *,
    no_history: str = "",
    config: DiagnosisConfig | None = None,
) -> Diagnosis:
    """The diagnosis of ``window`` with its ``changes`` against ``baseline`` and its
    summary saying the headline (or that there is no baseline). Only a problem window is
    compared; any other is returned as it is. ``baseline`` None: the caller has no
    history of the stream at all (``no_history`` says why).

    The hints that address the headline change move first: built again with the
    baseline's numbers under ``config`` (the one the window was diagnosed with), or,
    without it, reordered as they are (``hints.reorder``). A probe's window is not
    compared: the numbers a baseline holds are a server's."""
    if str(diagnosis.cls) not in COMPARED or is_probe_window(window):
        return diagnosis
    info = None if baseline is None else baseline.info
    changes: tuple[Change, ...] = ()
    if baseline is not None and baseline.derived is not None:
        sub = None if diagnosis.sub_cause is None else str(diagnosis.sub_cause)
        changes = rank(
            window.derived,
            baseline.derived,
            str(diagnosis.cls),
            sub,
            seconds=window.covered,
            baseline_seconds=baseline.info.healthy_s,
        )
    sentence = change_sentence(changes, info, no_history=no_history)
    notes = diagnosis.notes
    why = untold(str(diagnosis.cls), window)
    if why is not None and info is not None and info.enough and not headline(changes):
        sentence, notes = why, (*notes, why)
    summary = f"{diagnosis.summary}; {sentence}" if sentence else diagnosis.summary
    out = dataclasses.replace(
        diagnosis, changes=changes, baseline=info, summary=summary, notes=notes
    )
    if not changes:
        return out
    if config is not None:
        derived = None if baseline is None else baseline.derived
        return with_changed_hints(out, window, derived, config)
    return dataclasses.replace(out, hints=reorder(out.hints, out.label, changes))


def _float(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


def change_of(payload: Mapping[str, Any]) -> str | None:
    """The sentence a problem diagnosis's summary ends with, from its JSON form
    (``Diagnosis.to_dict``: a stored row, a rule instance): the headline change, or why
    there is none. None for a window that was not compared (not a problem, or a row
    stored before changes were ranked)."""
    if "changes" not in payload or str(payload.get("class")) not in COMPARED:
        return None
    said = [n for n in payload.get("notes") or [] if str(n).startswith(UNTOLD)]
    if said:
        return str(said[0])
    base = payload.get("baseline")
    info = None
    if isinstance(base, Mapping):
        needed = _float(base.get("needed_s")) or MIN_HEALTHY_S
        info = BaselineInfo(
            run_start=_float(base.get("run_start")) or 0.0,
            healthy_s=_float(base.get("healthy_s")) or 0.0,
            needed_s=needed,
            start=_float(base.get("start")),
            end=_float(base.get("end")),
            # A row that had no baseline keeps none (stored before short baselines).
            short_s=MIN_SHORT_S if base.get("enough", True) else needed,
        )
    changes = []
    for c in payload.get("changes") or []:
        if not isinstance(c, Mapping):
            continue
        value, baseline = _float(c.get("value")), _float(c.get("baseline"))
        if value is None or baseline is None:
            continue
        changes.append(
            Change(
                signal=str(c.get("signal")),
                baseline=baseline,
                value=value,
                ratio=_float(c.get("ratio")),
                share=_float(c.get("share")) or 0.0,
                effect=None if c.get("effect") is None else str(c.get("effect")),
                effect_ratio=_float(c.get("effect_ratio")),
            )
        )
    return change_sentence(changes, info)
