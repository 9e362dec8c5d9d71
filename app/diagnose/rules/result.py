"""What a rule returns (:class:`RuleResult`) and how clearly a value passed its threshold
(:func:`breach_margin`, the margin every rule's confidence starts from)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.diagnose.classes import DiagnosisClass, SubCause
from app.diagnose.config import Slo
from app.diagnose.facts import Facts
from app.diagnose.records import Evidence
from app.diagnose.slo import Breach

__all__ = ["RuleResult", "breach_margin", "ttft_margin"]


@dataclass(frozen=True, slots=True)
class RuleResult:
    """A rule's verdict: ``holds`` (None = cannot tell), its evidence and its strength.

    ``margin`` (0–1) says how clearly the deciding values passed their thresholds;
    ``n`` is the number of observations behind them (for the confidence).
    """

    cls: DiagnosisClass
    holds: bool | None
    evidence: tuple[Evidence, ...]
    summary: str = ""
    margin: float = 0.5
    n: float = math.inf
    sub_cause: SubCause | None = None


def breach_margin(ratio: float) -> float:
    """0.5 at the threshold, 1.0 at twice the threshold (log scale)."""
    return 0.5 + 0.5 * min(1.0, max(0.0, math.log2(ratio))) if ratio > 0 else 0.5


def ttft_margin(f: Facts, slo: Slo, breach: Breach) -> float:
    """How clearly TTFT passed its SLO; an unproven (interpolated) breach counts less."""
    margin = breach_margin((f.ttft_p99 or 0.0) / slo.ttft_p99) if f.ttft_n else 0.75
    return margin if breach.proven else 0.7 * margin
