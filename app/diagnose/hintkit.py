"""What the hint builders share: the situations the catalog is keyed by, how a hint
writes its numbers, and the readings builders of more than one family make.

The builders (``prefill_hints``, ``memory_hints``, ``queue_hints``, ``frontend_hints``,
``transfer_hints``) import from here; ``hints.py`` joins them into the catalog.
"""

from __future__ import annotations

import math

from app.diagnose.classes import DiagnosisClass, SubCause, situation
from app.diagnose.hintspec import Context
from app.diagnose.records import fmt_value

# The situations the catalog is keyed by (``classes.situation``: class or class/sub-cause).
C = DiagnosisClass
S = SubCause
STALLED = situation(C.STALLED)
KV = situation(C.KV_PRESSURE)
SURGE = situation(C.QUEUE_BOUND, S.ARRIVAL_SURGE)
CAPACITY_LOSS = situation(C.QUEUE_BOUND, S.CAPACITY_LOSS)
DEFERRED = situation(C.QUEUE_BOUND, S.DEFERRED)
LONG_PROMPTS = situation(C.PREFILL_BOUND, S.LONG_PROMPTS)
CACHE_MISS = situation(C.PREFILL_BOUND, S.PREFIX_CACHE_MISS)
INTERFERENCE = situation(C.DECODE_BOUND, S.PREFILL_INTERFERENCE)
BANDWIDTH = situation(C.DECODE_BOUND, S.BANDWIDTH_BOUND)
SPEC = situation(C.DECODE_BOUND, S.SPEC_DECODE_REGRESSION)
NO_DATA = situation(C.INSUFFICIENT_DATA)
FRONTEND = situation(C.FRONTEND_BOUND)
PREFILL = (LONG_PROMPTS, CACHE_MISS)  # every prefill-bound situation (for ``conflicts``)
# transfer_bound: the KV transfer of disaggregated prefill/decode (``transfer_hints``).
SLOW = situation(C.TRANSFER_BOUND, S.SLOW_TRANSFER)
FAILURES = situation(C.TRANSFER_BOUND, S.TRANSFER_FAILURES)
EXPIRED = situation(C.TRANSFER_BOUND, S.KV_EXPIRED)


# --- formatting ------------------------------------------------------------------------------


def fmt_n(x: float) -> str:
    """``24,100`` / ``128`` / ``2.5`` / ``0.06``."""
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def fmt_flag(x: float) -> str:
    """A flag's integer value as vLLM takes it: ``8192``."""
    return str(int(x))


def fmt_pct(x: float) -> str:
    """``85%``: a ratio as the rest of the diagnosis writes it (``records.fmt_value``)."""
    return fmt_value(x, "ratio")


def fmt_s(x: float) -> str:
    """``480 ms`` / ``2.50 s``: seconds as the rest of the diagnosis writes them."""
    return fmt_value(x, "s")


def fmt_rate(x: float) -> str:
    return f"{x:.3g}/s"


# --- shared readings ---------------------------------------------------------------------------


def requests_wait(x: Context) -> bool:
    """Requests waited: the window's waiting average reached ``waiting_min``."""
    f = x.facts
    return f.waiting_avg is not None and f.waiting_avg >= x.config.waiting_min


def baseline_value(x: Context, name: str) -> float | None:
    """The healthy baseline's ``name`` (a ``Derived`` field), None without one."""
    if x.baseline is None:
        return None
    v = getattr(x.baseline, name, None)
    return None if v is None or not math.isfinite(v) else float(v)
