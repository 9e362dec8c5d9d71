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
* ``rs_decode``  streaming output tokens;
* ``rs_transfer`` (disaggregated decode instances, ``app.sim.pd``) waiting for the KV
  cache to arrive from a prefill instance over the KV connector.

Transfers (``app.sim.pd``): ``transfers`` that landed, ``transfer_failed`` that failed
(counted where the transfer is started: the decode instance), ``kv_expired`` requests
whose KV a prefill instance held past its lease without the decode side reading it.

SLO judgements (p99 over SLO <=> more than 1 % of the judged items are over it):

* TTFT: each request is judged once, as "over" the moment its age passes the TTFT SLO
  without a first token (so a queue that serves nobody is still seen), else as "ok" at its
  first token;
* ITL: every inter-token gap is judged at the token (one gap per output event, which
  under speculative decoding carries the accepted drafts too); gaps that end a
  preemption stall (recompute), and gaps ending in a step that also computed prompt
  tokens (``itl_over_mixed``), are counted apart;
* per request, when it finishes (for SLO attainment and goodput; for the class only
  under speculative decoding):
  ``tpot_ok`` its time per output token is within the TPOT SLO (``slo.tpot_s``, default
  the ITL SLO), ``good`` its TTFT and its TPOT both are (DistServe's goodput).

``classify`` (first match wins):

1. ``idle``           no request in the system and no step in the interval;
2. ``stalled``        the engine core was hung (``faults.hang``) for more than half of
                      the interval with requests in the system: nothing scheduled,
                      nothing finished (the engine knows it was stuck; no metric is read);
2b. ``transfer_bound`` a request's KV expired on this (prefill) instance, or more than
                      1 % of the transfers this (decode) instance started failed: each
                      such request errors (sub-causes ``kv_expired``,
                      ``transfer_failures``);
3. ``kv_pressure``    a preemption happened (a user-visible stall plus recompute), or ITL
                      is over SLO and at least half the slow gaps are preemption stalls;
4. TTFT over SLO      the largest of rs_slot / rs_kv / rs_prefill / rs_transfer names
                      the class: ``queue_bound`` / ``kv_pressure`` / ``prefill_bound`` /
                      ``transfer_bound`` (``slow_transfer``);
5. ``decode_bound``   ITL over SLO; with speculative decoding (``spec_steps``: decode
                      steps that verified drafts) TPOT over SLO instead, since one
                      output event then carries several tokens and its gap is no
                      per-token latency (the ITL SLO is the TPOT SLO by default);
6. ``healthy``        otherwise (within both SLOs; a short queue that does not break the
                      TTFT SLO is not a bottleneck).

TTFT causes come before ITL: when prompts are stuck, slow streaming is a side effect (the
same long prompt chunks that delay the first token also stretch the steps).

Beside the class, from what the simulator did (never from its metrics):

* ``sub_cause``: the phase's declared one (``Cause``, the scenario's knob) when the class
  is the one the phase was built to show; else, for ``decode_bound``, where the slow
  gaps came from — ``prefill_interference`` when at least half of the gaps over the ITL
  SLO ended in a step that also computed prompt tokens (``itl_over_mixed``),
  ``bandwidth_bound`` when most ended in pure decode steps; else None.
* ``headline_change``: the canonical name (``app.model.DERIVED_SIGNALS``, pinned by a
  test) of what the phase's change moved, for every class but ``healthy`` and ``idle``;
  None without a declared cause (a baseline) or when the window is healthy.

**What a client sees** (``client_class``, a probe's stream): the server's class, unless
the server names no problem (healthy) while the frontend in front of the engine
(``faults.frontend_delay_s``: a proxy, network or tokeniser, ``app.sim.serving``) makes
the larger part of a client's time to first token: ``frontend_bound`` when the delay is
at least ``FRONTEND_GAP_MIN_S`` and more than ``FRONTEND_GAP_SHARE`` of the delay plus
the engine's mean time before a first token (its request-seconds before a first token,
``rs_slot + rs_kv + rs_prefill``, over its first tokens: Little's law). The engine's own
accounting and ``/metrics`` never see the delay; only a probe does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

P99_SHARE = 0.01
# The diagnosis' defaults for frontend_bound (``probing.frontend_gap_min``/``_share``).
FRONTEND_GAP_MIN_S = 0.1
FRONTEND_GAP_SHARE = 0.5

# The diagnosis' class and sub-cause names, spelled here: the simulator imports nothing of
# app.diagnose; tests/test_sim_vocabulary.py ties the two vocabularies.
CLASSES = (
    "healthy",
    "idle",
    "stalled",
    "prefill_bound",
    "decode_bound",
    "queue_bound",
    "kv_pressure",
    "transfer_bound",
)
# What a probe's stream may be besides those (``client_class``).
CLIENT_CLASSES = (*CLASSES, "frontend_bound")
# What a scenario's phase may declare it changed (app.sim.scenario reads ``cause``).
SUB_CAUSES = (
    "long_prompts",
    "prefix_cache_miss",
    "arrival_surge",
    "capacity_loss",
    "spec_decode_regression",
    "bandwidth_bound",
    "prefill_interference",
    "slow_transfer",
    "transfer_failures",
    "kv_expired",
)
HEADLINE_CHANGES = (
    "prefix_cache_hit_rate",
    "prompt_tokens_mean",
    "output_tokens_mean",
    "arrival_rate",
    "completion_rate",
    "spec_decode_acceptance",
    "steps_per_s",
)

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
    "itl_over_mixed",
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
    "stalled_s",
    "spec_steps",
    "kv_usage_s",
    "prompt_tokens",
    "generation_tokens",
    "rs_transfer",
    "transfers",
    "transfer_failed",
    "kv_expired",
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
    itl_over_mixed: int = 0
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
    stalled_s: float = 0.0
    spec_steps: int = 0
    kv_usage_s: float = 0.0
    kv_usage_max: float = 0.0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    rs_transfer: float = 0.0
    transfers: int = 0
    transfer_failed: int = 0
    kv_expired: int = 0
    ttft_p50_s: float | None = None
    ttft_p99_s: float | None = None
    itl_p50_s: float | None = None
    itl_p99_s: float | None = None


@dataclass(frozen=True, slots=True)
class Cause:
    """What a scenario's phase changed, as the scenario declares it: the class it is
    built to show, the sub-cause refining that class (or None) and the canonical name of
    the signal the change moved."""

    cls: str
    sub_cause: str | None
    headline_change: str


@dataclass(frozen=True, slots=True)
class Verdict:
    cls: str
    reason: str
    ambiguous: bool
    sub_cause: str | None = None
    headline_change: str | None = None


def _over(over: int, n: int) -> bool:
    return n > 0 and over > P99_SHARE * n


def classify(a: Account, cause: Cause | None = None) -> Verdict:
    """The truth of an account (rules in the module docstring); ``cause`` is what the
    phase declares it changed."""
    v = _classify(a)
    if cause is not None and cause.sub_cause is not None and v.cls == cause.cls:
        sub: str | None = cause.sub_cause
    elif v.cls == "decode_bound":
        mixed = 2 * a.itl_over_mixed >= a.itl_over
        sub = "prefill_interference" if mixed else "bandwidth_bound"
    elif v.cls == "transfer_bound":
        sub = v.sub_cause
    else:
        sub = None
    quiet = v.cls in ("healthy", "idle")
    headline = None if cause is None or quiet else cause.headline_change
    return Verdict(v.cls, v.reason, v.ambiguous, sub, headline)


def _classify(a: Account) -> Verdict:
    in_system = a.rs_slot + a.rs_kv + a.rs_prefill + a.rs_decode + a.rs_transfer
    if a.steps == 0 and a.arrivals == 0 and in_system == 0:
        return Verdict("idle", "no requests", False)
    if a.stalled_s > 0.5 * a.duration_s:
        return Verdict(
            "stalled",
            f"engine hung {a.stalled_s:.0f} of {a.duration_s:.0f} s with requests in it",
            a.stalled_s < 0.75 * a.duration_s,
        )
    n_ttft = a.ttft_ok + a.ttft_over
    ttft_bad = _over(a.ttft_over, n_ttft)
    itl_bad = _over(a.itl_over, a.itl_n)
    near_ttft = _near(a.ttft_over, n_ttft)
    near_itl = _near(a.itl_over, a.itl_n)
    if a.kv_expired > 0:
        why = f"{a.kv_expired} request(s)' KV expired before the decode side read it"
        return Verdict("transfer_bound", why, a.kv_expired == 1, "kv_expired")
    started = a.transfers + a.transfer_failed
    if _over(a.transfer_failed, started):
        why = f"{a.transfer_failed} of {started} KV transfers failed"
        near = _near(a.transfer_failed, started)
        return Verdict("transfer_bound", why, near, "transfer_failures")
    if a.preemptions > 0:
        return Verdict("kv_pressure", f"{a.preemptions} preemption(s)", a.preemptions == 1)
    if itl_bad and 2 * a.itl_stall_over >= a.itl_over:
        return Verdict("kv_pressure", "slow tokens are preemption stalls", near_itl)
    if ttft_bad:
        causes = {
            "queue_bound": a.rs_slot,
            "kv_pressure": a.rs_kv,
            "prefill_bound": a.rs_prefill,
            "transfer_bound": a.rs_transfer,
        }
        ranked = sorted(causes.items(), key=lambda kv: kv[1], reverse=True)
        (top, top_v), (_, second_v) = ranked[0], ranked[1]
        total = sum(causes.values()) or 1.0
        close = second_v > 0.8 * top_v or n_ttft < 5
        share = ", ".join(f"{k} {v / total:.0%}" for k, v in ranked)
        return Verdict(
            top,
            f"TTFT over SLO ({a.ttft_over}/{n_ttft}); time before first token: {share}",
            near_ttft or close,
            "slow_transfer" if top == "transfer_bound" else None,
        )
    if a.spec_steps:
        # One output event carries the accepted drafts too: its gap is no per-token
        # latency. Judge the tokens by each finished request's TPOT instead.
        over = a.finished - a.tpot_ok
        if _over(over, a.finished):
            why = f"TPOT over SLO ({over}/{a.finished} requests; speculative decoding)"
            return Verdict("decode_bound", why, _near(over, a.finished))
        return Verdict("healthy", "within SLOs", near_ttft or _near(over, a.finished))
    if itl_bad:
        return Verdict("decode_bound", f"ITL over SLO ({a.itl_over}/{a.itl_n} gaps)", near_itl)
    return Verdict("healthy", "within SLOs", near_ttft or near_itl)


def client_class(a: Account, v: Verdict, frontend_delay_s: float) -> str:
    """What a probe of the server sees in the account's span (module docstring)."""
    if v.cls != "healthy" or a.first_tokens <= 0 or frontend_delay_s < FRONTEND_GAP_MIN_S:
        return v.cls
    engine_ttft = (a.rs_slot + a.rs_kv + a.rs_prefill) / a.first_tokens
    share = frontend_delay_s / (frontend_delay_s + engine_ttft)
    return "frontend_bound" if share > FRONTEND_GAP_SHARE else v.cls


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


def window_client_truth(rows: Iterable[dict[str, Any]], start: float, end: float) -> str:
    """What a probe of the server sees over the window [start, end) (``client_class`` of
    the summed rows, with the latest row's frontend delay)."""
    picked = [r for r in rows if r["t0"] >= start and r["t1"] <= end]
    if not picked:
        raise ValueError(f"no truth intervals inside [{start}, {end})")
    acct = merge(account_from_row(r) for r in picked)
    verdict = classify(acct, cause_from_row(picked[-1]))
    return client_class(acct, verdict, float(picked[-1].get("frontend_delay_s") or 0.0))


def window_truth(rows: Iterable[dict[str, Any]], start: float, end: float) -> Verdict:
    """Classify the window [start, end) from ``truth.jsonl`` rows (unix ``t0``/``t1``);
    the declared cause is the latest row's."""
    picked = [r for r in rows if r["t0"] >= start and r["t1"] <= end]
    if not picked:
        raise ValueError(f"no truth intervals inside [{start}, {end})")
    return classify(merge(account_from_row(r) for r in picked), cause_from_row(picked[-1]))


def cause_from_row(row: dict[str, Any]) -> Cause | None:
    """The declared cause a ``truth.jsonl`` row carries (None for a baseline phase)."""
    given = row.get("cause")
    if not given:
        return None
    return Cause(given["class"], given["sub_cause"], given["headline_change"])


def account_from_row(row: dict[str, Any]) -> Account:
    known = set(Account.__dataclass_fields__)
    return Account(**{k: v for k, v in row.items() if k in known})


def row(
    a: Account,
    v: Verdict,
    epoch: float,
    phase: str,
    expect: str | None,
    cause: Cause | None = None,
    frontend_delay_s: float = 0.0,
) -> dict[str, Any]:
    """One ``truth.jsonl`` line: unix times, the class, its sub-cause and headline
    change, the phase's declared cause, the frontend's delay and what a client sees
    (``client_class``), and the accounting behind it."""
    out: dict[str, Any] = {
        "t0": epoch + a.t0,
        "t1": epoch + a.t1,
        "class": v.cls,
        "sub_cause": v.sub_cause,
        "headline_change": v.headline_change,
        "reason": v.reason,
        "ambiguous": v.ambiguous,
        "frontend_delay_s": frontend_delay_s,
        "client_class": client_class(a, v, frontend_delay_s),
        "phase": phase,
        "expect": expect,
        "cause": None
        if cause is None
        else {
            "class": cause.cls,
            "sub_cause": cause.sub_cause,
            "headline_change": cause.headline_change,
        },
    }
    for k, val in asdict(a).items():
        if k in ("t0", "t1"):
            continue
        out[k] = round(val, 6) if isinstance(val, float) else val
    return out
