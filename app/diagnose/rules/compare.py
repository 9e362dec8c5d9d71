"""The comparisons every rule makes, as evidence: one reading against its threshold,
three-valued AND and OR over them, a reading beside the baseline's, and the latencies
as the summaries write them."""

from __future__ import annotations

import math
from collections.abc import Iterable

from app.diagnose.classes import DiagnosisClass
from app.diagnose.facts import Facts
from app.diagnose.records import Evidence, fmt_value

__all__ = [
    "all_of",
    "any_of",
    "beside_baseline",
    "compare",
    "evidence",
    "itl_text",
    "log_ratio",
    "retag",
    "ttft_text",
]

C = DiagnosisClass


def evidence(
    rule: C,
    signal: str,
    value: float | None,
    op: str,
    threshold: float | None,
    holds: bool | None,
    unit: str = "",
    ge: bool = False,
    note: str = "",
) -> Evidence:
    return Evidence(str(rule), signal, value, op, threshold, holds, unit, ge, note)


def compare(value: float | None, op: str, threshold: float) -> bool | None:
    if value is None:
        return None
    return {">": value > threshold, ">=": value >= threshold, "<": value < threshold}[op]


def any_of(values: Iterable[bool | None]) -> bool | None:
    """Three-valued OR: True wins, then unknown, else False."""
    vs = list(values)
    if any(v is True for v in vs):
        return True
    return None if any(v is None for v in vs) else False


def all_of(values: Iterable[bool | None]) -> bool | None:
    """Three-valued AND: False wins, then unknown, else True."""
    vs = list(values)
    if any(v is False for v in vs):
        return False
    return None if any(v is None for v in vs) else True


def retag(e: Evidence, rule: C, invert: bool = False) -> Evidence:
    """The same comparison seen from another rule (inverted: "is the queue small?")."""
    if not invert:
        return Evidence(
            str(rule), e.signal, e.value, e.op, e.threshold, e.holds, e.unit, e.ge, e.note
        )
    op = {">=": "<", "<": ">=", ">": "<=", "<=": ">"}.get(e.op, e.op)
    holds = None if e.holds is None else not e.holds
    return Evidence(str(rule), e.signal, e.value, op, e.threshold, holds, e.unit, e.ge, e.note)


def log_ratio(now: float | None, before: float | None) -> float | None:
    """ln(now / before); None when either is unknown or not positive."""
    if now is None or before is None or now <= 0 or before <= 0:
        return None
    return math.log(now / before)


def beside_baseline(
    r: C, signal: str, now: float | None, before: float | None, unit: str = ""
) -> Evidence:
    """A reading of the window beside the baseline (no comparison of its own)."""
    if before is None:
        return evidence(r, signal, now, "", None, None, unit, note="no baseline value")
    ratio = "" if now is None or not before else f" (×{now / before:.2g})"
    return evidence(
        r,
        signal,
        now,
        "",
        None,
        None,
        unit,
        note=f"baseline {fmt_value(before, unit)}{ratio}",
    )


def ttft_text(f: Facts) -> str:
    return fmt_value(f.ttft_p99, "s", f.ttft_p99_ge) if f.ttft_n else "n/a (no first token)"


def itl_text(f: Facts) -> str:
    return fmt_value(f.itl_p99, "s", f.itl_p99_ge)
