"""Self-contained HTML reports: an incident as one file, and the pieces every report uses.

The thing to attach to a postmortem: the five-metric charts (the diagnosis band on top),
the diagnosis (evidence, hints), the alerts and the summary, with Plotly's JavaScript
inlined — the file opens offline and fetches nothing. Pure: records in, a string out.
The post-incident review's report (``phasewatch review --html``) is
:mod:`app.ui.htmlreview`, built of the same pieces.

What comes from outside (target and model names, label values, alert names and
summaries, evidence notes, the source's address) is written through
:func:`html.escape`; a figure goes in as Plotly's JSON, which escapes ``<``, ``>`` and
``/``. The page's Content-Security-Policy allows only its own scripts (by SHA-256) and
loads nothing from anywhere, so even text that escaped the escaping could not run.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from collections.abc import Sequence
from dataclasses import dataclass

import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs

from app.diagnose.records import Diagnosis, Evidence, fmt_value
from app.read.alertfeed import AlertRow, alert_summary
from app.read.points import Timeline
from app.ui import palette
from app.ui.figures import Mark, target_figure, utc
from app.ui.spikes import (
    Spike,
    diagnosis_heading,
    duration_text,
    impact_text,
    resolution_text,
)

__all__ = ["Chart", "diagnosis_html", "document", "esc", "incident_html"]

_CHART_CONFIG = {"displaylogo": False, "responsive": True}

_STYLE = """
body { margin: 0 auto; max-width: 1300px; padding: 16px 24px 48px;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
  color: #1b1b1b; }
h1 { font-size: 22px; margin: 8px 0; } h2 { margin: 24px 0 8px; } h3 { margin: 16px 0 6px; }
.muted { color: #5f6368; }
.badge { display: inline-block; padding: 2px 8px; border-radius: 3px; font-weight: 600;
  font-size: 12px; white-space: nowrap; }
table { border-collapse: collapse; margin: 6px 0; }
th, td { padding: 3px 8px; border-bottom: 1px solid #dadce0; text-align: left;
  vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; }
dl.meta dt { color: #5f6368; } dl.meta dd { margin: 0; }
.chart { border: 1px solid #dadce0; border-radius: 6px; margin: 8px 0; }
.hint { margin-bottom: 6px; } .why { color: #5f6368; font-size: 13px; }
code { background: #f1f3f4; padding: 1px 4px; border-radius: 3px; }
pre.md { white-space: pre-wrap; background: #f7f7f8; border: 1px solid #dadce0;
  padding: 8px; font-size: 12px; }
.sev-critical { color: #d55e00; font-weight: 700; }
"""


def esc(value: object) -> str:
    """Text from anywhere, safe in an element or a quoted attribute."""
    return html.escape(str(value), quote=True)


@dataclass(frozen=True, slots=True)
class Chart:
    """A figure to draw into the element with id ``div_id``."""

    div_id: str
    figure: go.Figure


def _sha256(script: str) -> str:
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


def _chart_script(chart: Chart) -> str:
    spec = pio.to_json(chart.figure, validate=False)  # escapes < > / inside strings
    config = json.dumps(_CHART_CONFIG)
    return (
        f"(function () {{ var f = {spec}; "
        f'Plotly.newPlot("{chart.div_id}", f.data, f.layout, {config}); }})();'
    )


def document(title: str, body: Sequence[str], charts: Sequence[Chart]) -> str:
    """One HTML file: ``body`` (HTML fragments, already escaped) with ``charts`` drawn
    into their elements by Plotly, inlined. ``title`` is plain text."""
    plotly_js = get_plotlyjs()
    scripts = [_chart_script(c) for c in charts]
    hashes = " ".join(_sha256(s) for s in [plotly_js, *scripts])
    csp = (
        f"default-src 'none'; script-src {hashes}; style-src 'unsafe-inline'; "
        "img-src data: blob:; font-src data:; connect-src 'none'; base-uri 'none'; "
        "form-action 'none'"
    )
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{esc(csp)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title>",
        f"<style>{_STYLE}</style>",
        f'<script type="text/javascript">{plotly_js}</script>',
        "</head><body>",
        *body,
        *(f'<script type="text/javascript">{s}</script>' for s in scripts),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


# -- pieces -------------------------------------------------------------------------------
def badge(cls: str, sub_cause: str | None = None) -> str:
    st = palette.style(cls)
    return (
        f'<span class="badge" style="background:{esc(st.colour)};color:{esc(st.text)}">'
        f"{esc(palette.label(cls, sub_cause))}</span>"
    )


def table(head: Sequence[str], rows: Sequence[Sequence[str]], cls: str = "") -> str:
    """A table; ``head`` is plain text, every cell already HTML."""
    th = "".join(f"<th>{esc(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    attr = f' class="{esc(cls)}"' if cls else ""
    return f"<table{attr}><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def meta(items: Sequence[tuple[str, str]]) -> str:
    """A definition list of (plain-text name, HTML value)."""
    rows = "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in items)
    return f'<dl class="meta">{rows}</dl>'


def _evidence_rows(evidence: Sequence[Evidence]) -> list[list[str]]:
    rows = []
    for e in evidence:
        threshold = "" if e.threshold is None else f"{e.op} {fmt_value(e.threshold, e.unit)}"
        holds = {True: "yes", False: "no", None: "unknown"}[e.holds]
        rows.append(
            [
                esc(e.rule),
                esc(e.signal),
                esc(fmt_value(e.value, e.unit, e.ge)),
                esc(threshold),
                esc(holds),
                esc(e.note),
            ]
        )
    return rows


def diagnosis_html(d: Diagnosis, *, when: str) -> str:
    """A diagnosis as the card shows it: class, summary, SLOs, changes, evidence, hints."""
    cls = str(d.cls)
    parts = [
        f"<p>{badge(cls, None if d.sub_cause is None else str(d.sub_cause))} "
        f'<span class="muted">confidence {d.confidence:.2f} · {esc(when)} '
        f"{esc(utc(d.start))} – {esc(utc(d.end))} UTC</span></p>",
        f"<p><strong>{esc(d.summary)}</strong></p>",
        "<p>"
        + esc(
            f"TTFT p99 {fmt_value(d.ttft_p99, 's', d.ttft_p99_ge)} "
            f"(SLO {fmt_value(d.slo_ttft_p99, 's')}, {d.ttft_slo or 'n/a'}) · ITL p99 "
            f"{fmt_value(d.itl_p99, 's', d.itl_p99_ge)} "
            f"(SLO {fmt_value(d.slo_itl_p99, 's')}, {d.itl_slo or 'n/a'})"
        )
        + "</p>",
    ]
    if d.changes:
        rows = [
            [esc(c.text()), esc(f"{c.share:.0%}" if c.share > 0 else "none")] for c in d.changes
        ]
        head = ["against the healthy baseline", "explains"]
        parts += ["<h4>What changed</h4>", table(head, rows)]
    if d.secondary:
        items = "".join(
            f"<li>{badge(str(f.cls), None if f.sub_cause is None else str(f.sub_cause))} "
            f"{esc(f.summary)}</li>"
            for f in d.secondary
        )
        parts += ["<h4>Also holds</h4>", f"<ul>{items}</ul>"]
    chosen = [e for e in d.evidence if e.rule == cls] or list(d.evidence)
    head = ["rule", "signal", "value", "threshold", "holds", "note"]
    parts += ["<h4>Evidence</h4>", table(head, _evidence_rows(chosen), "evidence")]
    parts += ["<h4>What to change</h4>", hints_html(d)]
    if d.roofline is not None:
        parts.append(f"<p>Roofline: {esc(d.roofline.text())}</p>")
    notes = [n for n in d.notes if d.roofline is None or n != d.roofline.text()]
    if notes:
        parts.append("<ul>" + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>")
    return "\n".join(parts)


def hints_html(d: Diagnosis) -> str:
    if not d.hints:
        return '<p class="muted">Nothing to change.</p>'
    items = "".join(
        f'<li class="hint"><strong>{esc(h.title)}</strong>: <code>{esc(h.action)}</code>'
        + (
            ""
            if h.effect is None
            else f'<div class="effect {esc(str(h.effect.verdict or ""))}">'
            f"{esc(h.effect.text())}</div>"
        )
        + f'<div class="why">why: {esc(h.why)}</div></li>'
        for h in d.hints
    )
    return f'<ol class="hints">{items}</ol>'


def chart_div(div_id: str) -> str:
    return f'<div id="{esc(div_id)}" class="chart"></div>'


def generated(at: float) -> str:
    return f"generated by phasewatch at {utc(at)} UTC"


# -- the incident -------------------------------------------------------------------------
def incident_html(
    spike: Spike,
    timeline: Timeline,
    *,
    marks: Sequence[Mark],
    diagnosis: Diagnosis | None,
    alerts: Sequence[AlertRow],
    source: str,
    markdown: str,
    generated_at: float,
) -> str:
    """One incident of the incident review: its summary, the five-metric view of its
    range (the diagnosis band on top), its resolution and impact, its diagnosis (at the
    peak, or at a surge's height: ``app.ui.spikes``), the alerts that changed
    state, and the Markdown summary."""
    title = f"Incident: {spike.model_name} on {spike.target}"
    peaks = [
        [
            esc("TTFT p99" if p.signal == "ttft" else "ITL p99"),
            esc(fmt_value(p.value, "s", p.ge)),
            esc(utc(p.at)),
            esc(fmt_value(p.slo, "s")),
            esc("n/a" if p.baseline is None else fmt_value(p.baseline, "s")),
            esc(p.reason),
        ]
        for p in spike.peaks
    ]
    runs = [
        [esc(utc(r.start)), esc(utc(r.end)), badge(r.cls, r.sub_cause), f"{r.windows}"]
        for r in spike.runs
    ]
    body = [
        f"<h1>{esc(title)}</h1>",
        meta(
            [
                ("when", esc(f"{utc(spike.start)} – {utc(spike.end)} UTC")),
                ("duration", esc(duration_text(spike.end - spike.start))),
                ("resolution", esc(resolution_text(spike))),
                ("impact", esc(impact_text(spike))),
                ("dominant class", badge(spike.dominant)),
                ("source", esc(source)),
                ("report", esc(generated(generated_at))),
            ]
        ),
        "<h2>Peaks</h2>",
        table(["signal", "peak", "at (UTC)", "SLO", "baseline", "why it counts"], peaks),
        "<h2>Five metrics</h2>",
        '<p class="muted">The diagnosis band (the class of every window) on top; TTFT and '
        "ITL p50/p99 with their SLOs; running and waiting; KV usage with preemptions.</p>",
        chart_div("incident-chart"),
        "<h2>Class sequence</h2>",
        table(["from (UTC)", "to (UTC)", "class", "windows"], runs),
        f"<h2>{esc(diagnosis_heading(spike))}</h2>",
        diagnosis_html(diagnosis, when="window")
        if diagnosis is not None
        else '<p class="muted">No window to diagnose.</p>',
        "<h2>Alerts</h2>",
        _alertstable(alerts),
        "<h2>Summary (Markdown)</h2>",
        f'<pre class="md">{esc(markdown)}</pre>',
    ]
    fig = target_figure(timeline, marks=marks, uirevision="report")
    return document(title, body, [Chart("incident-chart", fig)])


def _alertstable(alerts: Sequence[AlertRow]) -> str:
    if not alerts:
        return '<p class="muted">No alert changed state in this range.</p>'
    rows = [
        [
            esc(utc(a.at)),
            esc(a.name),
            esc(a.state),
            f'<span class="sev-{esc(a.severity)}">{esc(a.severity)}</span>',
            esc(a.target or "fleet"),
            esc(alert_summary(a)),
        ]
        for a in sorted(alerts, key=lambda a: a.at)
    ]
    return table(["at (UTC)", "alert", "state", "severity", "target", "summary"], rows)
