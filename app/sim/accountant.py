"""The accountant: collects a replica's events into fixed intervals of sim time.

Each closed interval is an ``app.sim.truth.Account``, classified with the phase's
declared cause (``app.sim.truth.classify``) and handed to the engine's callback. What
is counted, and how it is judged: ``app.sim.truth``.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from app.sim.scheduler import Request
from app.sim.truth import Account, Cause, Verdict, classify

__all__ = ["Accountant"]


def _quantiles(values: list[tuple[float, int]]) -> tuple[float | None, float | None]:
    """p50 and p99 of weighted values (value, count), by rank."""
    if not values:
        return None, None
    values.sort()
    n = sum(c for _, c in values)
    out: list[float] = []
    for q in (0.5, 0.99):
        rank, acc = math.ceil(q * n), 0
        for v, c in values:
            acc += c
            if acc >= rank:
                out.append(v)
                break
    return out[0], out[1]


@dataclass
class _Open:
    acct: Account
    ttft: list[tuple[float, int]] = field(default_factory=list)
    itl: list[tuple[float, int]] = field(default_factory=list)


class Accountant:
    """Collects the engine's events into fixed intervals of sim time."""

    def __init__(
        self,
        interval_s: float,
        ttft_slo_s: float,
        itl_slo_s: float,
        on_close: Callable[[Account, Verdict], None],
        tpot_slo_s: float | None = None,
        cause_at: Callable[[float], Cause | None] | None = None,
    ) -> None:
        self.interval = interval_s
        self.cause_at = cause_at
        self.ttft_slo = ttft_slo_s
        self.itl_slo = itl_slo_s
        self.tpot_slo = itl_slo_s if tpot_slo_s is None else tpot_slo_s
        self.on_close = on_close
        self.k = 0
        self.boundary = interval_s
        self.cur = _Open(Account(0.0, interval_s))
        self.deadlines: deque[tuple[float, Request]] = deque()

    def set_slo(self, ttft_s: float, itl_s: float, tpot_s: float | None = None) -> None:
        self.ttft_slo, self.itl_slo = ttft_s, itl_s
        self.tpot_slo = itl_s if tpot_s is None else tpot_s

    def _close(self) -> None:
        b = self.boundary
        a = self.cur.acct
        dl = self.deadlines
        while dl and dl[0][0] <= b:
            d, r = dl.popleft()
            if r.first_token < 0 or r.first_token > d:
                a.ttft_over += 1
        a.duration_s = self.interval
        a.ttft_p50_s, a.ttft_p99_s = _quantiles(self.cur.ttft)
        a.itl_p50_s, a.itl_p99_s = _quantiles(self.cur.itl)
        cause = None if self.cause_at is None else self.cause_at(a.t0)
        self.on_close(a, classify(a, cause))
        self.k += 1
        self.boundary = (self.k + 1) * self.interval
        self.cur = _Open(Account(b, self.boundary))

    def advance(self, t: float) -> None:
        """Close every interval that ends at or before ``t``."""
        while t >= self.boundary:
            self._close()

    def state(
        self,
        t0: float,
        t1: float,
        slot: float,
        kv: float,
        prefill: float,
        decode: float,
        usage: float,
        stalled: bool = False,
        transfer: float = 0.0,
    ) -> None:
        """Request counts per state (and KV usage) held over [t0, t1), split at boundaries;
        ``stalled``: the engine was hung all that time (not busy, stuck); ``transfer``:
        requests waiting for their KV from a prefill instance (``app.sim.pd``)."""
        while True:
            a = self.cur.acct
            end = t1 if t1 < self.boundary else self.boundary
            dt = end - t0
            if dt > 0:
                a.rs_slot += slot * dt
                a.rs_kv += kv * dt
                a.rs_prefill += prefill * dt
                a.rs_decode += decode * dt
                a.rs_transfer += transfer * dt
                if stalled:
                    a.stalled_s += dt
                else:
                    a.busy_s += dt
                a.kv_usage_s += usage * dt
            if usage > a.kv_usage_max:
                a.kv_usage_max = usage
            if t1 < self.boundary:
                return
            t0 = self.boundary
            self._close()

    def arrival(self, r: Request) -> None:
        self.cur.acct.arrivals += 1
        self.deadlines.append((r.arrival + self.ttft_slo, r))

    def first_token(self, ttft: float) -> None:
        a = self.cur.acct
        a.first_tokens += 1
        if ttft <= self.ttft_slo:
            a.ttft_ok += 1
        self.cur.ttft.append((ttft, 1))

    def finished(self, ttft: float, tpot: float) -> None:
        """A request finished: judge its TTFT and TPOT against the SLOs, together."""
        a = self.cur.acct
        tpot_ok = tpot <= self.tpot_slo
        a.tpot_ok += tpot_ok
        a.good += tpot_ok and ttft <= self.ttft_slo

    def itl(self, gap: float, n: int, stall: bool, mixed: bool = False) -> None:
        """``n`` inter-token gaps of ``gap`` s; ``stall``: they end a preemption stall;
        ``mixed``: the step that ended them also computed prompt tokens."""
        a = self.cur.acct
        a.itl_n += n
        a.itl_sum_s += gap * n
        if gap > self.itl_slo:
            a.itl_over += n
            if stall:
                a.itl_stall_over += n
            if mixed:
                a.itl_over_mixed += n
        self.cur.itl.append((gap, n))
