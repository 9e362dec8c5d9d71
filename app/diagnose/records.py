"""The diagnosis records: evidence, findings, hints and the ``Diagnosis`` itself.

All frozen; ``to_dict()`` gives the JSON form the API, the store and ``--json`` share.
Numbers stay numbers (``None`` when unknown); a value that is only a lower bound (the
rank fell in a histogram's ``+Inf`` bucket) carries ``ge=True`` and renders as "≥ x".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from app.diagnose.classes import PROBLEM_CLASSES, DiagnosisClass, SubCause, situation
from app.diagnose.effects import Effect
from app.diagnose.server import ServerView

__all__ = [
    "PROBLEM_CLASSES",  # the vocabulary lives in ``classes``; re-exported for callers
    "BaselineInfo",
    "Change",
    "Diagnosis",
    "DiagnosisClass",
    "Evidence",
    "Finding",
    "Hint",
    "Roofline",
    "SubCause",
    "fmt_value",
]


def _num(x: float | None) -> float | None:
    """JSON-safe number: NaN and infinities become None."""
    if x is None or not math.isfinite(x):
        return None
    return x


def fmt_value(value: float | None, unit: str = "", ge: bool = False) -> str:
    """Human form of a value: seconds as ms below 1 s, ratios as percent, "≥" for bounds."""
    if value is None:
        return "n/a"
    prefix = "≥ " if ge else ""
    if unit == "s":
        text = f"{value * 1000:.0f} ms" if abs(value) < 1 else f"{value:.2f} s"
    elif unit == "ratio":
        text = f"{value:.0%}"
    else:
        text = f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
        text += f" {unit}" if unit else ""
    return prefix + text


@dataclass(frozen=True, slots=True)
class Evidence:
    """One comparison a rule made: ``signal`` ``value`` ``op`` ``threshold`` → ``holds``.

    ``holds`` is None when the comparison could not be made (signal missing, no
    observations, or a lower bound below the threshold). ``rule`` names the class whose
    rule made it; ``ge`` marks ``value`` as a lower bound.
    """

    rule: str
    signal: str
    value: float | None
    op: str
    threshold: float | None
    holds: bool | None
    unit: str = ""
    ge: bool = False
    note: str = ""

    def text(self) -> str:
        """One readable line, e.g. ``ttft_p99 ≥ 10.00 s > 2.00 s: yes``."""
        if self.threshold is None:
            note = f" ({self.note})" if self.note else ""
            return f"{self.signal} {fmt_value(self.value, self.unit, self.ge)}{note}"
        verdict = {True: "yes", False: "no", None: "unknown"}[self.holds]
        threshold = "" if self.threshold is None else f" {self.op} "
        threshold += "" if self.threshold is None else fmt_value(self.threshold, self.unit)
        note = f" ({self.note})" if self.note else ""
        return (
            f"{self.signal} {fmt_value(self.value, self.unit, self.ge)}{threshold}: {verdict}{note}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "signal": self.signal,
            "value": _num(self.value),
            "ge": self.ge,
            "op": self.op,
            "threshold": _num(self.threshold),
            "holds": self.holds,
            "unit": self.unit,
            "note": self.note,
        }


@dataclass(frozen=True, slots=True)
class Finding:
    """A class that also holds in this window, besides the primary one."""

    cls: DiagnosisClass
    sub_cause: SubCause | None = None
    summary: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "class": str(self.cls),
            "sub_cause": None if self.sub_cause is None else str(self.sub_cause),
            "summary": self.summary,
        }


@dataclass(frozen=True, slots=True)
class Hint:
    """One thing to change: the flag or action (with the value to set, where one follows
    from the evidence and the server's settings), and why it helps here. ``evidence`` is
    the reading of this window that justifies it, with its numbers; ``why`` starts with
    it, then gives the physics."""

    id: str
    title: str
    action: str
    why: str
    evidence: str = ""
    # The engine knob the action sets, in the what-if twin's words ("max_num_seqs", 16),
    # where the twin models it; and the twin's prediction of it (app.diagnose.effects),
    # attached by the evaluation layer.
    setting: tuple[str, float] | None = None
    effect: Effect | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "action": self.action,
            "why": self.why,
            "evidence": self.evidence,
            "setting": None if self.setting is None else {self.setting[0]: self.setting[1]},
            "effect": None if self.effect is None else self.effect.to_dict(),
        }

    def line(self) -> str:
        """One line for an alert or a list: title, action and the predicted effect."""
        text = f"{self.title}: {self.action}"
        return text if self.effect is None else f"{text} — {self.effect.text()}"


@dataclass(frozen=True, slots=True)
class Roofline:
    """Decode ceiling (bandwidth / weight bytes) next to measured per-stream decode speed."""

    device: str
    bandwidth_gbs: float
    weight_bytes: float
    ceiling_tok_s: float
    measured_tok_s: float | None
    efficiency: float | None

    def text(self) -> str:
        measured = "n/a" if self.measured_tok_s is None else f"{self.measured_tok_s:.1f} tok/s"
        eff = "" if self.efficiency is None else f" ({self.efficiency:.0%} of ceiling)"
        return (
            f"decode ceiling {self.ceiling_tok_s:.1f} tok/s per stream "
            f"({self.device}: {self.bandwidth_gbs:g} GB/s / {self.weight_bytes / 1e9:.2f} GB "
            f"of weights); measured {measured}{eff}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "bandwidth_gbs": self.bandwidth_gbs,
            "weight_bytes": self.weight_bytes,
            "ceiling_tok_s": _num(self.ceiling_tok_s),
            "measured_tok_s": _num(self.measured_tok_s),
            "efficiency": _num(self.efficiency),
        }


# How a changed signal reads: its name for people, and its unit ("ratio": a 0–1 fraction).
_CHANGE_NAMES: dict[str, tuple[str, str]] = {
    "arrival_rate": ("arrival rate", "/s"),
    "completion_rate": ("completion rate", "/s"),
    "prompt_tokens_mean": ("mean prompt", "tokens"),
    "output_tokens_mean": ("mean output", "tokens"),
    "prefix_cache_hit_rate": ("prefix-cache hit rate", "ratio"),
    "running_avg": ("requests running", ""),
    "preemptions_rate": ("preemptions", "/s"),
    "kv_usage_avg": ("KV-cache usage", "ratio"),
    "step_tokens_p99": ("tokens per step p99", ""),
    "spec_decode_acceptance": ("speculative-decoding acceptance", "ratio"),
    "spec_decode_accepted_per_draft": ("accepted draft tokens per step", ""),
    "steps_per_s": ("engine steps", "/s"),
    "uncached_prompt_tokens_mean": ("uncached prompt tokens", ""),
    "steps_per_output_token": ("decode steps per output token", ""),
    "waiting_deferred_avg": ("deferred waiting requests", ""),
}


def _change_value(value: float, unit: str) -> str:
    if unit == "ratio":
        return f"{value:.2f}"
    text = f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    return f"{text}{unit}" if unit == "/s" else f"{text} {unit}".rstrip()


@dataclass(frozen=True, slots=True)
class Change:
    """One signal against the stream's healthy baseline (``app.diagnose.changes``).

    ``ratio`` is ``value / baseline`` (None when the baseline is 0); ``share`` the part
    of the symptom's growth this change explains under the physics (0–1, the shares of a
    window's changes add up to 1 when any explains it); ``effect`` names the quantity
    that drives the symptom when it is not the signal itself (a hit-rate collapse drives
    ``uncached_prompt_tokens_mean``) and ``effect_ratio`` how much it moved.
    """

    signal: str
    baseline: float
    value: float
    ratio: float | None
    share: float
    effect: str | None = None
    effect_ratio: float | None = None

    def text(self) -> str:
        """``prefix-cache hit rate fell 0.85 → 0.05, uncached prompt tokens ×6.3``."""
        name, unit = _CHANGE_NAMES.get(self.signal, (self.signal, ""))
        verb = "rose" if self.value > self.baseline else "fell"
        if self.value == self.baseline:
            verb = "held"
        out = (
            f"{name} {verb} {_change_value(self.baseline, unit)} → "
            f"{_change_value(self.value, unit)}"
        )
        if self.effect is not None and self.effect_ratio is not None:
            effect = _CHANGE_NAMES.get(self.effect, (self.effect, ""))[0]
            out += f", {effect} ×{self.effect_ratio:.2g}"
        elif self.ratio is not None and unit != "ratio":
            out += f" (×{self.ratio:.2g})"
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "signal": self.signal,
            "baseline": _num(self.baseline),
            "value": _num(self.value),
            "ratio": _num(self.ratio),
            "share": _num(self.share),
            "effect": self.effect,
            "effect_ratio": _num(self.effect_ratio),
        }


# The least healthy data a short baseline needs (``app.diagnose.changes``): below the full
# baseline's ``needed_s``, the healthy minutes just before a change still tell what moved.
SHORT_BASELINE_S = 120.0


def minutes(seconds: float) -> str:
    """Whole minutes, or tenths below ten, never rounded up (9.75 min is "9.7", not
    "10": a count said beside a need must not read as meeting it)."""
    tenths = math.floor(seconds / 6.0 + 1e-9)
    if tenths >= 100 or tenths % 10 == 0:
        return f"{tenths // 10}"
    return f"{tenths / 10:.1f}"


@dataclass(frozen=True, slots=True)
class BaselineInfo:
    """What a window was compared with: the healthy data of the hour before its run of
    problem windows began (``run_start``). ``healthy_s`` seconds of it were found between
    ``start`` and ``end`` (None: none). ``needed_s`` is what the full baseline needs; from
    ``short_s`` up to it the baseline is **short** (the healthy minutes just before the
    change, labelled so); below ``short_s`` there is none."""

    run_start: float
    healthy_s: float
    needed_s: float
    start: float | None = None
    end: float | None = None
    short_s: float = SHORT_BASELINE_S

    @property
    def enough(self) -> bool:
        """A baseline to compare with: the full one, or a short one."""
        return self.healthy_s >= min(self.needed_s, self.short_s)

    @property
    def short(self) -> bool:
        return self.enough and self.healthy_s < self.needed_s

    @property
    def label(self) -> str:
        """ "the healthy baseline", or "short baseline: the 4 healthy minutes before"."""
        if self.short:
            return f"short baseline: the {minutes(self.healthy_s)} healthy minutes before"
        return "the healthy baseline"

    def lacking(self) -> str:
        """Why there is no baseline (``enough`` false), one sentence that never reads as
        meeting its own need."""
        return (
            f"no healthy baseline: {minutes(self.healthy_s)} min of healthy windows in the "
            f"hour before this began ({minutes(self.short_s)} min needed for a short "
            f"baseline, {minutes(self.needed_s)} for the full one)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_start": self.run_start,
            "healthy_s": self.healthy_s,
            "needed_s": self.needed_s,
            "start": self.start,
            "end": self.end,
            "enough": self.enough,
        }


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """The verdict on one window of one stream.

    ``cls`` is the primary class; ``secondary`` the other classes that hold; ``evidence``
    every comparison every rule made (fired or not); ``hints`` most useful first;
    ``missing`` the signals that kept a rule from evaluating; ``notes`` caveats such as
    few observations or a counter reset. ``ttft_p99``/``itl_p99`` (with their ``_ge``
    lower-bound flags) and the SLOs they were judged against are copied for convenience.
    ``ttft_slo``/``itl_slo`` are the one judgement of each SLO (``slo.verdict``: "over",
    "unproven", "within"; None: cannot tell) — decode judged per token (TPOT) under
    speculative decoding — which the alert rules and the UI read too.
    ``changes`` (a problem window only) ranks what moved against the stream's healthy
    baseline, the headline first; ``baseline`` says what it was compared with (None: not
    compared, e.g. a healthy window or a diagnosis made without history). ``server`` is
    the server's settings the hints started from, each with its source (the page, the
    configuration, or an assumed vLLM default).
    """

    target: str
    model_name: str
    start: float
    end: float
    cls: DiagnosisClass
    confidence: float
    summary: str
    sub_cause: SubCause | None = None
    evidence: tuple[Evidence, ...] = ()
    secondary: tuple[Finding, ...] = ()
    hints: tuple[Hint, ...] = ()
    missing: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    ttft_p99: float | None = None
    ttft_p99_ge: bool = False
    itl_p99: float | None = None
    itl_p99_ge: bool = False
    ttft_slo: str | None = None
    itl_slo: str | None = None
    slo_ttft_p99: float = 2.0
    slo_itl_p99: float = 0.1
    roofline: Roofline | None = None
    facts: dict[str, float | None] = field(default_factory=dict)
    changes: tuple[Change, ...] = ()
    baseline: BaselineInfo | None = None
    server: ServerView | None = None

    @property
    def label(self) -> str:
        """``decode_bound/prefill_interference`` style label (class plus sub-cause)."""
        return situation(self.cls, self.sub_cause)

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "model_name": self.model_name,
            "start": self.start,
            "end": self.end,
            "class": str(self.cls),
            "sub_cause": None if self.sub_cause is None else str(self.sub_cause),
            "confidence": self.confidence,
            "summary": self.summary,
            "ttft_p99": _num(self.ttft_p99),
            "ttft_p99_ge": self.ttft_p99_ge,
            "itl_p99": _num(self.itl_p99),
            "itl_p99_ge": self.itl_p99_ge,
            "ttft_slo": self.ttft_slo,
            "itl_slo": self.itl_slo,
            "slo": {"ttft_p99": self.slo_ttft_p99, "itl_p99": self.slo_itl_p99},
            "evidence": [e.to_dict() for e in self.evidence],
            "secondary": [f.to_dict() for f in self.secondary],
            "hints": [h.to_dict() for h in self.hints],
            "missing": list(self.missing),
            "notes": list(self.notes),
            "roofline": None if self.roofline is None else self.roofline.to_dict(),
            "facts": {k: _num(v) for k, v in self.facts.items()},
            "changes": [c.to_dict() for c in self.changes],
            "baseline": None if self.baseline is None else self.baseline.to_dict(),
            "server": None if self.server is None else self.server.to_dict(),
        }
