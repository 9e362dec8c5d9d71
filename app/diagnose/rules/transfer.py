"""``transfer_bound``: the KV transfer between a prefill and a decode pool is the problem.

Disaggregated prefill/decode (docs/concepts.md, "Disaggregation") splits a request in two: a
prefill instance computes the prompt's KV cache and the first token, a KV connector ships
the cache to a decode instance, which streams the rest. The client's first token comes
after the prefill, the transfer and the decode instance's first step, so a slow, failing
or late transfer is a bottleneck no engine flag of either pool explains. It holds when
one of these is so (``app.windows.transferfacts`` reads them):

* ``kv_expired`` — the prefill instance released a request's KV after holding it for its
  lease (``kv_lease_duration``, 30 s by default) without the decode side reading it:
  any such request (counted on the prefill instance) fails or is prefilled again. The
  decode side was too late to fetch: its link or its pool is behind.
* ``transfer_failures`` — more than ``transfer_failure_share_min`` (1 %) of the
  transfers failed (handshakes and notifications included): each failed request errors
  under vLLM's default ``kv_load_failure_policy`` (``fail``), or is recomputed.
* ``slow_transfer`` — TTFT p99 over its SLO and the transfer is at least
  ``transfer_share_min`` (half) of the wait for a first token, measured as the queue
  share is: requests whose KV is on its way against the requests before their first
  token (a consumer's ``kv_fetch`` gauges), else the mean transfer time against the mean
  TTFT. Loads not started yet wait for blocks to receive into: the decode instance's
  capacity (KV pressure, queueing), not the transfer.

Precedence (``classes.VOCABULARY``): after ``stalled``, before ``kv_pressure`` — a
prefill pool full of KV held for a late decode side is the transfer's doing — and
``queue_bound``: requests waiting for their KV are *deferred*, not short of capacity.
Its hints: ``transfer_hints.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.diagnose.classes import DiagnosisClass, SubCause
from app.diagnose.config import DiagnosisConfig, Slo
from app.diagnose.records import Evidence, fmt_value
from app.diagnose.rules.compare import retag, ttft_text
from app.diagnose.rules.inputs import Inputs
from app.diagnose.rules.result import RuleResult, breach_margin
from app.diagnose.slo import Breach
from app.windows.transferfacts import TransferFacts

__all__ = ["TransferVerdict", "judge_transfer", "mb_per_s", "transfer_bound"]

C = DiagnosisClass
RULE = str(C.TRANSFER_BOUND)


@dataclass(frozen=True, slots=True)
class TransferVerdict:
    """Whether the transfer is the bottleneck (None: cannot tell), why, and how clearly."""

    holds: bool | None
    sub_cause: SubCause | None
    evidence: tuple[Evidence, ...]
    summary: str
    margin: float
    n: float


def _ev(
    signal: str,
    value: float | None,
    op: str,
    threshold: float | None,
    holds: bool | None,
    unit: str = "",
    note: str = "",
    ge: bool = False,
) -> Evidence:
    return Evidence(RULE, signal, value, op, threshold, holds, unit, ge, note)


def mb_per_s(t: TransferFacts) -> str:
    """``850 MB/s`` (or ``n/a``): the bytes moved per second of transfer."""
    if t.bytes_per_s is None:
        return "n/a"
    return f"{t.bytes_per_s / 1e6:,.0f} MB/s"


def transfer_bound(x: Inputs) -> RuleResult:
    """The rule (module docstring) on one window; never holds on a page without a KV
    connector."""
    f = x.facts
    v = judge_transfer(f.transfer, x.breach, x.config, x.slo, ttft_text(f))
    return RuleResult(C.TRANSFER_BOUND, v.holds, v.evidence, v.summary, v.margin, v.n, v.sub_cause)


def judge_transfer(
    t: TransferFacts | None, breach: Breach, cfg: DiagnosisConfig, slo: Slo, ttft: str
) -> TransferVerdict:
    """The transfer rule on one window (module docstring); ``breach`` is the window's
    TTFT judgement, ``ttft`` its p99 as text."""
    if t is None:
        return TransferVerdict(False, None, (), "", 0.5, math.inf)
    expired = None if t.expired is None else t.expired > 0
    failing = None
    if t.failure_share is not None and t.failures is not None:
        failing = t.failures >= 1 and t.failure_share > cfg.transfer_failure_share_min
    big = None if t.share is None else t.share >= cfg.transfer_share_min
    slow = None if breach.holds is None or big is None else bool(breach.holds and big)
    if breach.holds is False or big is False:
        slow = False
    ev = _evidence(t, breach, cfg, big, failing, expired)
    # What cannot be judged here (no consumer gauge on a prefill page, no TTFT) does not
    # hold: the other rules say when the window itself cannot be judged.
    holds = bool(expired or failing or slow)
    sub: SubCause | None
    if expired:
        sub, summary, margin, n = _expired(t)
    elif failing:
        sub, summary, margin, n = _failing(t, cfg)
    elif slow:
        sub, summary, margin, n = _slow(t, breach, slo, ttft)
    else:
        sub, summary, margin, n = None, "", 0.5, math.inf
    return TransferVerdict(holds, sub, ev, summary, margin, n)


def _evidence(
    t: TransferFacts,
    breach: Breach,
    cfg: DiagnosisConfig,
    big: bool | None,
    failing: bool | None,
    expired: bool | None,
) -> tuple[Evidence, ...]:
    """Every comparison the rule makes, the window's TTFT judgement first."""
    share_note = {
        "request_seconds": "KV load in progress / waiting + in prefill (first tokens/s × "
        "prefill time mean)",
        "time": "transfer time mean / TTFT mean (this instance transfers and counts TTFT)",
    }.get(t.share_source or "", "no transfer counted here")
    return (
        retag(breach.evidence, C.TRANSFER_BOUND),
        _ev(
            "transfer_share",
            t.share,
            ">=",
            cfg.transfer_share_min,
            big,
            "ratio",
            share_note,
        ),
        _ev(
            "kv_fetch_waiting_to_start",
            t.fetch_waiting_to_start,
            "",
            None,
            None,
            note="loads not started: waiting for blocks to receive into (capacity)",
        ),
        _ev(
            "kv_xfer_time_mean",
            t.xfer_mean,
            "",
            None,
            None,
            "s",
            f"{t.transfers:.0f} transfers; p99 {fmt_value(t.xfer_p99, 's', t.xfer_p99_ge)}; "
            f"{mb_per_s(t)}",
        ),
        _ev(
            "kv_xfer_failure_share",
            t.failure_share,
            ">",
            cfg.transfer_failure_share_min,
            failing,
            "ratio",
            f"{fmt_value(t.failures)} failed of {fmt_value((t.failures or 0.0) + t.transfers)}",
        ),
        _ev(
            "kv_expired",
            t.expired,
            ">",
            0.0,
            expired,
            note="requests whose KV lease expired on the prefill side, increase in window",
        ),
    )


def _expired(t: TransferFacts) -> tuple[SubCause, str, float, float]:
    """``kv_expired``: its summary, margin and observations."""
    summary = (
        f"Transfer-bound (KV expired): {t.expired:.0f} request(s) lost the KV the prefill "
        "side held for them before the decode side read it (the lease ran out): the "
        "decode pool fetches too late"
    )
    return SubCause.KV_EXPIRED, summary, 0.6 + 0.4 * min(1.0, (t.expired or 0.0) / 5.0), math.inf


def _failing(t: TransferFacts, cfg: DiagnosisConfig) -> tuple[SubCause, str, float, float]:
    """``transfer_failures``: its summary, margin and observations."""
    summary = (
        f"Transfer-bound (failures): {t.failures:.0f} of "
        f"{(t.failures or 0.0) + t.transfers:.0f} KV transfers failed "
        f"({fmt_value(t.failure_share, 'ratio')}): each such request errors or is "
        "prefilled again on the decode side"
    )
    margin = breach_margin((t.failure_share or 0.0) / cfg.transfer_failure_share_min)
    return SubCause.TRANSFER_FAILURES, summary, margin, (t.failures or 0.0) + t.transfers


def _slow(
    t: TransferFacts, breach: Breach, slo: Slo, ttft: str
) -> tuple[SubCause, str, float, float]:
    """``slow_transfer``: its summary, margin and observations."""
    summary = (
        f"Transfer-bound: TTFT p99 {ttft} > {fmt_value(slo.ttft_p99, 's')}, "
        f"{fmt_value(t.share, 'ratio')} of the wait for a first token is the KV "
        f"transfer from the prefill pool (mean {fmt_value(t.xfer_mean, 's')}, "
        f"{mb_per_s(t)})"
    )
    decisive = min(1.0, abs((t.share or 0.0) - 0.5) * 2)
    ratio = (breach.evidence.value or 0.0) / slo.ttft_p99
    margin = breach_margin(ratio) * (0.75 + 0.25 * decisive) * (1.0 if breach.proven else 0.7)
    return SubCause.SLOW_TRANSFER, summary, margin, t.transfers if t.transfers > 0 else math.inf
