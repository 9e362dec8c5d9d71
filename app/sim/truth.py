"""Ground truth: where each interval's time went, and the class that follows from it.

Computed from the engine's own per-request and per-step accounting, never from the
exported metrics, and sharing no code with the diagnosis engine. Every field of an
``Account`` except the ``*_p50``/``*_p99`` read-outs is additive, so the accounts of
consecutive intervals can be summed into any window and classified with the same rule
(``merge`` + ``classify``), which is what a window-by-window evaluation should do.

Request-seconds (Little's law: the integral over the interval of how many requests are in
each state):

* ``rs_slot``    waiting for a batch slot: the queue is held up by ``max_num_seqs`` or the
  per-step token budget;
* ``rs_kv``      waiting for KV blocks (the queue head's first chunk does not fit), or
  preempted and waiting / recomputing;
* ``rs_prefill`` admitted, prompt not finished (first token not yet out);
* ``rs_decode``  streaming output tokens.

SLO judgements (p99 over SLO <=> more than 1 % of the judged items are over it):

* TTFT: each request is judged once, as "over" the moment its age passes the TTFT SLO
  without a first token (so a queue that serves nobody is still seen), else as "ok" at its
  first token;
* ITL: every inter-token gap is judged at the token; gaps that end a preemption
  stall (recompute) are counted apart;
* per request, when it finishes (for SLO attainment and goodput, not for the class):
  ``tpot_ok`` its time per output token is within the TPOT SLO (``slo.tpot_s``, default
  the ITL SLO), ``good`` its TTFT and its TPOT both are (DistServe's goodput).

``classify`` (first match wins):

1. ``idle``           no request in the system and no step in the interval;
2. ``kv_pressure``    a preemption happened (a user-visible stall plus recompute), or ITL
                      is over SLO and at least half the slow gaps are preemption stalls;
3. TTFT over SLO      the largest of rs_slot / rs_kv / rs_prefill names the class:
                      ``queue_bound`` / ``kv_pressure`` / ``prefill_bound``;
4. ``decode_bound``   ITL over SLO;
5. ``healthy``        otherwise (within both SLOs; a short queue that does not break the
                      TTFT SLO is not a bottleneck).

TTFT causes come before ITL: when prompts are stuck, slow streaming is a side effect (the
same long prompt chunks that delay the first token also stretch the steps).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from app.sim.scheduler import Request

P99_SHARE = 0.01

ADDITIVE = (
    "duration_s",
    "arrivals",
    "rejected",
    "finished",
    "first_tokens",
    "ttft_ok",
    "ttft_over",
    "itl_n",
    "itl_over",
    "itl_stall_over",
    "itl_sum_s",
    "tpot_ok",
    "good",
    "rs_slot",
    "rs_kv",
    "rs_prefill",
    "rs_decode",
    "preemptions",
    "steps",
    "busy_s",
    "kv_usage_s",
    "prompt_tokens",
    "generation_tokens",
)


@dataclass
class Account:
    """One interval's (or a merged window's) accounting."""

    t0: float
    t1: float
    duration_s: float = 0.0
    arrivals: int = 0
    rejected: int = 0
    finished: int = 0
    first_tokens: int = 0
    ttft_ok: int = 0
    ttft_over: int = 0
    itl_n: int = 0
    itl_over: int = 0
    itl_stall_over: int = 0
    itl_sum_s: float = 0.0
    tpot_ok: int = 0
    good: int = 0
    rs_slot: float = 0.0
    rs_kv: float = 0.0
    rs_prefill: float = 0.0
    rs_decode: float = 0.0
    preemptions: int = 0
    steps: int = 0
    busy_s: float = 0.0
    kv_usage_s: float = 0.0
    kv_usage_max: float = 0.0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    ttft_p50_s: float | None = None
    ttft_p99_s: float | None = None
    itl_p50_s: float | None = None
    itl_p99_s: float | None = None


@dataclass(frozen=True, slots=True)
class Verdict:
    cls: str
    reason: str
    ambiguous: bool


def _over(over: int, n: int) -> bool:
    return n > 0 and over > P99_SHARE * n


def classify(a: Account) -> Verdict:
    """The truth class of an account (rules in the module docstring)."""
    in_system = a.rs_slot + a.rs_kv + a.rs_prefill + a.rs_decode
    if a.steps == 0 and a.arrivals == 0 and in_system == 0:
        return Verdict("idle", "no requests", False)
    n_ttft = a.ttft_ok + a.ttft_over
    ttft_bad = _over(a.ttft_over, n_ttft)
    itl_bad = _over(a.itl_over, a.itl_n)
    near_ttft = _near(a.ttft_over, n_ttft)
    near_itl = _near(a.itl_over, a.itl_n)
    if a.preemptions > 0:
        return Verdict("kv_pressure", f"{a.preemptions} preemption(s)", a.preemptions == 1)
    if itl_bad and 2 * a.itl_stall_over >= a.itl_over:
        return Verdict("kv_pressure", "slow tokens are preemption stalls", near_itl)
    if ttft_bad:
        causes = {"queue_bound": a.rs_slot, "kv_pressure": a.rs_kv, "prefill_bound": a.rs_prefill}
        ranked = sorted(causes.items(), key=lambda kv: kv[1], reverse=True)
        (top, top_v), (_, second_v) = ranked[0], ranked[1]
        total = sum(causes.values()) or 1.0
        close = second_v > 0.8 * top_v or n_ttft < 5
        share = ", ".join(f"{k} {v / total:.0%}" for k, v in ranked)
        return Verdict(
            top,
            f"TTFT over SLO ({a.ttft_over}/{n_ttft}); time before first token: {share}",
            near_ttft or close,
        )
    if itl_bad:
        return Verdict("decode_bound", f"ITL over SLO ({a.itl_over}/{a.itl_n} gaps)", near_itl)
    return Verdict("healthy", "within SLOs", near_ttft or near_itl)


def _near(over: int, n: int) -> bool:
    """The p99 sits close to the SLO: the share over it is within 0.5 %..2 %."""
    return n > 0 and 0.5 * P99_SHARE * n <= over <= 2 * P99_SHARE * n


def merge(accounts: Iterable[Account]) -> Account:
    """Sum consecutive accounts into one window (quantile read-outs are dropped)."""
    items = list(accounts)
    if not items:
        raise ValueError("nothing to merge")
    out = Account(items[0].t0, items[-1].t1)
    for a in items:
        for name in ADDITIVE:
            setattr(out, name, getattr(out, name) + getattr(a, name))
        out.kv_usage_max = max(out.kv_usage_max, a.kv_usage_max)
    return out


def window_truth(rows: Iterable[dict[str, Any]], start: float, end: float) -> Verdict:
    """Classify the window [start, end) from ``truth.jsonl`` rows (unix ``t0``/``t1``)."""
    picked = [account_from_row(r) for r in rows if r["t0"] >= start and r["t1"] <= end]
    if not picked:
        raise ValueError(f"no truth intervals inside [{start}, {end})")
    return classify(merge(picked))


def account_from_row(row: dict[str, Any]) -> Account:
    known = set(Account.__dataclass_fields__)
    return Account(**{k: v for k, v in row.items() if k in known})


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
    ) -> None:
        self.interval = interval_s
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
        self.on_close(a, classify(a))
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
    ) -> None:
        """Request counts per state (and KV usage) held over [t0, t1), split at boundaries."""
        while True:
            a = self.cur.acct
            end = t1 if t1 < self.boundary else self.boundary
            dt = end - t0
            if dt > 0:
                a.rs_slot += slot * dt
                a.rs_kv += kv * dt
                a.rs_prefill += prefill * dt
                a.rs_decode += decode * dt
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

    def itl(self, gap: float, n: int, stall: bool) -> None:
        a = self.cur.acct
        a.itl_n += n
        a.itl_sum_s += gap * n
        if gap > self.itl_slo:
            a.itl_over += n
            if stall:
                a.itl_stall_over += n
        self.cur.itl.append((gap, n))


def row(a: Account, v: Verdict, epoch: float, phase: str, expect: str | None) -> dict[str, Any]:
    """One ``truth.jsonl`` line: unix times, the class, and the accounting behind it."""
    out: dict[str, Any] = {
        "t0": epoch + a.t0,
        "t1": epoch + a.t1,
        "class": v.cls,
        "reason": v.reason,
        "ambiguous": v.ambiguous,
        "phase": phase,
        "expect": expect,
    }
    for k, val in asdict(a).items():
        if k in ("t0", "t1"):
            continue
        out[k] = round(val, 6) if isinstance(val, float) else val
    return out
