"""Pure figure builders of the fleet page: records from :mod:`app.read.fleetpoints` in, Plotly
figures out (no I/O, no Dash).

* :func:`replicas_figure` — the replicas side by side over time (TTFT p99, ITL p99,
  running, KV), one line per replica plus the fleet's own p99 (of all requests, from the
  summed buckets); windows where a replica was flagged carry a thin "x" drawn behind
  the lines (the line stays visible). The legend calls a replica "imbalanced" when it is
  flagged in the window the page's table shows (``flagged``): legend and table agree.
* :func:`replicas_bars` — the latest window, one bar per replica per signal, with the
  fair share on the running row; labels keep a readable size (never shrunk to the bar).
* :func:`slo_figure` — attainment per objective against the SLO's target, and the error
  budget left, over time.

An imbalanced replica is never told by colour alone: its legend entry, bar text and
markers say "imbalanced". A percentile whose rank fell in the ``+Inf`` bucket is a lower
bound: a gap in the line with a "≥" marker, and "≥" in bar text.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.diagnose.records import fmt_value
from app.read.fleetpoints import FleetSeries, ReplicaPoint, SloSeries
from app.ui import palette
from app.ui.figures import slo_line

FLAG_MARKER = {
    "symbol": palette.IMBALANCED_SYMBOL,
    "size": 8,
    "color": palette.IMBALANCED,
    "line": {"color": palette.IMBALANCED, "width": 1.5},
    "opacity": 0.8,
}
BAR_TEXT_PX = 11  # bar labels: this size, never shrunk to fit a narrow bar
Get = Callable[[ReplicaPoint], tuple[float | None, bool]]
# (row title, hover unit, scale, getter): the rows of the side-by-side figure
ROWS: tuple[tuple[str, str, float, Get], ...] = (
    ("TTFT p99 (s)", "s", 1.0, lambda p: (p.ttft_p99, p.ttft_p99_ge)),
    ("ITL p99 (ms)", "ms", 1000.0, lambda p: (p.itl_p99, p.itl_p99_ge)),
    ("running (avg)", "", 1.0, lambda p: (p.running_avg, False)),
    ("KV usage (avg %)", "%", 100.0, lambda p: (p.kv_avg, False)),
)


def replica_name(replica: str, flagged: bool) -> str:
    """A replica's legend text: its name, and the imbalance label when flagged."""
    return f"{replica} ({palette.IMBALANCED_LABEL})" if flagged else replica


def _line(
    points: Sequence[ReplicaPoint], step: float, get: Get, scale: float
) -> tuple[list[float | None], list[float | None], list[ReplicaPoint]]:
    """x (ms), y of exact values with gaps where windows are missing; the ≥ points apart."""
    xs: list[float | None] = []
    ys: list[float | None] = []
    lower: list[ReplicaPoint] = []
    prev: float | None = None
    for p in points:
        if prev is not None and p.end - prev > step * 1.5:
            xs.append((prev + step) * 1000.0)
            ys.append(None)
        v, ge = get(p)
        if ge and v is not None:
            lower.append(p)
        xs.append(p.end * 1000.0)
        ys.append(None if v is None or ge else v * scale)
        prev = p.end
    return xs, ys, lower


def _add_lines(
    fig: go.Figure,
    points: Sequence[ReplicaPoint],
    step: float,
    *,
    name: str,
    group: str,
    colour: str,
    dash: str,
    width: float,
) -> None:
    for row, (_title, unit, scale, get) in enumerate(ROWS, start=1):
        xs, ys, lower = _line(points, step, get, scale)
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                name=name,
                legendgroup=group,
                showlegend=row == 1,
                mode="lines",
                line={"color": colour, "dash": dash, "width": width},
                hovertemplate=f"%{{y:.3g}} {unit}<extra>{name}</extra>",
            ),
            row=row,
            col=1,
        )
        if lower:
            fig.add_trace(
                go.Scatter(
                    x=[p.end * 1000.0 for p in lower],
                    y=[(get(p)[0] or 0.0) * scale for p in lower],
                    name=f"{name} ≥ top bucket",
                    legendgroup=group,
                    showlegend=False,
                    mode="markers",
                    marker={"symbol": "triangle-up-open", "size": 9, "color": colour},
                    hovertemplate=f"≥ %{{y:.3g}} {unit} (above the highest bucket)"
                    f"<extra>{name}</extra>",
                ),
                row=row,
                col=1,
            )


def _flag_markers(fig: go.Figure, series: FleetSeries) -> None:
    """An "x" on the TTFT and running rows at every window where a replica was flagged."""
    shown = False
    for row in (1, 3):
        _, unit, scale, get = ROWS[row - 1]
        xs, ys, text = [], [], []
        for replica in series.replicas:
            for p in series.points.get(replica, ()):
                v = get(p)[0]
                if p.flags and v is not None:
                    xs.append(p.end * 1000.0)
                    ys.append(v * scale)
                    text.append(f"{replica} {palette.IMBALANCED_LABEL}: {', '.join(p.flags)}")
        if not xs:
            continue
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                text=text,
                name=f"{palette.IMBALANCED_LABEL} window",
                legendgroup="imbalanced",
                showlegend=not shown,
                mode="markers",
                marker=FLAG_MARKER,
                hovertemplate=f"%{{text}}<br>%{{y:.3g}} {unit}<extra></extra>",
            ),
            row=row,
            col=1,
        )
        shown = True


def latest_flagged(series: FleetSeries) -> tuple[str, ...]:
    """Replicas flagged in the series' latest window (the table's, on a live page)."""
    last = max((p.end for ps in series.points.values() for p in ps), default=None)
    return tuple(
        r
        for r in series.replicas
        if any(p.end == last and p.flags for p in series.points.get(r, ()))
    )


def replicas_figure(
    series: FleetSeries,
    *,
    flagged: Collection[str] | None = None,
    uirevision: str | None = None,
    height: int = 760,
) -> go.Figure:
    """The replicas of one fleet side by side over time, with the fleet's p99 and SLOs.

    ``flagged``: the replicas the page calls imbalanced (its table's window; default the
    series' latest window); earlier flags show as markers only.
    """
    fig = make_subplots(rows=len(ROWS), cols=1, shared_xaxes=True, vertical_spacing=0.04)
    _flag_markers(fig, series)  # first: drawn behind the lines they mark
    flagged = set(latest_flagged(series) if flagged is None else flagged)
    for i, replica in enumerate(series.replicas):
        colour, dash = palette.replica_style(i)
        is_flagged = replica in flagged
        _add_lines(
            fig,
            series.points.get(replica, ()),
            series.step,
            name=replica_name(replica, is_flagged),
            group=replica,
            colour=colour,
            dash=dash,
            width=3.0 if is_flagged else 1.5,
        )
    fleet = series.fleet_points
    for row in (1, 2):
        _, unit, scale, get = ROWS[row - 1]
        xs, ys, _ = _line(fleet, series.step, get, scale)
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                name="fleet p99 (all requests)",
                legendgroup="fleet",
                showlegend=row == 1,
                mode="lines",
                line={"color": palette.FLEET, "width": 2.5},
                hovertemplate=f"%{{y:.3g}} {unit}<extra>fleet p99</extra>",
            ),
            row=row,
            col=1,
        )
    span = [series.start * 1000.0, series.end * 1000.0]
    for row, slo, scale in ((1, series.slo_ttft_p99, 1.0), (2, series.slo_itl_p99, 1000.0)):
        unit = ROWS[row - 1][1]
        fig.add_trace(slo_line(span, slo * scale, unit), row=row, col=1)
    fig.update_layout(
        height=height,
        margin={"l": 70, "r": 20, "t": 30, "b": 40},
        hovermode="closest",
        plot_bgcolor="#ffffff",
        uirevision=uirevision or series.fleet,
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
    )
    fig.update_xaxes(type="date", showgrid=True, gridcolor="#eeeeee")
    fig.update_xaxes(title_text="time (UTC)", row=len(ROWS), col=1)
    fig.update_yaxes(showgrid=True, gridcolor="#eeeeee", zeroline=False, rangemode="tozero")
    for row, (title, *_rest) in enumerate(ROWS, start=1):
        fig.update_yaxes(title_text=title, row=row, col=1)
    return fig


BARS: tuple[tuple[str, str], ...] = (
    ("running share", "ratio"),
    ("waiting (avg)", ""),
    ("KV usage (avg)", "ratio"),
    ("TTFT p99", "s"),
    ("ITL p99", "s"),
)


def _bar_value(p: ReplicaPoint, title: str, total: float) -> tuple[float | None, bool]:
    if title == "running share":
        return (p.running_avg / total if p.running_avg is not None and total > 0 else None), False
    if title == "waiting (avg)":
        return p.waiting_avg, False
    if title == "KV usage (avg)":
        return p.kv_avg, False
    if title == "TTFT p99":
        return p.ttft_p99, p.ttft_p99_ge
    return p.itl_p99, p.itl_p99_ge


def replicas_bars(
    points: Mapping[str, ReplicaPoint],
    order: Sequence[str],
    *,
    fair_share: float | None,
    height: int = 300,
) -> go.Figure:
    """The latest window, replicas side by side: one bar per replica for each signal; a
    flagged replica's bars are hatched and say "imbalanced" (its ``flags``) in text."""
    fig = make_subplots(
        rows=1, cols=len(BARS), subplot_titles=[t for t, _ in BARS], horizontal_spacing=0.05
    )
    total = sum(p.running_avg or 0.0 for p in points.values())
    index = {r: i for i, r in enumerate(order)}
    shown = [r for r in order if r in points]
    for col, (title, unit) in enumerate(BARS, start=1):
        values = [_bar_value(points[r], title, total) for r in shown]
        flagged = [bool(points[r].flags) for r in shown]
        fig.add_trace(
            go.Bar(
                x=shown,
                y=[v if v is not None else 0.0 for v, _ in values],
                text=[
                    fmt_value(v, unit, ge) + (f"<br>{palette.IMBALANCED_LABEL}" if f else "")
                    for (v, ge), f in zip(values, flagged, strict=True)
                ],
                textposition="outside",
                textangle=0,
                textfont={"size": BAR_TEXT_PX},
                constraintext="none",
                cliponaxis=False,
                marker={
                    "color": [palette.replica_style(index[r])[0] for r in shown],
                    "pattern": {
                        "shape": [palette.IMBALANCED_PATTERN if f else "" for f in flagged],
                        "fgcolor": palette.IMBALANCED,
                    },
                    "line": {
                        "color": [palette.IMBALANCED if f else "#ffffff" for f in flagged],
                        "width": [2 if f else 0 for f in flagged],
                    },
                },
                customdata=[", ".join(points[r].flags) or "in line with its peers" for r in shown],
                hovertemplate="%{x}: %{text}<br>%{customdata}<extra>" + title + "</extra>",
                name=title,
                showlegend=False,
            ),
            row=1,
            col=col,
        )
    if fair_share is not None and shown:
        fig.add_hline(
            y=fair_share,
            line={"color": palette.TARGET_LINE, "dash": "dash", "width": 1},
            annotation_text=f"fair share {fair_share:.0%}",
            annotation_position="top left",
            row=1,
            col=1,
        )
    fig.update_layout(
        height=height,
        margin={"l": 40, "r": 20, "t": 60, "b": 40},
        plot_bgcolor="#ffffff",
        bargap=0.25,
        uniformtext={"minsize": BAR_TEXT_PX, "mode": "show"},
    )
    # Headroom above the tallest bar for its two-line label.
    fig.update_yaxes(showgrid=True, gridcolor="#eeeeee", rangemode="tozero")
    for col, (title, _unit) in enumerate(BARS, start=1):
        tallest = max(
            (v for r in shown if (v := _bar_value(points[r], title, total)[0]) is not None),
            default=0.0,
        )
        if tallest > 0:
            fig.update_yaxes(range=[0, tallest * 1.3], row=1, col=col)
    for col in (1, 3):
        fig.update_yaxes(tickformat=".0%", row=1, col=col)
    return fig


def _pct(v: float | None) -> float | None:
    return None if v is None else v * 100.0


def objective_label(name: str, bound: float | None) -> str:
    """``"ttft ≤ 2.00 s"``; ``"errors"`` for the finished-reason objective."""
    return name if bound is None else f"{name} ≤ {fmt_value(bound, 's')}"


def slo_figure(series: Sequence[SloSeries], *, height: int = 420) -> go.Figure:
    """Attainment per objective (with each SLO's target) and the budget left, over time."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    k = 0
    for s in series:
        xs = [p.end * 1000.0 for p in s.points]
        names = sorted({n for p in s.points for n in p.attainment})
        for name in names:
            colour, dash = palette.replica_style(k)
            k += 1
            label = f"{s.name}: {objective_label(name, s.objectives.get(name))}"
            ys = [None if (v := p.attainment.get(name)) is None else v * 100.0 for p in s.points]
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=ys,
                    name=label,
                    mode="lines+markers",
                    marker={"size": 4},
                    line={"color": colour, "dash": dash},
                    hovertemplate=f"%{{y:.2f}} %<extra>{label}</extra>",
                ),
                row=1,
                col=1,
            )
        if xs:
            fig.add_trace(
                go.Scatter(
                    x=[xs[0], xs[-1]],
                    y=[s.target * 100.0] * 2,
                    name=f"{s.name}: target {s.target:.2%}",
                    mode="lines",
                    line={"color": palette.TARGET_LINE, "dash": "dash", "width": 1},
                    hoverinfo="skip",
                ),
                row=1,
                col=1,
            )
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[_pct(p.budget_remaining) for p in s.points],
                name=f"{s.name}: budget left",
                mode="lines",
                line={"color": palette.FLEET, "width": 2},
                hovertemplate=f"%{{y:.1f}} %<extra>{s.name} budget left</extra>",
            ),
            row=2,
            col=1,
        )
    if not series:
        fig.add_annotation(
            text="No SLO applies to this fleet",
            xref="paper",
            yref="paper",
            x=0.5,
            y=0.5,
            showarrow=False,
        )
    fig.add_hline(y=0, line={"color": palette.TARGET_LINE, "width": 1}, row=2, col=1)
    fig.update_layout(
        height=height,
        margin={"l": 70, "r": 20, "t": 30, "b": 40},
        plot_bgcolor="#ffffff",
        hovermode="x unified",
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
    )
    fig.update_xaxes(type="date", showgrid=True, gridcolor="#eeeeee")
    fig.update_xaxes(title_text="time (UTC)", row=2, col=1)
    fig.update_yaxes(showgrid=True, gridcolor="#eeeeee")
    fig.update_yaxes(title_text="attainment (%)", row=1, col=1)
    fig.update_yaxes(title_text="error budget left (%)", row=2, col=1)
    return fig
