"""Readable text for a diagnosis: what on-call reads at 3 a.m. (pure; the CLI prints it)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from app.diagnose.classes import DiagnosisClass, situation
from app.diagnose.records import BaselineInfo, Change, Diagnosis, Evidence, fmt_value

_HEADLINE = ("ttft_p99", "itl_p99", "kv_usage_max", "preemptions", "waiting_avg")


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def _evidence_lines(evidence: Sequence[Evidence], rule: str) -> list[str]:
    return [f"    {e.text()}" for e in evidence if e.rule == rule]


def change_sentence(
    changes: Sequence[Change], baseline: BaselineInfo | None, *, no_history: str = ""
) -> str:
    """What a problem window's summary says changed: the headline change against the
    healthy baseline, or why there is none to compare with."""
    if baseline is None:
        return f"no baseline: {no_history or 'no history of the stream to compare with'}"
    if not baseline.enough:
        return baseline.lacking()
    short = f" ({baseline.label})" if baseline.short else ""
    if changes and changes[0].share > 0:
        return f"what changed{short}: {changes[0].text()}"
    if baseline.short:
        return f"no change since the {baseline.label} explains it"
    return "no change since the healthy baseline explains it"


def render(d: Diagnosis, *, verbose: bool = False) -> str:
    """Class, summary, evidence and hints.

    Evidence: of the primary class, of the secondary findings, and of data quality when
    it failed; every rule's with ``verbose``.
    """
    lines = [
        f"{d.model_name} @ {d.target}  [{_when(d.start)} – {_when(d.end)} UTC]",
        f"  class: {d.label}  (confidence {d.confidence:.2f})",
        f"  {d.summary}",
        f"  TTFT p99 {fmt_value(d.ttft_p99, 's', d.ttft_p99_ge)} (SLO "
        f"{fmt_value(d.slo_ttft_p99, 's')}) · ITL p99 {fmt_value(d.itl_p99, 's', d.itl_p99_ge)} "
        f"(SLO {fmt_value(d.slo_itl_p99, 's')})",
    ]
    if d.secondary:
        lines.append("  also:")
        lines += [f"    - {situation(f.cls, f.sub_cause)}: {f.summary}" for f in d.secondary]
    lines.append("  evidence:")
    if d.cls is DiagnosisClass.HEALTHY and not verbose:
        # Nothing fired: the headline comparisons, each once.
        firsts = {e.signal: e for e in reversed(d.evidence) if e.signal in _HEADLINE}
        lines += [f"    {firsts[s].text()}" for s in _HEADLINE if s in firsts]
    rules = list(dict.fromkeys(e.rule for e in d.evidence))
    wanted = {d.cls.value, *(f.cls.value for f in d.secondary)}
    no_data = DiagnosisClass.INSUFFICIENT_DATA.value
    if any(e.rule == no_data and e.holds is False for e in d.evidence):
        wanted.add(no_data)
    shown = rules if verbose else [r for r in rules if r in wanted]
    for rule in shown:
        lines.append(f"   [{rule}]")
        lines += _evidence_lines(d.evidence, rule)
    if d.changes:
        against = "the healthy baseline" if d.baseline is None else d.baseline.label
        lines.append(f"  what changed (against {against}, most of the symptom first):")
        for c in d.changes:
            share = f"explains {c.share:.0%}" if c.share > 0 else "explains none of it"
            lines.append(f"    - {c.text()} ({share})")
    if d.missing:
        lines.append(f"  signals not on the page: {', '.join(d.missing)}")
    for note in d.notes:
        lines.append(f"  note: {note}")
    if d.hints:
        lines.append("  what to change (most useful first):")
        for i, h in enumerate(d.hints, 1):
            lines.append(f"    {i}. {h.title}: {h.action}")
            lines.append(f"       why: {h.why}")
    return "\n".join(lines)
