"""``stalled``: requests in the engine and no progress of any kind for the whole window.

Every engine step emits a token for each decoding sequence and is observed once in
``vllm:iteration_tokens_total`` (docs/concepts.md, "Two programs on one GPU", "Fitting a
server's step time"), so requests that sit in the batch through a window with no step
are not a load problem: the engine core does not step. The gauges are then frozen at the
last step's values (vLLM sets them from the engine's outputs), so the load rules'
readings of them are not findings.
"""

from __future__ import annotations

from app.diagnose.classes import DiagnosisClass
from app.diagnose.records import fmt_value
from app.diagnose.rules.compare import all_of, evidence
from app.diagnose.rules.inputs import Inputs
from app.diagnose.rules.result import RuleResult

__all__ = ["stalled"]

C = DiagnosisClass


def stalled(x: Inputs) -> RuleResult:
    """Requests in the engine and no progress of any kind for the whole window.

    Progress is anything an engine step produces: a first token, a token gap, a
    generated or prompt token, a finished request, and — where the page counts them —
    an engine step (``vllm:iteration_tokens_total`` is observed once per step). Counters
    present and unchanged are evidence; a counter the page does not carry is left out
    (neither for nor against). The running, waiting and KV gauges must not have moved
    either: vLLM sets them from the engine's outputs, so a gauge that moved proves the
    core emitted some (a step still in flight, not a hang). Scrapes that failed cannot
    prove a stall: data quality decides first (``classify``). One step longer than the
    window (a huge prefill chunk on a CPU) reads the same as a hang; a longer window
    tells them apart.
    """
    f = x.facts
    r = C.STALLED
    present = _max_known(f.running_max, f.waiting_max)
    requests = None if present is None else present > 0
    ev = [
        evidence(
            r,
            "requests_in_engine",
            present,
            ">",
            0.0,
            requests,
            note="running or waiting, the largest sample (frozen at the last step's values)",
        )
    ]
    progress: list[tuple[str, float | None, str]] = [
        ("first_tokens", f.ttft_n, "TTFT observations"),
        ("token_gaps", f.itl_n, "ITL observations"),
        ("generation_tokens", f.generation_tokens, "increase"),
        ("prompt_tokens", f.prompt_tokens, "increase"),
        ("finished_requests", f.finished, "increase, every finish reason"),
    ]
    if f.steps_counted:
        progress.append(("engine_steps", f.step_n, "vllm:iteration_tokens_total count"))
    for name, value, note in progress:
        if value is not None:
            ev.append(evidence(r, name, value, "=", 0.0, value == 0, note=note))
    frozen = f.gauges_frozen
    ev.append(
        evidence(
            r,
            "gauges_frozen",
            None if frozen is None else float(frozen),
            "=",
            None if frozen is None else 1.0,
            frozen,
            note="running, waiting and KV usage: every sample the same (1 = yes)",
        )
    )
    moved = [e.holds for e in ev[1:]]
    holds = all_of((requests, *moved))
    ev.append(
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
        )
    )
    what = "no engine step, " if f.steps_counted else ""
    summary = (
        f"Stalled: {fmt_value(present)} request(s) in the engine and {what}no token and no "
        f"finished request for the whole {f.covered:.0f} s window: the engine core is not "
        "stepping (a hang, not load)"
    )
    return RuleResult(r, holds, tuple(ev), summary, 1.0)


def _max_known(*values: float | None) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None
