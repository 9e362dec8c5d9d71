"""The review as Markdown (for an incident document) or JSON. Pure string building.

The Markdown reads as written when pasted (``app.read.markdown_text``): model and
target names, the source and the selector are code spans, so a model named
``[x](http://evil)`` or ``<img src=x>`` stays text; prose (summaries, evidence, hints,
alert summaries) escapes only what would start markup where it stands.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from app.diagnose.records import fmt_value
from app.read.markdown_text import cell, code, text
from app.read.review.report import Review, StreamReview

__all__ = ["to_json", "to_markdown"]


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def _clock(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%H:%M:%S")


def _s(value: float | None, ge: bool = False) -> str:
    return fmt_value(value, "s", ge)


def to_json(review: Review, *, with_diagnoses: bool = False) -> str:
    return json.dumps(review.to_dict(with_diagnoses=with_diagnoses), indent=2)


def to_markdown(review: Review) -> str:
    """The report as Markdown: summary table, then per stream timeline, spikes, findings."""
    lines = [
        f"# phasewatch review: {_when(review.start)} – {_when(review.end)} UTC",
        "",
        f"Source: Prometheus {code(review.source)}"
        + (f", selector {code(review.selector)}" if review.selector else "")
        + f". Windows of {review.window:g} s every {review.step:g} s; a window is named by "
        "its end time.",
        "",
    ]
    for note in review.notes:
        lines += [f"> {text(note)}", ""]
    if not review.streams:
        lines += ["No vLLM series matched in this range.", ""]
        return "\n".join(lines)
    lines += [
        "## Summary",
        "",
        "| stream | windows | problem windows | classes seen | TTFT p99 spikes | ITL p99 spikes |",
        "|---|---|---|---|---|---|",
    ]
    for s in review.streams:
        classes = text(", ".join(dict.fromkeys(r.label for r in s.timeline)))
        n_ttft = sum(1 for x in s.spikes if x.signal == "ttft_p99")
        n_itl = sum(1 for x in s.spikes if x.signal == "itl_p99")
        lines.append(
            f"| {cell(_stream(s))} | {s.windows} | {s.problem_windows} | {classes} | "
            f"{n_ttft} | {n_itl} |"
        )
    lines.append("")
    for s in review.streams:
        lines += _stream_section(s, review.window)
    lines += _alerts_section(review)
    return "\n".join(lines)


def _stream(s: StreamReview) -> str:
    return f"{code(s.model_name)} @ {code(s.target)}"


def _stream_section(s: StreamReview, length: float) -> list[str]:
    lines = [f"## {_stream(s)}", "", "### Timeline", ""]
    lines += [
        "| windows ending | class | windows | TTFT p99 max | ITL p99 max |",
        "|---|---|---|---|---|",
    ]
    for r in s.timeline:
        span = (
            _clock(r.first_end)
            if r.windows == 1
            else (f"{_clock(r.first_end)} → {_clock(r.last_end)}")
        )
        lines.append(
            f"| {span} | **{cell(text(r.label))}** | {r.windows} | {_s(r.ttft_p99_max)} | "
            f"{_s(r.itl_p99_max)} |"
        )
    lines += ["", "### p99 spikes", ""]
    base = (
        f"Baselines (median p99 over the range): TTFT {_s(s.baseline_ttft_p99)}, "
        f"ITL {_s(s.baseline_itl_p99)}."
    )
    if not s.spikes:
        lines += [f"None: no window over its SLO or far over the baseline. {base}", ""]
    else:
        lines += [
            base,
            "",
            "| windows ending | signal | peak | at | SLO | over | class at peak |",
            "|---|---|---|---|---|---|---|",
        ]
        for x in s.spikes:
            span = (
                _clock(x.first_end)
                if x.first_end == x.last_end
                else (f"{_clock(x.first_end)} → {_clock(x.last_end)}")
            )
            over = {"slo": "SLO", "baseline": "baseline", "slo+baseline": "SLO and baseline"}
            lines.append(
                f"| {span} | {x.signal} | {_s(x.peak, x.peak_ge)} | {_clock(x.peak_end)} | "
                f"{_s(x.slo)} | {over[x.reason]} | {cell(text(x.class_at_peak))} |"
            )
        lines.append("")
    for f in s.findings:
        d = f.diagnosis
        lines += [
            f"### {text(f.run.label)}: {_clock(f.run.first_end)} → {_clock(f.run.last_end)}",
            "",
            f"{text(d.summary, line_start=True)} (window ending {_clock(d.end)}, "
            f"confidence {d.confidence:.2f})",
            "",
            "Evidence:",
            "",
        ]
        lines += [f"- {text(e.text())}" for e in d.evidence if e.rule == d.cls.value]
        if d.notes:
            lines += [f"- note: {text(n)}" for n in d.notes]
        if d.hints:
            lines += ["", "What to change (most useful first):", ""]
            for i, h in enumerate(d.hints, 1):
                lines.append(f"{i}. **{text(h.title)}**: {text(h.action)} — {text(h.why)}")
                if h.effect is not None:
                    lines.append(f"   - {text(h.effect.text())} (the what-if twin)")
        lines.append("")
    return lines


def _alerts_section(review: Review) -> list[str]:
    lines = ["## Alerts that would have fired", ""]
    if review.alerts is None:
        return [*lines, "Not evaluated: no alert rules were available to this review.", ""]
    if not review.alerts:
        return [*lines, "None.", ""]
    lines += ["| alert | severity | stream | from | to | summary |", "|---|---|---|---|---|---|"]
    for a in review.alerts:
        to = "firing at the end" if a.ends_at is None else _when(a.ends_at)
        lines.append(
            f"| {cell(text(a.name))} | {cell(text(a.severity))} | "
            f"{cell(code(a.model_name))} @ {cell(code(a.target))} | "
            f"{_when(a.starts_at)} | {to} | {cell(text(a.summary))} |"
        )
    lines.append("")
    return lines
