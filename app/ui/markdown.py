"""The Markdown incident summary the incident review exports (pure).

Times, peaks, the class sequence, what changed against the stream's healthy baseline,
the evidence and hints of the diagnosis at the peak, and the alerts that changed state.
Every value that comes from outside (target and model names, alert labels and
summaries, notes) is escaped: HTML's ``& < >`` become
entities and Markdown's punctuation is backslash-escaped, so a model named
``<script>`` or ``a|b`` stays text in any renderer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from app.diagnose import Diagnosis
from app.diagnose.records import fmt_value
from app.ui import palette
from app.ui.alertfeed import AlertRow
from app.ui.figures import utc
from app.ui.spikes import Spike

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#!|~])")


def esc(text: object) -> str:
    """Text safe inside a Markdown paragraph, list item or table cell."""
    s = " ".join(str(text).split())
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", s)


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    if h:
        return f"{h} h {m} min"
    return f"{m} min {sec} s" if m else f"{sec} s"


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
        f"# Incident: {esc(spike.model_name)} on {esc(spike.target)}",
        "",
        f"- **When:** {utc(spike.start)} – {utc(spike.end)} UTC "
        f"({_duration(spike.end - spike.start)})",
        f"- **Dominant class:** {esc(palette.label(spike.dominant))} (`{spike.dominant}`)",
        f"- **Source:** {esc(source)}",
        "",
        "## Peaks",
        "",
        "| signal | peak | at (UTC) | SLO | baseline | why it counts |",
        "|---|---|---|---|---|---|",
    ]
    for p in spike.peaks:
        base = "n/a" if p.baseline is None else fmt_value(p.baseline, "s")
        lines.append(
            f"| {_unit(p.signal)} | {esc(fmt_value(p.value, 's', p.ge))} | {utc(p.at)} | "
            f"{esc(fmt_value(p.slo, 's'))} | {esc(base)} | {esc(p.reason)} |"
        )
    if any(p.ge for p in spike.peaks):
        lines += ["", "A ≥ value is a lower bound: the rank fell above the highest bucket."]
    lines += ["", "## Class sequence", "", "| from (UTC) | to (UTC) | class | windows |"]
    lines.append("|---|---|---|---|")
    for r in spike.runs:
        lines.append(
            f"| {utc(r.start)} | {utc(r.end)} | {esc(palette.label(r.cls, r.sub_cause))} | "
            f"{r.windows} |"
        )
    if diagnosis is not None:
        d = diagnosis
        lines += [
            "",
            f"## Diagnosis at the peak ({utc(d.start)} – {utc(d.end)} UTC)",
            "",
            f"**{esc(palette.label(str(d.cls), d.sub_cause))}** "
            f"(confidence {d.confidence:.2f}): {esc(d.summary)}",
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
                lines.append(f"| {esc(c.text())} | {share} |")
            lines.append("")
        lines += [
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
                f"| {esc(e.rule)} | {esc(e.signal)} | {esc(fmt_value(e.value, e.unit, e.ge))} "
                f"| {esc(threshold)} | {holds} |"
            )
        lines += ["", "### What to change", ""]
        if d.hints:
            for i, h in enumerate(d.hints, 1):
                lines.append(f"{i}. **{esc(h.title)}**: {esc(h.action)}. Why: {esc(h.why)}")
        else:
            lines.append("Nothing to change.")
        if d.roofline is not None:
            lines += ["", f"Roofline: {esc(d.roofline.text())}"]
    lines += ["", "## Alerts", ""]
    if alerts:
        lines += ["| at (UTC) | alert | state | severity | summary |", "|---|---|---|---|---|"]
        for a in sorted(alerts, key=lambda a: a.at):
            lines.append(
                f"| {utc(a.at)} | {esc(a.name)} | {esc(a.state)} | {esc(a.severity)} | "
                f"{esc(a.summary)} |"
            )
    else:
        lines.append("No alert changed state in this range.")
    return "\n".join(lines) + "\n"
