"""``stalled``: requests present and no progress of any kind for the whole window.

Every engine step emits a token for each decoding sequence and is observed once in
``vllm:iteration_tokens_total`` (``docs/concepts.md``, the step time), so requests that
sit in the engine through a whole window (there at its start) with no step, no first
token, no token and no finished request are not a load problem: nothing is served. The
rule reads only progress and presence, never the gauges' motion: a hung engine core
freezes the scheduler's gauges, but a scheduler that keeps admitting while its executor
hangs, or a front end that still counts arrivals, moves them (the waiting gauge climbs)
— whatever they do, a window without progress is a stall, and no capacity advice fits.

What tells a hang from **one step longer than the window** (a huge prefill chunk on a
CPU) is the window's length against the longest step the stream takes, from its step
histogram and step timing in its healthy baseline: a step's time is about the mean
step's (by Little's law, running ÷ generated tokens per second: each running sequence
gets one token a step) scaled by its tokens (the p99 step's tokens over the mean's).
A window no longer than that, with a batch running, may be inside one step: not a stall
yet (``insufficient_data``; a longer window tells). Without a baseline a step is taken
to be shorter than the window (a GPU's longest step is about a second).
"""

from __future__ import annotations

from app.diagnose.classes import DiagnosisClass
from app.diagnose.facts import Facts
from app.diagnose.records import Evidence, fmt_value
from app.diagnose.rules.compare import all_of, evidence
from app.diagnose.rules.inputs import Inputs
from app.diagnose.rules.result import RuleResult
from app.model import Derived

__all__ = ["longest_step", "stalled"]

C = DiagnosisClass


def longest_step(baseline: Derived | None) -> float | None:
    """Seconds the stream's largest steps take, from its healthy ``baseline`` (module
    docstring): running ÷ generated tokens per second (the mean step), × the p99 step's
    tokens over the mean step's. None when the baseline lacks any of them."""
    if baseline is None:
        return None
    running, tokens_s = baseline.running_avg, baseline.generation_tokens_per_s
    p99, mean = baseline.step_tokens_p99, baseline.tokens_per_step_mean
    if not running or not tokens_s or not p99 or not mean or running <= 0 or tokens_s <= 0:
        return None
    return running / tokens_s * max(1.0, p99 / mean)


def stalled(x: Inputs) -> RuleResult:
    """Requests present and, for the whole window, no progress (module docstring).

    Progress is anything an engine step produces: a first token, a token gap, a
    generated or prompt token, a finished request, and — where the page counts them —
    an engine step. Counters present and unchanged are evidence; a counter the page does
    not carry is left out (neither for nor against). Requests are present for the whole
    window when the first running or waiting sample is above 0 (requests that arrive
    later make the next window a stall). Scrapes that failed cannot prove a stall: data
    quality decides first (``classify``).
    """
    f = x.facts
    r = C.STALLED
    present, arrived = _present(f)
    ev = [
        evidence(
            r,
            "requests_in_engine",
            present,
            ">",
            0.0,
            None if present is None else present > 0,
            note=f"running + waiting at the window's start (its whole length); "
            f"{fmt_value(arrived)} arrived in it",
        )
    ]
    requests = ev[0].holds
    progress = _progress(f)
    bound = longest_step(x.baseline)
    within_step = bound is not None and bound >= f.covered and (f.running_max or 0.0) > 0
    ev += [
        *progress,
        _gauges(f),
        evidence(
            r,
            "longest_step_s",
            bound,
            "<",
            None if bound is None else f.covered,
            None if bound is None else not within_step,
            "s",
            note="the baseline's p99 step (running / tokens per s x p99 / mean step tokens) "
            "against the window: longer, and the window may be inside one step",
        ),
        evidence(
            r,
            "seconds_without_progress",
            f.covered,
            "",
            None,
            None,
            "s",
            ge=True,
            note="the whole window: when progress stopped is before it",
        ),
    ]
    still = all_of(e.holds for e in progress)
    if within_step and requests and still:
        summary = (
            f"Insufficient data: no token, step or finished request in {f.covered:.0f} s with "
            f"{fmt_value(f.running_max)} running, but one step here may take up to "
            f"{fmt_value(bound, 's')} (the healthy baseline's largest steps): a longer "
            "window tells a hang from it"
        )
        return RuleResult(r, False, tuple(ev), summary, 1.0)
    holds = all_of((requests, still))
    return RuleResult(r, holds, tuple(ev), _summary(f, present, arrived), 1.0)


def _present(f: Facts) -> tuple[float | None, float]:
    """(requests in the engine at the window's start — its first running and waiting
    samples —, requests that arrived in it). A request that arrived into an idle engine
    mid-window has not waited the whole window. Waiting that is all deferred (its KV
    still on its way, vLLM 0.20+) is a transfer's wait, not a request the engine could
    serve."""
    waiting = f.waiting_first
    rate = f.derived.arrival_rate or 0.0
    deferred = f.derived.waiting_deferred_avg
    if waiting is not None and deferred is not None and deferred >= (f.waiting_avg or 0.0) > 0:
        waiting, rate = 0.0, 0.0  # they arrive into the deferred wait
    known = [v for v in (f.running_first, waiting) if v is not None]
    return (sum(known) if known else None), rate * f.covered


def _progress(f: Facts) -> list[Evidence]:
    """One piece of evidence per progress counter the page carries: unchanged?"""
    counters: list[tuple[str, float | None, str]] = [
        ("first_tokens", f.ttft_n, "TTFT observations"),
        ("token_gaps", f.itl_n, "ITL observations"),
        ("generation_tokens", f.generation_tokens, "increase"),
        ("prompt_tokens", f.prompt_tokens, "increase"),
        ("finished_requests", f.finished, "increase, every finish reason"),
    ]
    if f.steps_counted:
        counters.append(("engine_steps", f.step_n, "vllm:iteration_tokens_total count"))
    return [
        evidence(C.STALLED, name, value, "=", 0.0, value == 0, note=note)
        for name, value, note in counters
        if value is not None
    ]


def _gauges(f: Facts) -> Evidence:
    """Whether the gauges moved: shown, never read (module docstring)."""
    moved = None if f.gauges_frozen is None else float(not f.gauges_frozen)
    return evidence(
        C.STALLED,
        "gauges_moved",
        moved,
        "",
        None,
        None,
        note="running, waiting and KV usage (1 = moved): not read — a scheduler that keeps "
        "admitting, or a front end that counts arrivals, moves them during a hang",
    )


def _summary(f: Facts, present: float | None, arrived: float) -> str:
    what = "no engine step, " if f.steps_counted else ""
    more = ""
    if f.gauges_frozen is False and arrived > 0 and f.waiting_last is not None:
        more = f" ({fmt_value(arrived)} more arrived, waiting now {fmt_value(f.waiting_last)})"
    return (
        f"Stalled: {fmt_value(present)} request(s) in the engine{more} and {what}no token "
        f"and no finished request for the whole {f.covered:.0f} s window: nothing "
        "progresses — the engine core is not stepping (a hang, not load)"
    )
