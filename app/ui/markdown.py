"""The Markdown incident summary the incident review exports (pure).

Times, the resolution and the impact (``app.ui.spikes``), peaks, the class sequence, what
changed against the stream's healthy baseline, the evidence and hints of the diagnosis
(at the peak, or at a surge's height), and the alerts that changed state.
It reads as written when pasted into GitHub, Slack or a wiki: each value is escaped for
the place it goes (``app.read.markdown_text``), so ``TTFT p99 7.28 s > 2.00 s
(waiting avg 1,332)`` and ``queue_bound`` carry no entities or backslashes. Names that
come from outside (target, model, source) are code spans, so a model named
``<img src=x onerror=alert(1)>`` or ``[x](http://evil)`` stays text in any renderer;
prose that quotes them (an alert's summary) has what would start a link, a tag or
emphasis escaped.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.diagnose.records import Diagnosis, fmt_value
from app.read.alertfeed import AlertRow, alert_summary
from app.read.markdown_text import cell, code, text
from app.ui import palette
from app.ui.figures import utc
from app.ui.spikes import (
    Spike,
    diagnosis_heading,
    duration_text,
    impact_text,
    resolution_text,
)


def _row(*cells: str) -> str:
    """A table row of inline Markdown cells."""
    return "| " + " | ".join(cell(c) for c in cells) + " |"


def _unit(signal: str) -> str:
    return "TTFT p99" if signal == "ttft" else "ITL p99"


def incident_markdown(
    spike: Spike,
    *,
    diagnosis: Diagnosis | None,
    alerts: Sequence[AlertRow],
    source: str,
) -> str:
    """The summary of one spike, ready to paste into an incident ticket."""
    lines = [
        f"# Incident: {code(spike.model_name)} on {code(spike.target)}",
        "",
        f"- **When:** {utc(spike.start)} – {utc(spike.end)} UTC "
        f"({duration_text(spike.end - spike.start)})",
        f"- **Resolution:** {text(resolution_text(spike))}",
        f"- **Impact:** {text(impact_text(spike))}",
        f"- **Dominant class:** {text(palette.label(spike.dominant))} ({code(spike.dominant)})",
        f"- **Source:** {code(source)}",
        "",
        *_peaks(spike),
        *_sequence(spike),
    ]
    if diagnosis is not None:
        lines += _diagnosis(diagnosis, diagnosis_heading(spike))
    lines += _alerts(alerts)
    return "\n".join(lines) + "\n"


def _peaks(spike: Spike) -> list[str]:
    """The peaks of each signal: value, time, SLO, baseline and why it counts."""
    lines = [
        "## Peaks",
        "",
        "| signal | peak | at (UTC) | SLO | baseline | why it counts |",
        "|---|---|---|---|---|---|",
    ]
    for p in spike.peaks:
        base = "n/a" if p.baseline is None else fmt_value(p.baseline, "s")
        lines.append(
            _row(
                _unit(p.signal),
                text(fmt_value(p.value, "s", p.ge)),
                utc(p.at),
                text(fmt_value(p.slo, "s")),
                text(base),
                text(p.reason),
            )
        )
    if any(p.ge for p in spike.peaks):
        lines += ["", "A ≥ value is a lower bound: the rank fell above the highest bucket."]
    return lines


def _sequence(spike: Spike) -> list[str]:
    """The classes the spike's windows went through, in order."""
    lines = ["", "## Class sequence", "", "| from (UTC) | to (UTC) | class | windows |"]
    lines.append("|---|---|---|---|")
    for r in spike.runs:
        lines.append(
            _row(utc(r.start), utc(r.end), text(palette.label(r.cls, r.sub_cause)), str(r.windows))
        )
    return lines


def _diagnosis(d: Diagnosis, heading: str) -> list[str]:
    """The incident's diagnosis: class, what changed, evidence, what to change."""
    lines = [
        "",
        f"## {text(heading)} ({utc(d.start)} – {utc(d.end)} UTC)",
        "",
        f"**{text(palette.label(str(d.cls), d.sub_cause))}** "
        f"(confidence {d.confidence:.2f}): {text(d.summary)}",
        "",
    ]
    if d.changes:
        lines += [
            "### What changed",
            "",
            "| against the healthy baseline | explains |",
            "|---|---|",
        ]
        for c in d.changes:
            share = f"{c.share:.0%}" if c.share > 0 else "none"
            lines.append(_row(text(c.text()), share))
        lines.append("")
    lines += _evidence(d)
    lines += ["", "### What to change", ""]
    if d.hints:
        for i, h in enumerate(d.hints, 1):
            lines.append(f"{i}. **{text(h.title)}**: {text(h.action)}. Why: {text(h.why)}")
            if h.effect is not None:
                lines.append(f"   - {text(h.effect.text())} (the what-if twin)")
    else:
        lines.append("Nothing to change.")
    if d.roofline is not None:
        lines += ["", f"Roofline: {text(d.roofline.text())}"]
    return lines


def _evidence(d: Diagnosis) -> list[str]:
    """The evidence of the diagnosis' own rule (all of it when that rule has none)."""
    lines = [
        "### Evidence",
        "",
        "| rule | signal | value | threshold | holds |",
        "|---|---|---|---|---|",
    ]
    rule = str(d.cls)
    chosen = [e for e in d.evidence if e.rule == rule] or list(d.evidence)
    for e in chosen:
        threshold = "" if e.threshold is None else f"{e.op} {fmt_value(e.threshold, e.unit)}"
        holds = {True: "yes", False: "no", None: "unknown"}[e.holds]
        lines.append(
            _row(
                text(e.rule),
                text(e.signal),
                text(fmt_value(e.value, e.unit, e.ge)),
                text(threshold),
                holds,
            )
        )
    return lines


def _alerts(alerts: Sequence[AlertRow]) -> list[str]:
    """The alerts that changed state in the range, oldest first."""
    lines = ["", "## Alerts", ""]
    if not alerts:
        return [*lines, "No alert changed state in this range."]
    lines += ["| at (UTC) | alert | state | severity | summary |", "|---|---|---|---|---|"]
    for a in sorted(alerts, key=lambda a: a.at):
        lines.append(
            _row(utc(a.at), text(a.name), text(a.state), text(a.severity), text(alert_summary(a)))
        )
    return lines
