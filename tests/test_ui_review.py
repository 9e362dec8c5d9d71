"""Spike finder, Markdown incident summary, diagnosis card and time ranges (pure)."""

from __future__ import annotations

import dataclasses

import pytest
from dash import html

from app.diagnose import diagnose
from app.model import Quantile
from app.ui import timerange
from app.ui.alertfeed import AlertRow
from app.ui.components import diagnosis_card
from app.ui.markdown import esc, incident_markdown
from app.ui.pages.overview import _metric
from app.ui.spikes import dominant_class, find_spikes
from tests.diagnose_windows import make_window
from tests.ui_points import T0, pt, series, timeline


def _text(component: object) -> str:
    """All text inside a Dash component tree."""
    if isinstance(component, str | int | float):
        return str(component)
    if isinstance(component, list | tuple):
        return " ".join(_text(c) for c in component)
    children = getattr(component, "children", None)
    return "" if children is None else _text(children)


def test_spike_over_slo_spans_its_windows_with_peak_and_dominant_class() -> None:
    pts = series(["healthy"] * 10)
    for i, v in ((4, 3.0), (5, 9.0), (6, 4.0)):
        pts[i] = pt(pts[i].end, "queue_bound", ttft=v)
    (s,) = find_spikes(timeline(pts))
    assert s.start == pts[4].end - 60.0 and s.end == pts[6].end
    (peak,) = s.peaks
    assert (peak.signal, peak.value, peak.at, peak.reason) == ("ttft", 9.0, pts[5].end, "over SLO")
    assert s.dominant == "queue_bound"


def test_spike_over_the_preceding_baseline_counts_below_the_slo() -> None:
    pts = series(["healthy"] * 30, itl=0.02)
    pts[25] = pt(pts[25].end, "decode_bound", itl=0.08)  # under the 100 ms SLO, 4x baseline
    (s,) = find_spikes(timeline(pts), k=3.0)
    (peak,) = s.peaks
    assert peak.signal == "itl" and peak.baseline == pytest.approx(0.02)
    assert peak.reason == "4.0× baseline"


def test_an_ongoing_spike_does_not_raise_its_own_baseline() -> None:
    pts = series(["healthy"] * 60, itl=0.02)
    for i in range(20, 50):  # a long plateau at 4x: stays one spike to the end
        pts[i] = pt(pts[i].end, "decode_bound", itl=0.08)
    (s,) = find_spikes(timeline(pts), k=3.0, baseline_windows=10)
    assert s.end == pts[49].end


def test_ttft_and_itl_spikes_that_overlap_are_one_incident() -> None:
    pts = series(["healthy"] * 10)
    pts[3] = pt(pts[3].end, "prefill_bound", ttft=5.0)
    pts[4] = pt(pts[4].end, "decode_bound", itl=0.4)
    (s,) = find_spikes(timeline(pts))
    assert {p.signal for p in s.peaks} == {"ttft", "itl"}


def test_separate_spikes_stay_separate_and_ge_flags_survive() -> None:
    pts = series(["healthy"] * 20)
    pts[2] = pt(pts[2].end, "queue_bound", ttft=40.0, ttft_ge=True)
    pts[15] = pt(pts[15].end, "queue_bound", ttft=3.0)
    first, second = find_spikes(timeline(pts))
    assert first.peaks[0].ge and not second.peaks[0].ge
    assert first.end < second.start


def test_no_spike_in_a_calm_range() -> None:
    assert find_spikes(timeline(series(["healthy"] * 50))) == []


def test_dominant_class_prefers_problems_then_severity() -> None:
    pts = series(["healthy", "healthy", "healthy", "decode_bound", "kv_pressure"])
    assert dominant_class(pts) == "kv_pressure"
    assert dominant_class(series(["healthy", "idle", "healthy"])) == "healthy"


def test_markdown_summary_has_times_peaks_classes_evidence_hints_and_alerts() -> None:
    pts = series(["healthy"] * 4 + ["queue_bound"] * 3 + ["healthy"] * 3)
    for i in (4, 5, 6):
        pts[i] = pt(pts[i].end, "queue_bound", ttft=8.0, waiting=30.0)
    tl = timeline(pts, target="vllm-a", model="llama")
    (s,) = find_spikes(tl)
    d = diagnose(
        make_window(ttft=(5.0, 8.0, 120, 6.0), waiting=(30.0, 40.0, 30.0), queue_time=(5.5, 120))
    )
    alert = AlertRow("PhasewatchTTFTOverSLO", "firing", T0 + 90, "vllm-a", "llama", "warning", "")
    md = incident_markdown(s, diagnosis=d, alerts=[alert], source="live")
    assert md.startswith("# Incident: llama on vllm-a\n")
    # from the start of the first hot 60 s window to the end of the last
    assert "2025-11-29 08:00:15 – 2025-11-29 08:01:45 UTC (1 min 30 s)" in md
    assert "| TTFT p99 | 8.00 s |" in md
    assert "Queue-bound" in md
    assert "## Class sequence" in md and "### Evidence" in md and "### What to change" in md
    assert "PhasewatchTTFTOverSLO" in md and "firing" in md


def test_markdown_escapes_label_values() -> None:
    pts = [pt(T0 + 15, "queue_bound", ttft=9.0)]
    (s,) = find_spikes(timeline(pts, model="<script>alert(1)</script>", target="a|b"))
    md = incident_markdown(s, diagnosis=None, alerts=[], source="x")
    assert "<script>" not in md
    assert "&lt;script&gt;alert\\(1\\)&lt;/script&gt;" in md
    assert "a\\|b" in md
    assert esc("a_b*c\nd") == "a\\_b\\*c d"


def test_diagnosis_card_shows_class_sub_cause_evidence_and_hints_with_why() -> None:
    w = make_window(itl=(0.03, Quantile(0.4), 24000, 0.05), step_tokens=(600.0, 8000.0, 3000))
    d = diagnose(w)
    card = diagnosis_card(d, latest=True)
    text = _text(card)
    assert "Decode-bound" in text
    assert "Evidence" in text and "What to change" in text
    assert "why:" in text
    assert "latest window" in text
    hints = [c for c in card.children if isinstance(c, html.Ol)]
    assert hints and len(hints[0].children) == len(d.hints) > 0


def test_time_ranges_resolve_presets_custom_and_errors() -> None:
    now = T0 + 7200
    assert timerange.resolve("1h", None, None, now=now) == (now - 3600, now)
    assert timerange.resolve("all", None, None, now=now, span=(T0, now)) == (T0, now)
    start, end = timerange.resolve("custom", "2025-11-29 08:00", "2025-11-29 08:30:15", now=now)
    assert (start, end) == (T0, T0 + 1815)
    assert timerange.parse_time("2025-11-29 08:00:00.123") == pytest.approx(T0 + 0.123)
    assert timerange.parse_time(str(T0)) == T0
    with pytest.raises(timerange.RangeError):
        timerange.resolve("custom", "2025-11-29 09:00", "2025-11-29 08:00", now=now)
    with pytest.raises(timerange.RangeError):
        timerange.resolve("custom", "yesterday", "now", now=now)
    assert timerange.query("?model=a%2Fb&at=12") == {"model": "a/b", "at": "12"}


def test_a_preset_range_fits_to_data_that_began_inside_it() -> None:
    now = T0 + 3600.0
    # A fresh demo: 4 minutes of data on the 1 h view → the view starts just before them.
    lo, hi = timerange.fit_to_data(T0, now, now - 240.0, step=15.0) or (0.0, 0.0)
    assert hi == now and now - 260.0 < lo < now - 240.0
    assert timerange.fit_to_data(T0, now, T0 + 60.0, step=15.0) is None  # fills the range
    assert timerange.fit_to_data(T0, now, None, step=15.0) is None  # no data
    # The pad never reaches before the range's start.
    assert timerange.fit_to_data(T0, T0 + 100.0, T0 + 15.0, step=15.0) == (T0, T0 + 100.0)


def test_a_click_on_a_line_or_a_band_segment_picks_a_time() -> None:
    from app.ui.pages.target import clicked_time, zoom_of

    line = {"points": [{"x": "2025-11-29 08:00:30", "y": 1.0, "curveNumber": 4}]}
    assert clicked_time(line) == T0 + 30
    band = {"points": [{"x": "2025-11-29 08:02:00", "base": T0 * 1000, "y": "class"}]}
    assert clicked_time(band) == T0 + 60
    assert clicked_time({"points": []}) is None
    zoom = zoom_of(
        {"xaxis2.range[0]": "2025-11-29 08:00:00", "xaxis2.range[1]": "2025-11-29 08:10:00"}, None
    )
    assert zoom == [T0, T0 + 600]
    assert zoom_of({"autosize": True}, zoom) == zoom
    assert zoom_of({"xaxis.autorange": True}, zoom) is None


def test_spikes_read_the_diagnosis_judgement_of_the_slo() -> None:
    """A p99 above its SLO that the histogram judges within is no spike; an unproven one
    is, and says so."""
    pts = series(["healthy"] * 10)
    pts[3] = dataclasses.replace(pt(pts[3].end, ttft=2.4), ttft_slo="within")
    pts[7] = dataclasses.replace(pt(pts[7].end, "prefill_bound", ttft=2.4), ttft_slo="unproven")
    (s,) = find_spikes(timeline(pts), k=100.0)
    (peak,) = s.peaks
    assert (peak.at, peak.reason) == (pts[7].end, "over SLO (unproven)")


def test_diagnosis_card_marks_an_unproven_breach_apart_from_a_proven_one() -> None:
    d = dataclasses.replace(diagnose(make_window()), ttft_slo="unproven")
    card = diagnosis_card(d, latest=True)
    assert "≈ unproven" in _text(card) and "▲" not in _text(card)
    over = _metric("TTFT p99", "6.00 s", verdict="over")
    unproven = _metric("TTFT p99", "2.37 s", verdict="unproven")
    within = _metric("TTFT p99", "2.47 s", verdict="within", above=True)
    assert over.className == "metric over" and "prove" in over.title
    assert unproven.className == "metric unproven" and "cannot prove" in unproven.title
    assert within.className == "metric" and "within" in within.title
