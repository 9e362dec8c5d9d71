"""What a problem rule looks at (:class:`Inputs`), assembled once per window."""

from __future__ import annotations

from dataclasses import dataclass

from app.diagnose.config import DiagnosisConfig, Slo
from app.diagnose.facts import Facts
from app.diagnose.records import Evidence
from app.diagnose.rules.latency import decode_breach, queue_dominated, ttft_breach
from app.diagnose.slo import Breach
from app.model import Derived

__all__ = ["Inputs", "inputs"]


@dataclass(frozen=True, slots=True)
class Inputs:
    """What a problem rule looks at: the window's facts, the thresholds, the stream's
    SLOs, the TTFT and decode judgements several rules share (made once, by
    :func:`inputs`), and the stream's healthy baseline when the caller has one."""

    facts: Facts
    config: DiagnosisConfig
    slo: Slo
    breach: Breach
    queued: bool | None
    queue_ev: tuple[Evidence, ...]
    decode: Breach
    baseline: Derived | None = None


def inputs(f: Facts, cfg: DiagnosisConfig, slo: Slo, baseline: Derived | None = None) -> Inputs:
    """The rules' inputs for one window judged against ``slo`` (and ``baseline``)."""
    queued, queue_ev = queue_dominated(f, cfg)
    return Inputs(
        f, cfg, slo, ttft_breach(f, slo), queued, queue_ev, decode_breach(f, slo), baseline
    )
