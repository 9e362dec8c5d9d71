"""The post-incident review (``phasewatch review --html``) as one self-contained HTML file.

Per stream the five-metric view over the range (spike peaks and alerts marked), its
timeline, spikes and the evidence and hints of every problem run; then the alerts that
would have fired. Built of :mod:`app.ui.htmlreport`'s pieces: every value escaped,
Plotly inlined, only the file's own scripts allowed to run. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from app.diagnose.records import fmt_value
from app.read.points import Timeline
from app.read.review.report import Review, StreamReview
from app.ui import palette
from app.ui.figures import Mark, target_figure, utc
from app.ui.htmlreport import (
    Chart,
    badge,
    chart_div,
    diagnosis_html,
    document,
    esc,
    generated,
    meta,
    table,
)

__all__ = ["MAX_CHARTS", "review_html"]

# At most this many streams' charts (problem streams first); the others keep their tables.
MAX_CHARTS = 20


def _clock(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%H:%M:%S")


def _span(first: float, last: float) -> str:
    return _clock(first) if first == last else f"{_clock(first)} → {_clock(last)}"


def review_html(
    review: Review,
    timelines: Mapping[tuple[str, str], Timeline],
    *,
    generated_at: float,
) -> str:
    """The post-incident review (``phasewatch review``): the summary per stream, then
    for each stream its five-metric view over the range (spike peaks and alerts marked),
    its timeline, spikes, and the evidence and hints of every problem run; then the
    alerts that would have fired. ``timelines``: per (target, model) stream; a stream
    without one keeps its tables. At most :data:`MAX_CHARTS` charts."""
    title = f"phasewatch review: {utc(review.start)} – {utc(review.end)} UTC"
    source = f"Prometheus {review.source}" + (
        f", selector {review.selector}" if review.selector else ""
    )
    body = [
        f"<h1>{esc(title)}</h1>",
        meta(
            [
                ("source", esc(source)),
                ("windows", esc(f"{review.window:g} s every {review.step:g} s, named by end")),
                ("report", esc(generated(generated_at))),
            ]
        ),
        *(f'<p class="muted">{esc(n)}</p>' for n in review.notes),
    ]
    charts: list[Chart] = []
    if not review.streams:
        body.append("<p>No vLLM series matched in this range.</p>")
        return document(title, body, charts)
    summary = []
    for s in review.streams:
        classes = ", ".join(dict.fromkeys(r.label for r in s.timeline))
        summary.append(
            [
                esc(f"{s.model_name} @ {s.target}"),
                f"{s.windows}",
                f"{s.problem_windows}",
                esc(classes),
                f"{sum(1 for x in s.spikes if x.signal == 'ttft_p99')}",
                f"{sum(1 for x in s.spikes if x.signal == 'itl_p99')}",
            ]
        )
    head = ["stream", "windows", "problem windows", "classes seen", "TTFT spikes", "ITL spikes"]
    body += ["<h2>Summary</h2>", table(head, summary)]
    for i, s in enumerate(review.streams):
        tl = timelines.get((s.target, s.model_name))
        chart_id = f"stream-{i}"
        drawn = tl is not None and len(charts) < MAX_CHARTS
        if drawn and tl is not None:
            marks = _review_marks(review, s)
            charts.append(Chart(chart_id, target_figure(tl, marks=marks, uirevision="report")))
        body += _stream_section(s, chart_id if drawn else None)
    body += ["<h2>Alerts that would have fired</h2>", _review_alerts(review)]
    return document(title, body, charts)


def _review_marks(review: Review, s: StreamReview) -> list[Mark]:
    names = {"ttft_p99": "TTFT p99", "itl_p99": "ITL p99"}
    marks = [Mark(x.peak_end, f"{names.get(x.signal, x.signal)} peak") for x in s.spikes]
    for a in review.alerts or ():
        if a.target == s.target and a.model_name in ("", s.model_name):
            marks.append(Mark(a.starts_at, f"{a.name} firing", palette.VERMILLION))
    return marks


def _stream_section(s: StreamReview, chart_id: str | None) -> list[str]:
    parts = [f"<h2>{esc(f'{s.model_name} @ {s.target}')}</h2>"]
    if chart_id is not None:
        parts.append(chart_div(chart_id))
    timeline = [
        [
            esc(_span(r.first_end, r.last_end)),
            badge(r.cls, r.label.partition("/")[2] or None),
            f"{r.windows}",
            esc(fmt_value(r.ttft_p99_max, "s")),
            esc(fmt_value(r.itl_p99_max, "s")),
        ]
        for r in s.timeline
    ]
    head = ["windows ending", "class", "windows", "TTFT p99 max", "ITL p99 max"]
    parts += ["<h3>Timeline</h3>", table(head, timeline)]
    parts.append("<h3>p99 spikes</h3>")
    base = (
        f"Baselines (median p99 over the range): TTFT {fmt_value(s.baseline_ttft_p99, 's')}, "
        f"ITL {fmt_value(s.baseline_itl_p99, 's')}."
    )
    if not s.spikes:
        parts.append(f"<p>None: no window over its SLO or far over the baseline. {esc(base)}</p>")
    else:
        over = {"slo": "SLO", "baseline": "baseline", "slo+baseline": "SLO and baseline"}
        rows = [
            [
                esc(_span(x.first_end, x.last_end)),
                esc(x.signal),
                esc(fmt_value(x.peak, "s", x.peak_ge)),
                esc(_clock(x.peak_end)),
                esc(fmt_value(x.slo, "s")),
                esc(over.get(x.reason, x.reason)),
                esc(x.class_at_peak),
            ]
            for x in s.spikes
        ]
        head = ["windows ending", "signal", "peak", "at", "SLO", "over", "class at peak"]
        parts += [f"<p>{esc(base)}</p>", table(head, rows)]
    for f in s.findings:
        sub = f.run.label.partition("/")[2] or None
        parts.append(
            f"<h3>{esc(palette.label(f.run.cls, sub))}: "
            f"{esc(_span(f.run.first_end, f.run.last_end))}</h3>"
        )
        parts.append(diagnosis_html(f.diagnosis, when="most confident window"))
    return parts


def _review_alerts(review: Review) -> str:
    if review.alerts is None:
        return "<p>Not evaluated: no alert rules were available to this review.</p>"
    if not review.alerts:
        return "<p>None.</p>"
    rows: list[list[str]] = []
    for a in review.alerts:
        to = "firing at the end" if a.ends_at is None else utc(a.ends_at)
        rows.append(
            [
                esc(a.name),
                f'<span class="sev-{esc(a.severity)}">{esc(a.severity)}</span>',
                esc(f"{a.model_name} @ {a.target}"),
                esc(utc(a.starts_at)),
                esc(to),
                esc(a.summary),
            ]
        )
    return table(["alert", "severity", "stream", "from", "to", "summary"], rows)
