"""A window's :class:`Diagnosis` put together in one place, for a scraped stream
(``classify.diagnose``) and a probe's (``probe.diagnose_probe``) alike: the class the
decision named, the other rules that held as secondary findings, the hints ranked for
the situation, and the readings and SLO judgements copied beside them.

Confidence, for both: margin × sqrt(observations / min_observations) capped at 1 ×
window coverage, at least 0.05 (:func:`confidence`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from app.diagnose.classes import DiagnosisClass, situation
from app.diagnose.config import DiagnosisConfig, Slo
from app.diagnose.facts import Facts
from app.diagnose.hints import rank_hints
from app.diagnose.records import Diagnosis, Evidence, Finding, Roofline
from app.diagnose.rules import RuleResult
from app.diagnose.server import ServerView
from app.model import Derived, Window

__all__ = ["Decision", "Latencies", "assemble", "confidence"]


class Latencies(Protocol):
    """The p99s a diagnosis copies (a window's ``Facts``, a probe's ``ProbeFacts``)."""

    @property
    def ttft_p99(self) -> float | None: ...

    @property
    def ttft_p99_ge(self) -> bool: ...

    @property
    def itl_p99(self) -> float | None: ...

    @property
    def itl_p99_ge(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Decision:
    """The class a window gets, its summary and confidence; ``primary`` the rule that
    named it (None for a class no problem rule names: healthy, idle, insufficient data)
    and ``firing`` the problem rules that held, in precedence order (the others than the
    primary are the secondary findings)."""

    cls: DiagnosisClass
    summary: str
    confidence: float
    primary: RuleResult | None = None
    firing: Sequence[RuleResult] = ()


def confidence(margin: float, n: float, config: DiagnosisConfig, coverage: float) -> float:
    """The confidence of a decision (module docstring); ``n`` infinite: fully observed."""
    samples = 1.0 if math.isinf(n) else min(1.0, math.sqrt(max(n, 0.0) / config.min_observations))
    return round(max(0.05, min(1.0, margin * samples * coverage)), 2)


def assemble(
    window: Window,
    decision: Decision,
    *,
    facts: Facts,
    config: DiagnosisConfig,
    slo: Slo,
    roof: Roofline | None,
    evidence: tuple[Evidence, ...],
    notes: tuple[str, ...],
    latencies: Latencies,
    ttft_slo: str | None,
    itl_slo: str | None,
    hint_server: ServerView,
    server: ServerView | None = None,
    baseline: Derived | None = None,
    missing: tuple[str, ...] = (),
) -> Diagnosis:
    """The diagnosis of ``window``: ``decision`` with its findings and hints (ranked from
    ``hint_server``'s settings and the ``baseline``), the evidence and notes, and the
    latencies and their SLO judgements. ``server``: the settings shown with it."""
    primary = decision.primary
    others = [r for r in decision.firing if r is not primary]
    key = decision.cls.value if primary is None else situation(primary.cls, primary.sub_cause)
    also = tuple(situation(r.cls, r.sub_cause) for r in others)
    hints = rank_hints(
        key, facts, config, roof, also=also, server=hint_server, slo=slo, baseline=baseline
    )
    return Diagnosis(
        target=window.target,
        model_name=window.model_name,
        start=window.start,
        end=window.end,
        cls=decision.cls,
        confidence=decision.confidence,
        summary=decision.summary,
        sub_cause=None if primary is None else primary.sub_cause,
        evidence=evidence,
        secondary=tuple(Finding(r.cls, r.sub_cause, r.summary) for r in others),
        hints=hints,
        missing=missing,
        notes=notes,
        ttft_p99=latencies.ttft_p99,
        ttft_p99_ge=latencies.ttft_p99_ge,
        itl_p99=latencies.itl_p99,
        itl_p99_ge=latencies.itl_p99_ge,
        ttft_slo=ttft_slo,
        itl_slo=itl_slo,
        slo_ttft_p99=slo.ttft_p99,
        slo_itl_p99=slo.itl_p99,
        roofline=roof,
        facts=facts.numbers(),
        server=server,
    )
