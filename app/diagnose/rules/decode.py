"""``decode_bound``: the per-token latency p99 over the ITL SLO, with its sub-cause — a
tail of slow steps while prefill chunks run (``prefill_interference``), every step slow
(``bandwidth_bound``), or speculative decoding that stopped multiplying the tokens per
step (``spec_decode_regression``).

With speculative decoding on, one output event carries 1 + accepted draft tokens, so
ITL measures gaps between events: decode speed is judged on TPOT (or ITL / (1 + accepted
per draft) where the page has no TPOT; ``latency.decode_breach``), and a healthy
speculating server is not decode-bound. ``spec_decode_regression`` when restoring the
baseline's acceptance would bring the per-token p99 within the SLO, or, without a
baseline, when fewer than ``spec_accepted_per_draft_low`` draft tokens are accepted per
draft (the drafter mostly misses); otherwise interference or bandwidth, as without
speculation.
"""

from __future__ import annotations

from app.diagnose.classes import DiagnosisClass, SubCause
from app.diagnose.config import DiagnosisConfig
from app.diagnose.facts import Facts
from app.diagnose.records import Evidence, fmt_value
from app.diagnose.rules.compare import beside_baseline, evidence, itl_text
from app.diagnose.rules.inputs import Inputs
from app.diagnose.rules.latency import speculating
from app.diagnose.rules.result import RuleResult, breach_margin

__all__ = ["decode_bound"]

C = DiagnosisClass


def decode_bound(x: Inputs) -> RuleResult:
    """Per-token latency p99 over the ITL SLO; the sub-cause from speculative decoding's
    acceptance, the shape of ITL and the size of steps."""
    f, cfg, slo, breach = x.facts, x.config, x.slo, x.decode
    r = C.DECODE_BOUND
    ev = [breach.evidence]
    sub, sub_ev = _spec_sub_cause(x)
    if sub is None:
        sub, sub_ev2 = _decode_sub_cause(f, cfg)
        sub_ev += sub_ev2
    ev.extend(sub_ev)
    value = breach.evidence.value
    shown = fmt_value(value, "s", breach.evidence.ge)
    if sub is SubCause.SPEC_DECODE_REGRESSION:
        accepted = f.derived.spec_decode_accepted_per_draft
        stat = "mean" if breach.evidence.signal == "itl_mean_per_token" else "p99"
        summary = (
            f"Decode-bound (speculative decoding): per-token {stat} {shown} > "
            f"{fmt_value(slo.itl_p99, 's')} with {fmt_value(accepted)} accepted draft tokens "
            "per step: speculation no longer multiplies the tokens each step yields"
        )
    elif sub is SubCause.PREFILL_INTERFERENCE:
        summary = (
            f"Decode-bound (prefill interference): ITL p99 {itl_text(f)} > "
            f"{fmt_value(slo.itl_p99, 's')} while p50 is {fmt_value(f.itl_p50, 's')}: "
            "prefill chunks stall the running streams"
        )
    else:
        summary = (
            f"Decode-bound (memory bandwidth): ITL p50 {fmt_value(f.itl_p50, 's')}, p99 "
            f"{itl_text(f)} > {fmt_value(slo.itl_p99, 's')}: every decode step is slow"
        )
    margin = breach_margin((value or 0.0) / slo.itl_p99) * (1.0 if breach.proven else 0.7)
    n = f.tpot_n if breach.evidence.signal == "tpot_p99" else f.itl_n
    return RuleResult(r, breach.holds, tuple(ev), summary, margin, n, sub)


def _spec_sub_cause(x: Inputs) -> tuple[SubCause | None, list[Evidence]]:
    """``spec_decode_regression`` or None (not speculating, or acceptance is not it)."""
    f, cfg, base = x.facts, x.config, x.baseline
    accepted = f.derived.spec_decode_accepted_per_draft
    if not speculating(f) or accepted is None:
        return None, []
    r = C.DECODE_BOUND
    before = None if base is None else base.spec_decode_accepted_per_draft
    value = x.decode.evidence.value
    if before is not None and value is not None:
        # The per-token latency had each step yielded as many tokens as in the baseline.
        restored = value * (1.0 + accepted) / (1.0 + before)
        holds = before > accepted and restored <= x.slo.itl_p99
        ev = [
            beside_baseline(r, "spec_decode_accepted_per_draft", accepted, before),
            evidence(
                r,
                "per_token_p99_at_baseline_acceptance",
                restored,
                "<=",
                x.slo.itl_p99,
                holds,
                "s",
                note="p99 × (1 + accepted now) / (1 + accepted before)",
            ),
        ]
    else:
        holds = accepted < cfg.spec_accepted_per_draft_low
        ev = [
            evidence(
                r,
                "spec_decode_accepted_per_draft",
                accepted,
                "<",
                cfg.spec_accepted_per_draft_low,
                holds,
                note="accepted draft tokens per draft (mean acceptance length − 1)",
            )
        ]
    return (SubCause.SPEC_DECODE_REGRESSION if holds else None), ev


def _decode_sub_cause(f: Facts, cfg: DiagnosisConfig) -> tuple[SubCause, list[Evidence]]:
    """Interference when prefill ran in the window and either the ITL tail is far above
    the median or the typical step already carries a chunk; otherwise bandwidth."""
    r = C.DECODE_BOUND
    ev: list[Evidence] = []
    tail = None
    if f.itl_p50 and f.itl_p99 is not None:
        tail_ratio = f.itl_p99 / f.itl_p50
        tail = tail_ratio >= cfg.itl_tail_ratio
        ev.append(
            evidence(
                r,
                "itl_p99/p50",
                tail_ratio,
                ">=",
                cfg.itl_tail_ratio,
                tail,
                note="a tail of slow steps, not every step",
            )
        )
    prefill = None if f.computed_prompt_tokens is None else f.computed_prompt_tokens > 0
    ev.append(
        evidence(
            r,
            "computed_prompt_tokens",
            f.computed_prompt_tokens,
            ">",
            0.0,
            prefill,
            "tokens",
            note="prefill ran while streams decoded",
        )
    )
    batch = max(f.running_avg or 0.0, 1.0)
    chunk_floor = cfg.step_chunk_ratio * batch
    big_steps = heavy_median = None
    if f.step_p99 is not None:
        big_steps = f.step_p99 >= chunk_floor
        heavy_median = f.step_p50 is not None and f.step_p50 >= chunk_floor
        ev.append(
            evidence(
                r,
                "step_tokens_p99",
                f.step_p99,
                ">=",
                chunk_floor,
                big_steps,
                "tokens",
                note=f"{cfg.step_chunk_ratio:g} × running: steps carry prefill chunks",
            )
        )
        ev.append(
            evidence(
                r,
                "step_tokens_p50",
                f.step_p50,
                ">=",
                chunk_floor,
                heavy_median,
                "tokens",
                note="the typical step carries a chunk",
            )
        )
    chunks = bool(prefill) and big_steps is not False
    interference = chunks and bool(tail or heavy_median)
    return (SubCause.PREFILL_INTERFERENCE if interference else SubCause.BANDWIDTH_BOUND), ev
