"""Pure builders of the UI's repeated pieces: class badge, diagnosis card, tables.

Every label value (target, model, error text) goes into Dash components as text, which
Dash escapes; nothing here renders HTML from strings.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dash import dcc, html

from app.diagnose.classes import situation
from app.diagnose.records import Change, Diagnosis, Evidence, Hint, fmt_value
from app.read.points import Point
from app.ui import palette
from app.ui.figures import band_runs, utc


def data_attrs(**values: str) -> dict[str, Any]:
    """``data-*`` attributes for a Dash component (``data_attrs(hint="x")`` → data-hint)."""
    return {f"data-{k.replace('_', '-')}": v for k, v in values.items()}


def badge(cls: str, sub_cause: str | None = None, **kw: Any) -> html.Span:
    """The class as a coloured label that carries its name in text."""
    st = palette.style(cls)
    return html.Span(
        palette.label(cls, sub_cause),
        className="badge",
        style={"background": st.colour, "color": st.text},
        title=f"class: {situation(cls, sub_cause)}",
        **data_attrs(**{"class": cls}),
        **kw,
    )


def mini_band(points: Sequence[Point], step: float, *, start: float, end: float) -> html.Div:
    """The last minutes' classes as a thin strip, one component: each run of a class a
    stretch of its colour in a CSS gradient, the runs named in its tooltip (no Plotly;
    the overview draws one per card, and the browser's cost grows with the components)."""
    span = max(end - start, step)
    stops: list[str] = []
    names: list[str] = []
    empty = palette.EMPTY_STRIP
    at = 0.0
    for r in band_runs(points, step):
        lo = max(0.0, min(100.0, (max(r.start, start) - start) / span * 100))
        hi = max(lo, min(100.0, (min(r.end, end) - start) / span * 100))
        if hi <= lo:
            continue
        colour = palette.style(r.cls).colour
        if lo > at:
            stops += [f"{empty} {at:.3f}%", f"{empty} {lo:.3f}%"]
        stops += [f"{colour} {lo:.3f}%", f"{colour} {hi:.3f}%"]
        names.append(f"{palette.label(r.cls, r.sub_cause)}: {utc(r.start)} – {utc(r.end)} UTC")
        at = hi
    if at < 100.0:
        stops += [f"{empty} {at:.3f}%", f"{empty} 100%"]
    return html.Div(
        className="mini-band",
        style={"background": f"linear-gradient(to right, {', '.join(stops)})"},
        title="\n".join(names) or "no windows in these minutes",
        **data_attrs(runs=str(len(names))),
    )


def _verdict(e: Evidence) -> str:
    return {True: "yes", False: "no", None: "unknown"}[e.holds]


def evidence_table(evidence: Sequence[Evidence], rules: Sequence[str] | None = None) -> html.Table:
    """Each comparison a rule made: signal, value, threshold, holds."""
    rows = []
    for e in evidence:
        if rules is not None and e.rule not in rules:
            continue
        threshold = "" if e.threshold is None else f"{e.op} {fmt_value(e.threshold, e.unit)}"
        rows.append(
            html.Tr(
                [
                    html.Td(e.rule),
                    html.Td(e.signal),
                    html.Td(fmt_value(e.value, e.unit, e.ge), className="num"),
                    html.Td(threshold, className="num"),
                    html.Td(_verdict(e), className=f"holds-{_verdict(e)}"),
                    html.Td(e.note),
                ]
            )
        )
    head = html.Tr([html.Th(h) for h in ("rule", "signal", "value", "threshold", "holds", "note")])
    return html.Table([html.Thead(head), html.Tbody(rows)], className="evidence")


def _effect_line(h: Hint) -> list[html.Div]:
    """The what-if twin's predicted effect of the hint's change, where priced."""
    e = h.effect
    if e is None:
        return []
    verdict = "" if e.verdict is None else str(e.verdict)
    tip = "the what-if twin on this stream's last 15 minutes" + (
        "" if e.replay_error is None else f" (its replay is {e.replay_error:.0%} off)"
    )
    if e.backlog is not None:
        tip = "the queue grows: the incident model on this stream's last 5 minutes"
    unreliable = " unreliable" if e.unreliable is not None else ""
    return [
        html.Div(
            e.text(),
            className=f"effect {verdict}{unreliable}".strip(),
            title=tip,
            **data_attrs(verdict=verdict),
        )
    ]


def hints_list(hints: Sequence[Hint]) -> html.Ol | html.P:
    """What to change, most useful first: the title, the flag or action, and why (a
    stream's diagnosis and a fleet's imbalance alike)."""
    if not hints:
        return html.P("Nothing to change.", className="muted")
    return html.Ol(
        [
            html.Li(
                [
                    html.Strong(h.title),
                    html.Span(": "),
                    html.Code(h.action),
                    *_effect_line(h),
                    html.Div(["why: ", h.why], className="why"),
                ],
                className="hint flagged" if h.effect is not None and h.effect.flagged else "hint",
                **data_attrs(hint=h.id),
            )
            for h in hints
        ],
        className="hints",
    )


def changes_table(changes: Sequence[Change]) -> html.Table:
    """What moved against the stream's healthy baseline, the headline first: the change
    in words, and the share of the symptom it explains."""
    rows = [
        html.Tr(
            [
                html.Td(c.text()),
                html.Td(f"{c.share:.0%}" if c.share > 0 else "none", className="num"),
            ],
            **data_attrs(signal=c.signal),
        )
        for c in changes
    ]
    head = html.Tr([html.Th("against the healthy baseline"), html.Th("explains")])
    return html.Table([html.Thead(head), html.Tbody(rows)], className="changes")


# The marks of an SLO judgement (``app.diagnose.slo.verdict``), with what each means.
SLO_MARK_TEXT: dict[str, tuple[str, str]] = {
    "over": ("▲ over", "the histogram's bucket edges prove more than 1 % above the SLO"),
    "unproven": (
        "≈ unproven",
        "the p99 lies in a histogram bucket around the SLO: more likely over than not, "
        "but the bucket edges cannot prove it",
    ),
}


def slo_mark(verdict: str | None) -> list[Any]:
    """`` ▲ over`` / `` ≈ unproven`` with a tooltip, or nothing (within, or unknown)."""
    if verdict not in SLO_MARK_TEXT:
        return []
    text, title = SLO_MARK_TEXT[verdict]
    return [" ", html.Span(text, className=f"slo-mark {verdict}", title=title)]


def diagnosis_card(d: Diagnosis, *, latest: bool) -> html.Div:
    """Class, sub-cause, summary, evidence, secondary findings, hints, roofline, notes."""
    when = "latest window" if latest else "chosen window"
    parts: list[Any] = [
        html.Div(
            [
                badge(str(d.cls), None if d.sub_cause is None else str(d.sub_cause)),
                html.Span(f" confidence {d.confidence:.2f}", className="muted"),
            ],
            className="card-head",
        ),
        html.Div(
            f"{when}: {utc(d.start)} – {utc(d.end)} UTC",
            className="muted diagnosis-window",
        ),
        html.P(d.summary, className="summary"),
        html.P(
            [
                f"TTFT p99 {fmt_value(d.ttft_p99, 's', d.ttft_p99_ge)} (SLO "
                f"{fmt_value(d.slo_ttft_p99, 's')})",
                *slo_mark(d.ttft_slo),
                " · ITL p99 "
                f"{fmt_value(d.itl_p99, 's', d.itl_p99_ge)} (SLO {fmt_value(d.slo_itl_p99, 's')})",
                *slo_mark(d.itl_slo),
            ]
        ),
    ]
    if d.changes:
        parts.append(html.H4("What changed"))
        parts.append(changes_table(d.changes))
    if d.secondary:
        parts.append(html.H4("Also holds"))
        parts.append(
            html.Ul(
                [
                    html.Li(
                        [
                            badge(str(f.cls), None if f.sub_cause is None else str(f.sub_cause)),
                            " ",
                            f.summary,
                        ]
                    )
                    for f in d.secondary
                ]
            )
        )
    parts.append(html.H4("What to change"))
    parts.append(hints_list(d.hints))
    roofline = None if d.roofline is None else d.roofline.text()
    if roofline is not None:
        parts.append(html.H4("Roofline"))
        parts.append(html.P(roofline, className="roofline"))
    notes = [n for n in d.notes if n != roofline]
    if notes:
        parts.append(html.Ul([html.Li(n) for n in notes], className="notes"))
    if d.missing:
        parts.append(html.P("Signals not on the page: " + ", ".join(d.missing), className="muted"))
    decided = any(e.rule == str(d.cls) for e in d.evidence)
    if decided:
        parts.append(html.H4("Evidence"))
        parts.append(evidence_table(d.evidence, [str(d.cls)]))
    parts.append(
        html.Details(
            [
                html.Summary("every rule's evidence" if decided else "Evidence (every rule)"),
                evidence_table(d.evidence),
            ],
            className="all-evidence",
        )
    )
    return html.Div(parts, className="diagnosis-card", **data_attrs(**{"class": str(d.cls)}))


def engines_table(engines: dict[str, dict[str, float]]) -> html.Div:
    """The latest per-engine gauges (data-parallel engines, before folding)."""
    if not engines:
        return html.Div(html.P("No per-engine values on the last page.", className="muted"))
    signals = ("running", "waiting", "kv_usage")
    rows = []
    for engine in sorted(engines, key=lambda e: (len(e), e)):
        g = engines[engine]
        cells = [html.Td(engine)]
        for s in signals:
            v = g.get(s)
            text = "n/a" if v is None else (f"{v:.0%}" if s == "kv_usage" else f"{v:g}")
            cells.append(html.Td(text, className="num"))
        rows.append(html.Tr(cells))
    head = html.Tr([html.Th(h) for h in ("engine", "running", "waiting", "KV usage")])
    return html.Div(
        [
            html.H4("Engines (last scrape)"),
            html.Table([html.Thead(head), html.Tbody(rows)], className="engines"),
        ]
    )


def page_head(
    title: Any, select_id: str, options: Sequence[str], value: str | None, *, title_id: str | None
) -> html.Div:
    """A page's heading and the dropdown beside it that picks what the page shows (a
    target's model, a model's fleet)."""
    heading = html.H2(title) if title_id is None else html.H2(title, id=title_id)
    return html.Div(
        [
            heading,
            dcc.Dropdown(
                id=select_id,
                options=[{"label": o, "value": o} for o in options],
                value=value,
                clearable=False,
                className="model-select",
            ),
        ],
        className="page-head",
    )
