"""Incident review: find the p99 spikes in a range, open one, export its summary (Markdown,
or one self-contained HTML file with the charts).

URL: ``/ui/incident`` with optional ``target``, ``model`` (one stream; all streams
otherwise) and ``from``/``to`` (Unix seconds; the last 6 hours otherwise).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from dash import ALL, Dash, Input, Output, State, ctx, dcc, html, no_update

from app.diagnose.records import Diagnosis, fmt_value
from app.read.alertfeed import AlertRow, alert_summary
from app.read.pageeffects import priced_at
from app.read.points import Timeline
from app.ui import ids, palette, timerange
from app.ui.components import badge, diagnosis_card
from app.ui.context import PageContext
from app.ui.figures import Mark, target_figure, utc
from app.ui.htmlreport import incident_html
from app.ui.markdown import incident_markdown
from app.ui.spikes import (
    Spike,
    diagnosis_heading,
    find_spikes,
    impact_text,
    resolution_text,
)

ALL_STREAMS = "*"
DEFAULT_K = 3.0
MIN_PAD_S = 300.0


def _stream_value(target: str, model: str) -> str:
    return json.dumps([target, model])


def layout(ctx_: PageContext, q: dict[str, str]) -> html.Div:
    streams = ctx_.data.source.streams()
    chosen = ALL_STREAMS
    if q.get("target"):
        wanted = [(t, m) for t, m in streams if t == q["target"]]
        if q.get("model"):
            wanted = [(t, m) for t, m in wanted if m == q["model"]] or wanted
        if len(wanted) == 1:
            chosen = _stream_value(*wanted[0])
    start, end = timerange.url_times(q, "from", "to")
    custom = start is not None and end is not None and end > start
    bounded = ctx_.data.source.span() is not None
    choice = timerange.CUSTOM if custom else (timerange.ALL if bounded else "6h")
    return skeleton(streams, chosen, choice=choice, start=start, end=end, bounded=bounded)


def skeleton(
    streams: list[tuple[str, str]],
    chosen: str,
    *,
    choice: str,
    start: float | None,
    end: float | None,
    bounded: bool,
) -> html.Div:
    """The page's components (no data access: also the validation skeleton)."""
    options = [{"label": "all streams", "value": ALL_STREAMS}] + [
        {"label": f"{t} · {m}", "value": _stream_value(t, m)} for t, m in streams
    ]
    return html.Div(
        [
            html.H2("Incident review"),
            html.Div(
                [
                    dcc.Dropdown(
                        id=ids.INCIDENT_STREAM,
                        options=options,
                        value=chosen,
                        clearable=False,
                        className="stream-select",
                    ),
                    timerange.control(
                        ids.INCIDENT_RANGE,
                        ids.INCIDENT_FROM,
                        ids.INCIDENT_TO,
                        ids.INCIDENT_CUSTOM,
                        value=choice,
                        start=start,
                        end=end,
                        bounded=bounded,
                    ),
                    html.Label(
                        [
                            "spike: p99 over SLO or over ",
                            dcc.Input(
                                id=ids.INCIDENT_K,
                                type="number",
                                min=1.1,
                                step=0.1,
                                value=DEFAULT_K,
                                debounce=True,
                                className="k-input",
                            ),
                            " × the preceding baseline",
                        ],
                        className="k-label",
                    ),
                ],
                className="controls",
            ),
            html.P(id=ids.INCIDENT_STATUS, className="muted status"),
            dcc.Store(id=ids.INCIDENT_FOUND),
            html.Div(id=ids.INCIDENT_SPIKES),
            dcc.Download(id=ids.INCIDENT_DOWNLOAD),
            dcc.Download(id=ids.INCIDENT_DOWNLOAD_HTML),
            html.Div(id=ids.INCIDENT_VIEW, className="incident-detail"),
        ],
        className="page-incident",
    )


def _peak_text(s: Spike, signal: str) -> str:
    for p in s.peaks:
        if p.signal == signal:
            return fmt_value(p.value, "s", p.ge)
    return "–"


def spike_table(spikes: list[Spike]) -> html.Table:
    head = html.Tr(
        [
            html.Th(h)
            for h in ("", "stream", "start (UTC)", "end (UTC)", "TTFT p99", "ITL p99", "class")
        ]
    )
    rows = [
        html.Tr(
            [
                html.Td(html.Button("open", id=ids.spike_row(i), className="spike-open")),
                html.Td(f"{s.target} · {s.model_name}"),
                html.Td(utc(s.start)),
                html.Td(utc(s.end)),
                html.Td(_peak_text(s, "ttft"), className="num"),
                html.Td(_peak_text(s, "itl"), className="num"),
                html.Td(badge(s.dominant)),
            ],
            className="spike-row",
        )
        for i, s in enumerate(spikes)
    ]
    return html.Table([html.Thead(head), html.Tbody(rows)], className="spikes")


def _streams(ctx_: PageContext, value: str | None) -> list[tuple[str, str]]:
    if not value or value == ALL_STREAMS:
        return ctx_.data.source.streams()
    target, model = json.loads(value)
    return [(str(target), str(model))]


def _find(ctx_: PageContext, found: dict[str, Any]) -> list[Spike]:
    start, end = found["range"]
    out: list[Spike] = []
    for target, model in _streams(ctx_, found["stream"]):
        tl = ctx_.data.timeline(target, model, start, end)
        out += find_spikes(tl, k=found["k"])
    out.sort(key=lambda s: (s.start, s.target, s.model_name))
    return out


def _alerts(ctx_: PageContext, s: Spike, start: float, end: float) -> list[AlertRow]:
    rows = ctx_.alerts.history(start, end, target=s.target)
    return [a for a in rows if a.model_name in (None, s.model_name)]


def register(app: Dash, ctx_: PageContext) -> None:
    _register_search(app, ctx_)
    _register_open(app, ctx_)
    _register_exports(app, ctx_)


def _register_search(app: Dash, ctx_: PageContext) -> None:
    """The range control and the search: the spikes of the chosen streams and range."""
    data = ctx_.data

    @app.callback(
        Output(ids.INCIDENT_CUSTOM, "style"),
        Input(ids.INCIDENT_RANGE, "value"),
    )
    def show_custom(choice: str) -> dict[str, str]:
        return {} if choice == timerange.CUSTOM else {"display": "none"}

    @app.callback(
        Output(ids.INCIDENT_SPIKES, "children"),
        Output(ids.INCIDENT_FOUND, "data"),
        Output(ids.INCIDENT_STATUS, "children"),
        Input(ids.INCIDENT_STREAM, "value"),
        Input(ids.INCIDENT_RANGE, "value"),
        Input(ids.INCIDENT_FROM, "value"),
        Input(ids.INCIDENT_TO, "value"),
        Input(ids.INCIDENT_K, "value"),
    )
    def find(
        stream: str, choice: str, lo: str | None, hi: str | None, k: float | None
    ) -> tuple[Any, Any, str]:
        try:
            start, end = timerange.resolve(choice, lo, hi, now=data.now(), span=data.source.span())
        except timerange.RangeError as exc:
            return no_update, no_update, str(exc)
        factor = float(k) if k is not None and k > 1 else DEFAULT_K
        found = {"stream": stream, "range": [start, end], "k": factor}
        spikes = _find(ctx_, found)
        status = (
            f"{len(spikes)} spike(s) from {utc(start)} to {utc(end)} UTC "
            f"(p99 over its SLO or over {factor:g} × the preceding baseline)"
        )
        if not spikes:
            return html.P("No p99 spike in this range.", className="muted"), found, status
        return spike_table(spikes), found, status


def _register_open(app: Dash, ctx_: PageContext) -> None:
    """A spike opened: its five-metric view, resolution and impact, alerts, diagnosis (at
    the peak or a surge's height) and summary."""

    @app.callback(
        Output(ids.INCIDENT_VIEW, "children"),
        Input({"type": ids.SPIKE_ROW, "index": ALL}, "n_clicks"),
        State(ids.INCIDENT_FOUND, "data"),
        prevent_initial_call=True,
    )
    def open_spike(clicks: list[int | None], found: dict[str, Any] | None) -> Any:
        trigger = ctx.triggered_id
        if not found or not isinstance(trigger, dict) or not any(clicks):
            return no_update
        index = int(trigger["index"])
        got = _opened(ctx_, found, index)
        if got is None:
            return no_update
        s, lo, hi, alerts, diagnosis = got.spike, got.lo, got.hi, got.alerts, got.diagnosis
        fig = target_figure(got.timeline, marks=got.marks, uirevision=f"incident\n{s.start}")
        detail = [
            html.H3(
                [
                    f"{s.target} · {s.model_name}: {utc(s.start)} – {utc(s.end)} UTC ",
                    badge(s.dominant),
                ]
            ),
            html.Div(
                [
                    dcc.Link(
                        "open the target page here →",
                        href=ctx_.target_href(s.target, s.model_name, start=lo, end=hi),
                    )
                ]
            ),
            html.Ul(
                [html.Li(resolution_text(s)), html.Li(impact_text(s))],
                className="incident-impact",
            ),
            html.H4("Alerts in this range"),
            _alert_list(alerts),
            html.H4(diagnosis_heading(s)),
            diagnosis_card(diagnosis, latest=False)
            if diagnosis is not None
            else html.P("No window to diagnose.", className="muted"),
        ]
        return view(fig, detail, got.markdown, index=index)


def _register_exports(app: Dash, ctx_: PageContext) -> None:
    """The open spike's Markdown summary and self-contained HTML report, downloaded."""
    data = ctx_.data

    @app.callback(
        Output(ids.INCIDENT_DOWNLOAD, "data"),
        Input(ids.INCIDENT_EXPORT, "n_clicks"),
        State(ids.INCIDENT_PREVIEW, "children"),
        State(ids.INCIDENT_FOUND, "data"),
        State(ids.INCIDENT_OPEN, "data"),
        prevent_initial_call=True,
    )
    def export(
        clicks: int | None, text: str | None, found: dict[str, Any] | None, index: int | None
    ) -> Any:
        # The button is new in every opened view, and Dash calls this as it appears: no
        # click yet, no download.
        if not clicks or not text:
            return no_update
        # The summary as shown, with the hints' predicted effects priced now.
        got = None if not found or index is None else _opened(ctx_, found, int(index), price=True)
        if got is not None:
            text = got.markdown
        # what dcc.send_string returns, built here to keep the callback typed
        return {
            "content": text,
            "filename": "incident-summary.md",
            "type": "text/markdown",
            "base64": False,
        }

    @app.callback(
        Output(ids.INCIDENT_DOWNLOAD_HTML, "data"),
        Input(ids.INCIDENT_EXPORT_HTML, "n_clicks"),
        State(ids.INCIDENT_FOUND, "data"),
        State(ids.INCIDENT_OPEN, "data"),
        prevent_initial_call=True,
    )
    def export_html(clicks: int | None, found: dict[str, Any] | None, index: int | None) -> Any:
        """The open incident as one self-contained HTML file (charts, diagnosis, alerts,
        summary; Plotly inlined: it opens offline)."""
        if not clicks or not found or index is None:  # a view just shown: not a click
            return no_update
        got = _opened(ctx_, found, int(index), price=True)
        if got is None:
            return no_update
        report = incident_html(
            got.spike,
            got.timeline,
            marks=got.marks,
            diagnosis=got.diagnosis,
            alerts=got.alerts,
            source=data.source.label,
            markdown=got.markdown,
            generated_at=time.time(),
        )
        return {
            "content": report,
            "filename": f"incident-{int(got.spike.start)}.html",
            "type": "text/html",
            "base64": False,
        }


@dataclass(frozen=True, slots=True)
class _Opened:
    """One spike opened: its padded range, the points, alerts, marks, its diagnosis (at
    ``spike.diagnosed_at``) and the Markdown summary (what the view and both exports show)."""

    spike: Spike
    lo: float
    hi: float
    timeline: Timeline
    alerts: list[AlertRow]
    marks: list[Mark]
    diagnosis: Diagnosis | None
    markdown: str


def _opened(
    ctx_: PageContext, found: dict[str, Any], index: int, *, price: bool = False
) -> _Opened | None:
    """The ``index``-th spike of the search ``found``, opened (None: it is gone). The
    diagnosis' hints carry the effects the what-if twin has priced; with ``price`` (the
    exports) those not priced yet are computed (seconds of CPU, then cached)."""
    data = ctx_.data
    spikes = _find(ctx_, found)
    if not 0 <= index < len(spikes):
        return None
    s = spikes[index]
    pad = max(MIN_PAD_S, (s.end - s.start) / 2)
    lo, hi = s.start - pad, min(s.end + pad, max(data.now(), s.end))
    tl = data.timeline(s.target, s.model_name, lo, hi)
    alerts = _alerts(ctx_, s, lo, hi)
    cause = [Mark(s.diagnosed_at, "diagnosed")] if s.diagnosed_at != s.peak_at else []
    marks = [Mark(s.peak_at, "peak"), *cause] + [
        Mark(a.at, f"{a.name} {a.state}", palette.VERMILLION) for a in alerts if a.state == "firing"
    ]
    diagnosis = priced_at(data, ctx_.twin, s.target, s.model_name, s.diagnosed_at, compute=price)
    md = incident_markdown(s, diagnosis=diagnosis, alerts=alerts, source=data.source.label)
    return _Opened(s, lo, hi, tl, alerts, marks, diagnosis, md)


def view(figure: Any, detail: Any, markdown: str, *, index: int | None = None) -> list[Any]:
    """The chosen spike (``index`` in the search): its five-metric view, the exports, the
    details."""
    return [
        dcc.Store(id=ids.INCIDENT_OPEN, data=index),
        dcc.Graph(
            id=ids.INCIDENT_GRAPH,
            figure=figure,
            config={"displaylogo": False, "responsive": True},
            className="five-metrics",
        ),
        html.Div(
            [
                html.Button("Export Markdown summary", id=ids.INCIDENT_EXPORT),
                " ",
                html.Button(
                    "Export HTML",
                    id=ids.INCIDENT_EXPORT_HTML,
                    title="one file with the charts, the diagnosis, the alerts and the "
                    "summary; opens offline (attach it to the postmortem)",
                ),
            ],
            className="export",
        ),
        html.Div(detail, id=ids.INCIDENT_DETAIL),
        html.Details(
            [
                html.Summary("Markdown summary (preview)"),
                html.Pre(markdown, id=ids.INCIDENT_PREVIEW, className="md-preview"),
            ]
        ),
    ]


def _alert_list(alerts: list[AlertRow]) -> html.Ul | html.P:
    if not alerts:
        return html.P("No alert changed state in this range.", className="muted")
    return html.Ul(
        [
            html.Li(f"{utc(a.at)} UTC · {a.name} {a.state} · {a.severity} · {alert_summary(a)}")
            for a in sorted(alerts, key=lambda a: a.at)
        ],
        className="alert-list",
    )
