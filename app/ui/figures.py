"""Pure figure builders: a :class:`Timeline` in, a Plotly figure out (no I/O, no Dash).

The five-metric view is one figure of five rows sharing one time axis — the diagnosis
band, TTFT, ITL, running vs waiting (with arrivals and completions per second on its
right axis), KV usage — so zooming any row zooms all of them,
and ``uirevision`` keeps the zoom across live refreshes. Times are Unix milliseconds on
a UTC date axis. A percentile whose rank fell in the ``+Inf`` bucket is a lower bound:
it is left out of the line and drawn as a "≥" marker with its bound.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.read.points import Point, Timeline
from app.ui import palette
from app.ui.downsample import downsample

KV_LINE = 0.9
ROWS = ("class", "TTFT", "ITL", "requests", "KV cache")
_HEIGHTS = (0.08, 0.24, 0.24, 0.22, 0.22)


@dataclass(frozen=True, slots=True)
class Run:
    """Consecutive windows of one class: drawn as one segment of the band."""

    start: float
    end: float
    cls: str
    sub_cause: str | None
    windows: int


@dataclass(frozen=True, slots=True)
class Mark:
    """A labelled instant drawn across all rows (an alert firing, a chosen window)."""

    at: float
    text: str
    colour: str = palette.BLACK


def utc(ts: float, *, seconds: bool = True) -> str:
    """``2026-11-29 09:05:00`` (UTC) for Unix seconds."""
    fmt = "%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M"
    return datetime.fromtimestamp(ts, tz=UTC).strftime(fmt)


def band_runs(points: Sequence[Point], step: float) -> list[Run]:
    """Group the windows into runs of one class; a gap in the data ends a run.

    Each window is drawn as the step before its end, so the runs tile the time axis.
    """
    runs: list[Run] = []
    prev_end: float | None = None
    for p in points:
        contiguous = prev_end is not None and p.end - prev_end <= step * 1.5
        last = runs[-1] if runs else None
        if last is not None and contiguous and last.cls == p.cls and last.sub_cause == p.sub_cause:
            runs[-1] = Run(last.start, p.end, p.cls, p.sub_cause, last.windows + 1)
        else:
            runs.append(Run(p.end - step, p.end, p.cls, p.sub_cause, 1))
        prev_end = p.end
    return runs


def _xy(
    points: Sequence[Point],
    step: float,
    value: Callable[[Point], float | None],
    scale: float = 1.0,
) -> tuple[list[float | None], list[float | None]]:
    """x (ms) and y for a line, with a break wherever windows are missing."""
    xs: list[float | None] = []
    ys: list[float | None] = []
    prev: float | None = None
    for p in points:
        if prev is not None and p.end - prev > step * 1.5:
            xs.append((prev + step) * 1000.0)
            ys.append(None)
        v = value(p)
        xs.append(p.end * 1000.0)
        ys.append(None if v is None else v * scale)
        prev = p.end
    return xs, ys


Getter = Callable[[Point], tuple[float | None, bool]]


def _exact(get: Getter) -> Callable[[Point], float | None]:
    """The value when it is exact; None (a gap in the line) when it is a lower bound."""

    def value(p: Point) -> float | None:
        v, ge = get(p)
        return None if ge else v

    return value


def slo_line(
    span: list[float], value: float, unit: str, *, legend: str | None = None
) -> go.Scatter:
    """A dashed SLO line at ``value`` (already in the axis unit) across ``span``."""
    extra = {} if legend is None else {"legend": legend}
    return go.Scatter(
        x=span,
        y=[value, value],
        name=f"SLO p99 {value:g} {unit}",
        mode="lines",
        line={"color": palette.SLO, "dash": "dash", "width": 1},
        hoverinfo="skip",
        **extra,
    )


def _percentile_traces(
    fig: go.Figure,
    row: int,
    points: Sequence[Point],
    step: float,
    *,
    name: str,
    unit: str,
    scale: float,
    slo: float,
    legend: str,
    p50: Getter,
    p99: Getter,
    span: list[float],
) -> None:
    fmt = ".3f" if unit == "s" else ".1f"
    for p_name, colour, dash, get in (
        ("p50", palette.P50, "dot", p50),
        ("p99", palette.P99, "solid", p99),
    ):
        xs, ys = _xy(points, step, _exact(get), scale)
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                name=f"{name} {p_name}",
                mode="lines",
                line={"color": colour, "dash": dash, "width": 2 if p_name == "p99" else 1.5},
                hovertemplate=f"%{{y:{fmt}}} {unit}<extra>{name} {p_name}</extra>",
                legend=legend,
            ),
            row=row,
            col=1,
        )
        bound = [p for p in points if get(p)[1] and get(p)[0] is not None]
        if bound:
            fig.add_trace(
                go.Scatter(
                    x=[p.end * 1000.0 for p in bound],
                    y=[(get(p)[0] or 0.0) * scale for p in bound],
                    name=f"{name} {p_name} ≥ top bucket",
                    mode="markers",
                    marker={"symbol": "triangle-up-open", "size": 9, "color": colour},
                    hovertemplate=(
                        f"≥ %{{y:{fmt}}} {unit} (above the highest bucket)"
                        f"<extra>{name} {p_name}</extra>"
                    ),
                    legend=legend,
                ),
                row=row,
                col=1,
            )
    # Drawn over the whole range, which also makes the autoranged axis span it.
    fig.add_trace(slo_line(span, slo * scale, unit, legend=legend), row=row, col=1)


# A band segment narrower than this share of the range gets no text (hover, legend and
# pattern still name its class): measuring hundreds of hidden labels slows the render.
BAND_TEXT_MIN_SHARE = 0.03


def _band(fig: go.Figure, runs: Sequence[Run], span: float) -> None:
    by_cls: dict[str, list[Run]] = {}
    for r in runs:
        by_cls.setdefault(r.cls, []).append(r)
    for cls in sorted(by_cls, key=lambda c: -palette.severity(c)):
        st = palette.style(cls)
        rs = by_cls[cls]
        fig.add_trace(
            go.Bar(
                orientation="h",
                y=["class"] * len(rs),
                base=[r.start * 1000.0 for r in rs],
                x=[(r.end - r.start) * 1000.0 for r in rs],
                name=st.label,
                text=[
                    palette.label(r.cls, r.sub_cause)
                    if r.end - r.start >= BAND_TEXT_MIN_SHARE * span
                    else ""
                    for r in rs
                ],
                textposition="inside",
                insidetextanchor="middle",
                textfont={"color": st.text},
                customdata=[
                    [palette.label(r.cls, r.sub_cause), utc(r.start), utc(r.end), r.windows]
                    for r in rs
                ],
                hovertemplate=(
                    "%{customdata[0]}<br>%{customdata[1]} – %{customdata[2]} UTC"
                    "<br>%{customdata[3]} window(s)<extra></extra>"
                ),
                marker={
                    "color": st.colour,
                    "line": {"width": 0},
                    "pattern": {"shape": st.pattern, "fgcolor": st.text, "fgopacity": 0.35},
                },
                legend="legend",
            ),
            row=1,
            col=1,
        )


def target_figure(
    timeline: Timeline,
    *,
    max_points: int = 2000,
    marks: Sequence[Mark] = (),
    uirevision: str | None = None,
    height: int = 860,
    x_range: tuple[float, float] | None = None,
) -> go.Figure:
    """The five-metric view with the diagnosis band, SLO lines and preemption marks.

    ``x_range`` (Unix seconds) fixes the visible time range, e.g. to keep a user's zoom
    across live refreshes; otherwise the axis spans the timeline's range.
    """
    step = timeline.step
    runs = band_runs(timeline.points, step)
    points = downsample(timeline.points, max_points)
    if len(points) < len(timeline.points):
        step = step * len(timeline.points) / len(points)
    fig = make_subplots(
        rows=5,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.025,
        row_heights=list(_HEIGHTS),
    )
    # The x axis autoranges over [start, end] (the threshold lines span it). Plotly's
    # ``uirevision`` does not keep an x zoom across updates when the axes are matched,
    # so the page passes the zoom back as ``x_range``.
    span = [timeline.start * 1000.0, timeline.end * 1000.0]
    _band(fig, runs, max(timeline.end - timeline.start, timeline.step))
    _latency_rows(fig, timeline, points, step, span)
    _requests_row(fig, points, step)
    _kv_row(fig, points, step, span)
    _layout(fig, timeline, height, uirevision)
    _marks(fig, timeline, marks, x_range)
    return fig


def _latency_rows(
    fig: go.Figure, timeline: Timeline, points: Sequence[Point], step: float, span: list[float]
) -> None:
    """Rows 2 and 3: TTFT and ITL, p50 and p99, against their SLOs."""
    _percentile_traces(
        fig,
        2,
        points,
        step,
        name="TTFT",
        unit="s",
        scale=1.0,
        slo=timeline.slo_ttft_p99,
        legend="legend2",
        p50=lambda p: (p.ttft_p50, p.ttft_p50_ge),
        p99=lambda p: (p.ttft_p99, p.ttft_p99_ge),
        span=span,
    )
    _percentile_traces(
        fig,
        3,
        points,
        step,
        name="ITL",
        unit="ms",
        scale=1000.0,
        slo=timeline.slo_itl_p99,
        legend="legend3",
        p50=lambda p: (p.itl_p50, p.itl_p50_ge),
        p99=lambda p: (p.itl_p99, p.itl_p99_ge),
        span=span,
    )


# The requests row's right axis: requests per second (the rows' axes keep their numbers).
FLOW_AXIS = "yaxis6"


def _requests_row(fig: go.Figure, points: Sequence[Point], step: float) -> None:
    """Row 4: requests running and waiting, and on its right axis the requests arriving
    (estimated) and completed per second, so that a surge shows as one."""
    _flow(fig, points, step)
    for name, get, colour, dash in (
        ("running (avg)", lambda p: p.running_avg, palette.RUNNING, "solid"),
        ("waiting (avg)", lambda p: p.waiting_avg, palette.WAITING, "solid"),
        ("waiting (max)", lambda p: p.waiting_max, palette.WAITING, "dot"),
    ):
        xs, ys = _xy(points, step, get)
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                name=name,
                mode="lines",
                line={"color": colour, "dash": dash},
                hovertemplate=f"%{{y:.1f}}<extra>{name}</extra>",
                legend="legend4",
            ),
            row=4,
            col=1,
        )


def _flow(fig: go.Figure, points: Sequence[Point], step: float) -> None:
    """Arrivals (estimated: ``app.windows.derived``) and completions per second, on an
    axis of their own over row 4's (none when no window has either)."""
    if not any(p.arrivals_per_s is not None or p.completions_per_s is not None for p in points):
        return
    for name, get, colour, dash in (
        ("arrivals/s (est.)", lambda p: p.arrivals_per_s, palette.ARRIVALS, "solid"),
        ("completions/s", lambda p: p.completions_per_s, palette.COMPLETIONS, "dash"),
    ):
        xs, ys = _xy(points, step, get)
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                name=name,
                mode="lines",
                line={"color": colour, "dash": dash, "width": 1.5},
                hovertemplate=f"%{{y:.2f}}/s<extra>{name}</extra>",
                legend="legend4",
                xaxis="x4",
                yaxis=FLOW_AXIS.replace("axis", ""),
            )
        )
    fig.update_layout(
        {
            FLOW_AXIS: {
                "overlaying": "y4",
                "side": "right",
                "anchor": "x4",
                "title": {"text": "requests/s"},
                "rangemode": "tozero",
                "showgrid": False,
                "zeroline": False,
                "tickmode": "auto",
                "nticks": 4,
                "title_standoff": 4,
            }
        }
    )


def _kv_row(fig: go.Figure, points: Sequence[Point], step: float, span: list[float]) -> None:
    """Row 5: KV cache usage, the pool-full line and the preemptions."""
    xs, ys = _xy(points, step, lambda p: p.kv_max, 100.0)
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=ys,
            name="KV usage (max)",
            mode="lines",
            line={"color": palette.KV},
            hovertemplate="%{y:.1f} %<extra>KV usage</extra>",
            legend="legend5",
        ),
        row=5,
        col=1,
    )
    fig.add_trace(
        go.Scatter(
            x=span,
            y=[KV_LINE * 100, KV_LINE * 100],
            name=f"{KV_LINE:.0%} (pool full)",
            mode="lines",
            line={"color": palette.SLO, "dash": "dash", "width": 1},
            hoverinfo="skip",
            legend="legend5",
        ),
        row=5,
        col=1,
    )
    pre = [p for p in points if p.preemptions]
    if pre:
        fig.add_trace(
            go.Scatter(
                x=[p.end * 1000.0 for p in pre],
                y=[(p.kv_max or 0.0) * 100 for p in pre],
                name="preemptions",
                mode="markers",
                marker={"symbol": "x", "size": 9, "color": palette.PREEMPTION},
                customdata=[p.preemptions for p in pre],
                hovertemplate="%{customdata:.0f} preemption(s)<extra></extra>",
                legend="legend5",
            ),
            row=5,
            col=1,
        )


def _marks(
    fig: go.Figure,
    timeline: Timeline,
    marks: Sequence[Mark],
    x_range: tuple[float, float] | None,
) -> None:
    """The marks with their stacked labels, and the visible range when one is fixed."""
    span_s = max(timeline.end - timeline.start, timeline.step)
    if x_range is not None:
        span_s = max(x_range[1] - x_range[0], timeline.step)
    rows = max(mark_levels(marks, span_s), default=0)
    fig.update_layout(
        shapes=mark_shapes(marks),
        annotations=mark_annotations(marks, span_s),
        margin={"t": 30 + MARK_ROW_PX * rows},  # room for the stacked labels
    )
    if x_range is not None:
        fig.update_xaxes(range=[x_range[0] * 1000.0, x_range[1] * 1000.0], autorange=False)


# Mark labels: a label is about this many pixels per character (10 px font) on a plot
# about this wide; labels that would overlap are stacked a row higher each.
MARK_CHAR_PX = 6.2
MARK_PAD_PX = 8.0
MARK_PLOT_PX = 1000.0
MARK_ROW_PX = 14


def mark_levels(marks: Sequence[Mark], span_s: float | None = None) -> list[int]:
    """The row of each mark's label (0: just above the top row), so no two labels overlap.

    Labels are laid out left to right; each takes the lowest row where it clears the
    label before it, its width estimated from its text on a plot :data:`MARK_PLOT_PX`
    wide spanning ``span_s`` seconds. Marks at the same instant always stack (also when
    the span is unknown); a lone mark stays on row 0.
    """
    scale = (span_s or 0.0) / MARK_PLOT_PX  # seconds per pixel
    levels = [0] * len(marks)
    right_edges: list[float] = []  # per row: where its last label ends, seconds
    for i in sorted(range(len(marks)), key=lambda k: marks[k].at):
        m = marks[i]
        half = (len(m.text) * MARK_CHAR_PX / 2 + MARK_PAD_PX) * scale
        left, right = m.at - half, m.at + half
        for row, edge in enumerate(right_edges):
            if left > edge:
                levels[i] = row
                right_edges[row] = right
                break
        else:
            levels[i] = len(right_edges)
            right_edges.append(right)
    return levels


def mark_shapes(marks: Sequence[Mark]) -> list[dict[str, Any]]:
    """Vertical lines across every row at the marks' times."""
    return [
        {
            "type": "line",
            "xref": "x",
            "yref": "paper",
            "x0": m.at * 1000.0,
            "x1": m.at * 1000.0,
            "y0": 0,
            "y1": 1,
            "line": {"color": m.colour, "dash": "dot", "width": 1.5},
        }
        for m in marks
    ]


def mark_annotations(marks: Sequence[Mark], span_s: float | None = None) -> list[dict[str, Any]]:
    """The marks' labels above the top row, stacked where they would overlap
    (:func:`mark_levels`; ``span_s``: the seconds the x axis spans)."""
    levels = mark_levels(marks, span_s)
    return [
        {
            "x": m.at * 1000.0,
            "y": 1.0,
            "xref": "x",
            "yref": "paper",
            "text": m.text,
            "showarrow": False,
            "yanchor": "bottom",
            "yshift": level * MARK_ROW_PX,
            "font": {"size": 10, "color": m.colour},
            "bgcolor": "rgba(255,255,255,0.85)",
        }
        for m, level in zip(marks, levels, strict=True)
    ]


def _layout(fig: go.Figure, timeline: Timeline, height: int, uirevision: str | None) -> None:
    legends = {}
    for i in range(1, 6):
        domain = fig.layout[f"yaxis{'' if i == 1 else i}"].domain
        legends[f"legend{'' if i == 1 else i}"] = {
            "x": 1.1 if i == 4 else 1.01,  # row 4's right axis has its labels there
            "y": domain[1],
            "yanchor": "top",
            "xanchor": "left",
            "font": {"size": 11},
            "bgcolor": "rgba(255,255,255,0)",
            "orientation": "h" if i == 1 else "v",
        }
    fig.update_layout(
        height=height,
        margin={"l": 70, "r": 190, "t": 30, "b": 40},
        barmode="overlay",
        bargap=0,
        uniformtext={"minsize": 9, "mode": "hide"},
        hovermode="x unified",
        plot_bgcolor="#ffffff",
        uirevision=uirevision or f"{timeline.target}\n{timeline.model_name}",
        **legends,
    )
    fig.update_xaxes(
        type="date",
        showgrid=True,
        gridcolor="#eeeeee",
        showspikes=True,
        spikemode="across",
        spikethickness=1,
    )
    fig.update_xaxes(title_text="time (UTC)", row=5, col=1)
    fig.update_yaxes(showgrid=True, gridcolor="#eeeeee", zeroline=False, rangemode="tozero")
    fig.update_yaxes(showticklabels=False, showgrid=False, fixedrange=True, row=1, col=1)
    for row, title in ((2, "TTFT (s)"), (3, "ITL (ms)"), (4, "requests"), (5, "KV cache (%)")):
        fig.update_yaxes(title_text=title, row=row, col=1)
    fig.update_yaxes(range=[0, 105], row=5, col=1)
