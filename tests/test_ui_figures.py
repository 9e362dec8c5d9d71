"""Pure figure builders, downsampling and palette: no browser, no Dash server."""

from __future__ import annotations

import pytest

from app.diagnose import DiagnosisClass, classes
from app.ui import palette
from app.ui.downsample import downsample
from app.ui.figures import (
    MARK_CHAR_PX,
    MARK_PLOT_PX,
    MARK_ROW_PX,
    Mark,
    band_runs,
    mark_levels,
    target_figure,
)
from tests.ui_points import T0, pt, series, timeline


def _trace(fig, name):  # type: ignore[no-untyped-def]
    found = [t for t in fig.data if t.name == name]
    assert found, f"no trace {name!r} in {[t.name for t in fig.data]}"
    return found[0]


def test_band_runs_merge_consecutive_windows_of_one_class() -> None:
    pts = series(["healthy", "healthy", "queue_bound", "queue_bound", "queue_bound", "healthy"])
    runs = band_runs(pts, 15.0)
    assert [(r.cls, r.windows) for r in runs] == [
        ("healthy", 2),
        ("queue_bound", 3),
        ("healthy", 1),
    ]
    # The runs tile the axis: each window is drawn as the step before its end.
    assert runs[0].start == T0 and runs[0].end == T0 + 30
    assert runs[1].start == runs[0].end and runs[-1].end == T0 + 90


def test_band_runs_break_at_a_gap_in_the_data() -> None:
    pts = [pt(T0 + 15), pt(T0 + 30), pt(T0 + 300), pt(T0 + 315)]
    runs = band_runs(pts, 15.0)
    assert [(r.start, r.end) for r in runs] == [(T0, T0 + 30), (T0 + 285, T0 + 315)]


def test_sub_cause_starts_a_new_run_and_is_in_the_label() -> None:
    pts = [
        pt(T0 + 15, "decode_bound", sub_cause="bandwidth_bound"),
        pt(T0 + 30, "decode_bound", sub_cause="prefill_interference"),
    ]
    runs = band_runs(pts, 15.0)
    assert len(runs) == 2
    fig = target_figure(timeline(pts))
    band = _trace(fig, "Decode-bound")
    assert "Decode-bound (prefill interference)" in band.text


def test_five_rows_share_one_time_axis_so_zooming_one_zooms_all() -> None:
    fig = target_figure(timeline(series(["healthy"] * 10)))
    layout = fig.layout
    # make_subplots ties every row's x axis to the bottom one
    for axis in ("xaxis", "xaxis2", "xaxis3", "xaxis4"):
        assert layout[axis].matches == "x5"
    assert layout.xaxis.type == "date"
    assert layout.uirevision  # kept across live refreshes, so the zoom stays


def test_slo_lines_are_drawn_at_the_stream_slo() -> None:
    fig = target_figure(timeline(series(["healthy"] * 4), slo_ttft=4.0, slo_itl=0.15))
    ttft_slo = _trace(fig, "SLO p99 4 s")
    itl_slo = _trace(fig, "SLO p99 150 ms")
    assert set(ttft_slo.y) == {4.0}
    assert list(itl_slo.y) == [pytest.approx(150.0)] * 2
    assert _trace(fig, "90% (pool full)").y == (90.0, 90.0)


def test_percentile_in_the_inf_bucket_is_a_lower_bound_marker_not_a_line_point() -> None:
    pts = [pt(T0 + 15, ttft=0.5), pt(T0 + 30, ttft=10.0, ttft_ge=True), pt(T0 + 45, ttft=0.6)]
    fig = target_figure(timeline(pts))
    line = _trace(fig, "TTFT p99")
    assert list(line.y) == [0.5, None, 0.6]
    bound = _trace(fig, "TTFT p99 ≥ top bucket")
    assert list(bound.y) == [10.0]
    assert bound.x == ((T0 + 30) * 1000.0,)
    assert "≥" in bound.hovertemplate


def test_itl_is_drawn_in_milliseconds() -> None:
    fig = target_figure(timeline([pt(T0 + 15, itl=0.042)]))
    assert _trace(fig, "ITL p99").y == (pytest.approx(42.0),)


def test_lines_break_where_windows_are_missing() -> None:
    pts = [pt(T0 + 15), pt(T0 + 30), pt(T0 + 600)]
    y = list(_trace(target_figure(timeline(pts)), "TTFT p99").y)
    assert y == [0.5, 0.5, None, 0.5]


def test_preemptions_are_marked_on_the_kv_row() -> None:
    pts = [pt(T0 + 15), pt(T0 + 30, "kv_pressure", kv=0.97, preemptions=3.0)]
    fig = target_figure(timeline(pts))
    marks = _trace(fig, "preemptions")
    assert marks.x == ((T0 + 30) * 1000.0,)
    assert marks.y == (pytest.approx(97.0),)
    assert marks.yaxis == "y5"


def test_band_is_the_first_row_with_a_text_label_and_pattern_per_class() -> None:
    pts = series(["healthy", "queue_bound", "kv_pressure"])
    fig = target_figure(timeline(pts))
    queue = _trace(fig, "Queue-bound")
    assert queue.yaxis == "y" and queue.orientation == "h"
    assert queue.text == ("Queue-bound",)
    assert queue.marker.pattern.shape == palette.style("queue_bound").pattern
    assert queue.marker.color == palette.style("queue_bound").colour


def test_marks_are_vertical_lines_across_all_rows() -> None:
    fig = target_figure(timeline(series(["healthy"] * 3)), marks=[Mark(T0 + 30, "peak")])
    (shape,) = fig.layout.shapes
    assert shape.yref == "paper" and shape.x0 == (T0 + 30) * 1000.0
    assert fig.layout.annotations[0].text == "peak"


def test_mark_labels_at_one_instant_are_stacked_not_overprinted() -> None:
    # An incident: the peak and two alerts firing in the same second, one just after.
    tl = timeline(series(["healthy"] * 40))
    at = T0 + 300
    marks = [
        Mark(at, "peak"),
        Mark(at, "PhasewatchTTFTOverSLO firing", palette.VERMILLION),
        Mark(at, "PhasewatchQueueBuildup firing", palette.VERMILLION),
        Mark(at + 15, "PhasewatchSLOBurnFast firing", palette.VERMILLION),
        Mark(T0 + 15, "early"),  # far from the others: stays on the first row
    ]
    fig = target_figure(tl, marks=marks)
    notes = fig.layout.annotations
    assert [a.text for a in notes] == [m.text for m in marks]
    assert len({(a.x, a.yshift) for a in notes}) == len(notes)  # every position distinct
    assert notes[4].yshift == 0 and notes[0].yshift == 0  # the first at an instant: row 0
    # No two labels overlap: same row means their estimated boxes are apart in time.
    span = (tl.end - tl.start) * 1000.0

    def box(a):  # type: ignore[no-untyped-def]
        half = (len(a.text) * MARK_CHAR_PX / 2) * span / MARK_PLOT_PX
        return a.x - half, a.x + half

    for i, a in enumerate(notes):
        for b in notes[i + 1 :]:
            if a.yshift == b.yshift:
                (a0, a1), (b0, b1) = box(a), box(b)
                assert a1 < b0 or b1 < a0, (a.text, b.text)
    # The top margin grows with the rows, so the stacked labels stay on the figure.
    rows = max(a.yshift for a in notes) // MARK_ROW_PX
    assert rows >= 3 and fig.layout.margin.t >= 30 + rows * MARK_ROW_PX
    assert notes[1].font.color == palette.VERMILLION  # alerts read apart from the peak
    assert mark_levels([Mark(at, "a")]) == [0]


def test_downsample_keeps_a_one_window_p99_spike_and_its_class() -> None:
    pts = series(["healthy"] * 5000)
    spike_at = 3333
    pts[spike_at] = pt(pts[spike_at].end, "queue_bound", ttft=30.0, itl=0.9)
    out = downsample(pts, 2000)
    assert len(out) <= 2000
    assert max(p.ttft_p99 or 0 for p in out) == 30.0
    assert max(p.itl_p99 or 0 for p in out) == 0.9
    assert sum(1 for p in out if p.cls == "queue_bound") == 1


def test_downsample_keeps_the_lower_bound_flag_of_the_maximum() -> None:
    pts = [pt(T0 + 15, ttft=1.0), pt(T0 + 30, ttft=10.0, ttft_ge=True), pt(T0 + 45, ttft=2.0)]
    (merged,) = downsample(pts, 1)
    assert merged.ttft_p99 == 10.0 and merged.ttft_p99_ge
    assert merged.end == T0 + 45


def test_downsample_leaves_small_series_alone() -> None:
    pts = series(["healthy"] * 10)
    assert downsample(pts, 2000) == pts


def test_figure_of_a_long_timeline_is_downsampled_but_the_band_is_not() -> None:
    classes = ["healthy"] * 3000
    classes[1500] = "prefill_bound"
    fig = target_figure(timeline(series(classes)), max_points=1000)
    assert len(_trace(fig, "TTFT p99").y) <= 1000
    prefill = _trace(fig, "Prefill-bound")
    assert prefill.x == (15000.0,)  # one window wide, as computed


def test_every_class_has_a_text_label_distinct_colour_and_pattern() -> None:
    styles = [palette.style(c) for c in DiagnosisClass]
    assert all(s.label for s in styles)
    assert len({s.colour for s in styles}) == len(styles)
    assert all(s.colour in palette.SWATCHES for s in styles)
    # Plotly has eight fill patterns for ten classes: every problem class has its own, and
    # the two shared pairs differ in colour (and label).
    problems = [palette.style(c) for c in DiagnosisClass if (t := classes.term(c)) and t.problem]
    assert len({s.pattern for s in problems}) == len(problems)
    assert len({(s.pattern, s.colour) for s in styles}) == len(styles)
    assert len({s.pattern for s in styles}) >= len(styles) - 2
    assert palette.severity("kv_pressure") > palette.severity("healthy")
    assert palette.label("decode_bound", "bandwidth_bound") == "Decode-bound (bandwidth bound)"
