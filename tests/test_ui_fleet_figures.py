"""Pure builders of the fleet page: figures and components from hand-made records."""

from __future__ import annotations

from typing import Any

import pytest

from app.diagnose.records import Evidence, Hint
from app.fleet.aggregate import FleetKey, fleet_window
from app.fleet.budget import Budget, budget_text
from app.fleet.imbalance import Imbalance, Outlier
from app.fleet.view import FleetView
from app.model import IntervalDelta, Window
from app.read.fleetpoints import FleetSeries, ReplicaPoint, SloPoint, SloSeries
from app.ui import palette
from app.ui.fleet_components import imbalance_panel, replicas_table
from app.ui.fleet_figures import replica_name, replicas_bars, replicas_figure, slo_figure
from app.windows.aggregate import window

EVIL = "<script>alert(1)</script>"


def pt(
    end: float,
    ttft: float | None = 0.2,
    *,
    ge: bool = False,
    running: float = 10.0,
    flags: tuple[str, ...] = (),
) -> ReplicaPoint:
    return ReplicaPoint(end, ttft, ge, 0.05, False, running, 0.0, 0.3, flags)


def series(points: dict[str, list[ReplicaPoint]], fleet: list[ReplicaPoint]) -> FleetSeries:
    return FleetSeries(
        fleet="llama",
        start=0.0,
        end=120.0,
        length=60.0,
        step=15.0,
        replicas=tuple(points),
        points={k: tuple(v) for k, v in points.items()},
        fleet_points=tuple(fleet),
        slo_ttft_p99=2.0,
        slo_itl_p99=0.1,
    )


def _traces(fig: Any, name: str) -> list[Any]:
    return [t for t in fig.data if t.name == name]


def test_each_replica_is_one_line_per_row_and_the_flagged_one_is_labelled() -> None:
    s = series(
        {
            "a": [pt(15), pt(30)],
            "b": [pt(15), pt(30)],
            "c": [pt(15, 5.0, running=40, flags=("load",)), pt(30, 6.0, running=40)],
        },
        [pt(15, 4.0), pt(30, 5.0)],
    )
    assert s.flagged == ("c",)
    fig = replicas_figure(s, flagged=("c",))
    for name in ("a", "b", replica_name("c", True)):
        lines = _traces(fig, name)
        assert len(lines) == 4  # TTFT, ITL, running, KV
        assert sum(bool(t.showlegend) for t in lines) == 1  # one legend entry per replica
    assert replica_name("c", True) == "c (imbalanced)"
    bad = _traces(fig, "c (imbalanced)")[0]
    assert bad.line.width > _traces(fig, "a")[0].line.width
    styles = {(t.line.color, t.line.dash) for n in ("a", "b") for t in _traces(fig, n)[:1]}
    assert len(styles) == 2
    (fleet_ttft, fleet_itl) = _traces(fig, "fleet p99 (all requests)")
    assert list(fleet_ttft.y) == [4.0, 5.0] and list(fleet_itl.y) == [50.0, 50.0]
    marks = _traces(fig, "imbalanced window")
    assert len(marks) == 2  # on the TTFT and the running rows, only where flagged
    assert list(marks[0].x) == [15000.0] and list(marks[0].y) == [5.0]
    assert marks[0].text == ("c imbalanced: load",)
    assert marks[0].marker.symbol == palette.IMBALANCED_SYMBOL
    # The marks leave the line they flag visible: a thin open cross, drawn behind it.
    assert marks[0].marker.symbol.endswith("-open") and "thin" in marks[0].marker.symbol
    assert marks[0].marker.size <= 8
    first_line = next(i for i, t in enumerate(fig.data) if t.name == "c (imbalanced)")
    assert all(fig.data.index(m) < first_line for m in marks)
    assert {"SLO p99 2 s", "SLO p99 100 ms"} <= {t.name for t in fig.data}


def test_a_lower_bound_is_a_gap_with_a_marker_and_missing_windows_break_the_line() -> None:
    s = series({"a": [pt(15), pt(30, 80.0, ge=True), pt(90)]}, [])
    fig = replicas_figure(s)
    ttft = _traces(fig, "a")[0]
    assert list(ttft.x) == [15000.0, 30000.0, 45000.0, 90000.0]
    assert list(ttft.y) == [0.2, None, None, 0.2]
    (ge,) = _traces(fig, "a ≥ top bucket")
    assert list(ge.y) == [80.0] and "≥" in ge.hovertemplate


def test_bars_put_replicas_side_by_side_and_say_imbalanced_in_text() -> None:
    points = {
        "a": pt(60, running=10.0),
        "b": pt(60, running=10.0),
        "c": pt(60, 30.0, ge=True, running=80.0, flags=("load", "ttft")),
    }
    fig = replicas_bars(points, ["a", "b", "c"], fair_share=1 / 3)
    assert len(fig.data) == 5
    share = fig.data[0]
    assert list(share.x) == ["a", "b", "c"]
    assert list(share.y) == pytest.approx([0.1, 0.1, 0.8])
    assert share.text[2] == "80%<br>imbalanced" and share.text[0] == "10%"
    assert list(share.marker.pattern.shape) == ["", "", palette.IMBALANCED_PATTERN]
    ttft = fig.data[3]
    assert ttft.text[2].startswith("≥ 30.00 s")  # a lower bound stays one
    assert share.customdata[2] == "load, ttft"
    assert any(s.y0 == pytest.approx(1 / 3) for s in fig.layout.shapes)
    assert any("fair share 33%" in a.text for a in fig.layout.annotations)
    # Labels keep a readable size: never shrunk to a narrow bar (Plotly's default).
    for bar in fig.data:
        assert bar.constraintext == "none" and bar.textfont.size >= 10
    assert fig.layout.uniformtext.minsize >= 10 and fig.layout.uniformtext.mode == "show"


def test_slo_figure_draws_attainment_against_the_target_and_the_budget() -> None:
    s = SloSeries(
        "chat",
        0.99,
        {"ttft": 2.0, "itl": 0.1},
        60.0,
        (
            SloPoint(60.0, {"ttft": 0.995, "itl": 1.0, "errors": 1.0}, 0.9, 0.5),
            SloPoint(120.0, {"ttft": 0.9, "itl": None, "errors": 1.0}, -0.2, 10.0),
        ),
    )
    fig = slo_figure([s])
    names = {t.name for t in fig.data}
    assert {"chat: ttft ≤ 2.00 s", "chat: itl ≤ 100 ms", "chat: errors"} <= names
    (target,) = _traces(fig, "chat: target 99.00%")
    assert list(target.y) == [99.0, 99.0]
    (ttft,) = _traces(fig, "chat: ttft ≤ 2.00 s")
    assert list(ttft.y) == pytest.approx([99.5, 90.0])
    assert list(_traces(fig, "chat: itl ≤ 100 ms")[0].y) == [100.0, None]
    (left,) = _traces(fig, "chat: budget left")
    assert list(left.y) == pytest.approx([90.0, -20.0])
    empty = slo_figure([])
    assert empty.layout.annotations[0].text == "No SLO applies to this fleet"


def test_replica_styles_differ_for_35_replicas() -> None:
    assert len({palette.replica_style(i) for i in range(35)}) == 35
    assert palette.replica_style(35) == palette.replica_style(0)


def test_budget_text() -> None:
    def left(remaining: float | None, events: float = 5000.0) -> Budget:
        return Budget(remaining, None, {}, 0.0, events, 1000.0)

    assert budget_text(left(0.874)) == "87% left"
    assert budget_text(left(-0.12)) == "overspent (-12%)"
    assert budget_text(left(None, 0.0)) == "no data"
    assert budget_text(left(None, 312.0)) == "n/a (312 events)"  # too few to judge


def test_the_legend_calls_imbalanced_who_the_table_does() -> None:
    # c was flagged earlier in the range, b in the latest window (the table's).
    s = series(
        {
            "a": [pt(15), pt(30)],
            "b": [pt(15), pt(30, flags=("queue",))],
            "c": [pt(15, flags=("load",)), pt(30)],
        },
        [],
    )
    names = {t.name for t in replicas_figure(s).data if t.showlegend}
    assert {"a", "b (imbalanced)", "c"} <= names and "c (imbalanced)" not in names
    # The page passes the table's own verdict (a chosen window): the legend follows it.
    names = {t.name for t in replicas_figure(s, flagged=("c",)).data if t.showlegend}
    assert {"a", "b", "c (imbalanced)"} <= names
    # Earlier flags still show, as markers.
    marks = _traces(replicas_figure(s), "imbalanced window")
    assert sorted(x for m in marks[:1] for x in m.x) == [15000.0, 30000.0]


def _lab(colour: str) -> tuple[float, float, float]:
    """CIELAB of an sRGB hex colour (D65)."""

    def linear(c: float) -> float:
        return ((c + 0.055) / 1.055) ** 2.4 if c > 0.04045 else c / 12.92

    r, g, b = (linear(int(colour.lstrip("#")[i : i + 2], 16) / 255) for i in (0, 2, 4))
    x = (r * 0.4124 + g * 0.3576 + b * 0.1805) / 0.95047
    y = r * 0.2126 + g * 0.7152 + b * 0.0722
    z = (r * 0.0193 + g * 0.1192 + b * 0.9505) / 1.08883

    def f(v: float) -> float:
        return v ** (1 / 3) if v > 0.008856 else 7.787 * v + 16 / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def test_replica_colours_are_not_class_colours() -> None:
    classes = {st.colour.upper() for st in palette.STYLES.values()} | set(palette.SWATCHES)
    for i in range(len(palette.REPLICA_COLOURS)):
        colour = palette.replica_style(i)[0].upper()
        assert colour not in classes
        for c in classes:  # not merely different hex: far apart to the eye (CIE76 ΔE)
            delta = sum((a - b) ** 2 for a, b in zip(_lab(colour), _lab(c), strict=True))
            assert delta**0.5 >= 30, (colour, c)


def _window(target: str, running: float) -> Window:
    d = IntervalDelta(
        target=target,
        model_name="m",
        start=55.0,
        end=60.0,
        histograms={},
        counters={},
        gauges={"running": running, "waiting": 0.0},
    )
    return window([d], start=0.0, end=60.0, target=target, model_name="m")


def _texts(component: Any) -> list[str]:
    """Every string child in a Dash component tree (what the browser shows as text)."""
    out: list[str] = []
    children = getattr(component, "children", component)
    if isinstance(children, str):
        return [children]
    if isinstance(children, list | tuple):
        for c in children:
            out.extend(_texts(c))
    elif children is not None and children is not component:
        out.extend(_texts(children))
    return out


def test_imbalance_panel_and_table_name_the_replica_in_words_and_as_text() -> None:
    from app.diagnose import DEFAULT_CONFIG, diagnose

    ws = [_window("a", 5.0), _window(EVIL, 50.0)]
    fw = fleet_window(FleetKey("m"), ws, start=0.0, end=60.0)
    hint = Hint("lb_least_request", "Route by outstanding requests", "least_conn", "why")
    outlier = Outlier(
        EVIL,
        "load",
        f"{EVIL} runs 50 requests",
        (Evidence("imbalance", "running_avg", 50.0, ">=", 7.5, True, ""),),
        (hint,),
    )
    view = FleetView(
        fw,
        diagnose(fw.window, DEFAULT_CONFIG),
        Imbalance((outlier,), (), 0.5, (hint,)),
        {w.target: diagnose(w, DEFAULT_CONFIG) for w in ws},
    )
    panel = imbalance_panel(view)
    texts = _texts(panel)
    assert "imbalanced: load" in texts and EVIL in texts
    assert f"{EVIL} runs 50 requests" in texts
    assert getattr(panel, "data-flagged") == EVIL
    points = {
        w.target: ReplicaPoint(60.0, None, False, None, False, r, 0.0, None, f)
        for w, r, f in ((ws[0], 5.0, ()), (ws[1], 50.0, ("load",)))
    }
    table = replicas_table(view, points, {}, href=lambda t: f"/ui/targets/{t}")
    rows = table.children[1].children
    assert [getattr(r, "data-flagged") for r in rows[1:]] == [
        "false",
        "true",
    ]
    assert "imbalanced: load" in _texts(rows[2]) and "in line with its peers" in _texts(rows[1])
    assert "5 (9%)" in _texts(rows[1])
