"""``idle``: nothing running, waiting or finishing in the window."""

from __future__ import annotations

from app.diagnose.classes import DiagnosisClass
from app.diagnose.config import DiagnosisConfig
from app.diagnose.facts import Facts
from app.diagnose.rules.compare import all_of, evidence
from app.diagnose.rules.result import RuleResult

__all__ = ["idle"]

C = DiagnosisClass


def idle(f: Facts, cfg: DiagnosisConfig) -> RuleResult:
    """No request running, waiting, or producing a token anywhere in the window."""
    r = C.IDLE
    activity = f.ttft_n + f.itl_n + (f.finished or 0.0) + (f.generation_tokens or 0.0)
    checks = (
        evidence(r, "running_max", f.running_max, "=", 0.0, _eq0(f.running_max)),
        evidence(r, "waiting_max", f.waiting_max, "=", 0.0, _eq0(f.waiting_max)),
        evidence(
            r,
            "requests_and_tokens",
            activity,
            "=",
            0.0,
            activity == 0,
            note="first tokens + token gaps + finished requests + generated tokens",
        ),
    )
    holds = all_of(e.holds for e in checks)
    return RuleResult(r, holds, checks, "Idle: no requests running, waiting or finished", 1.0)


def _eq0(x: float | None) -> bool | None:
    return None if x is None else x == 0
