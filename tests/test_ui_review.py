"""Spike finder, Markdown incident summary, diagnosis card and time ranges (pure)."""

from __future__ import annotations

import dataclasses

import pytest
from dash import html

from app.diagnose import diagnose
from app.model import Quantile
from app.read.alertfeed import AlertRow
from app.read.markdown_text import code
from app.ui import timerange
from app.ui.components import diagnosis_card
from app.ui.markdown import incident_markdown
from app.ui.spikes import dominant_class, find_spikes
from app.ui.streamcards import _metric
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
    # It starts where the last calm window ends and is resolved where the first calm one
    # after it starts (a step after the start at least: three 60 s windows over, 15 s
    # apart, hold under a window's worth of misses between two calm windows).
    assert s.start == pts[3].end and s.end == s.resolved_at == pts[4].end
    assert s.minutes_over == pytest.approx(0.25)
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
    assert s.resolved_at == pts[50].end - 60.0 == s.end
    assert s.minutes_over == 0.0  # over its baseline, never over the SLO
    # Still hot where the data ends: not resolved, ending with its last window.
    (ongoing,) = find_spikes(timeline(pts[:45]), k=3.0, baseline_windows=10)
    assert ongoing.resolved_at is None and ongoing.end == pts[44].end


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
    assert md.startswith("# Incident: `llama` on `vllm-a`\n")
    # from the end of the last calm window to the start of the first calm one after
    assert "2025-11-29 08:01:00 – 2025-11-29 08:01:15 UTC (15 s)" in md
    assert "- **Resolution:** resolved at 2025-11-29 08:01:15 UTC, 15 s after the start" in md
    assert "- **Impact:** 0.2 min over the SLO" in md
    assert "| TTFT p99 | 8.00 s |" in md
    assert "Queue-bound" in md
    assert "## Class sequence" in md and "### Evidence" in md and "### What to change" in md
    assert "PhasewatchTTFTOverSLO" in md and "firing" in md


def _queue_spike(**names: str):  # type: ignore[no-untyped-def]
    pts = series(["healthy"] * 4 + ["queue_bound"] * 3 + ["healthy"] * 3)
    for i in (4, 5, 6):
        pts[i] = pt(pts[i].end, "queue_bound", ttft=8.0, waiting=30.0)
    (s,) = find_spikes(timeline(pts, **names))
    return s


def test_markdown_export_reads_cleanly_with_gt_parentheses_and_underscores() -> None:
    s = _queue_spike(target="vllm_a", model="llama_3")
    d = diagnose(
        make_window(
            ttft=(5.0, 8.0, 120, 6.0), waiting=(1332.0, 1400.0, 30.0), queue_time=(5.5, 120)
        )
    )
    md = incident_markdown(s, diagnosis=d, alerts=[], source="live")
    assert md.startswith("# Incident: `llama_3` on `vllm_a`\n")
    assert "- **Dominant class:** Queue-bound (`queue_bound`)\n" in md
    assert (
        "**Queue-bound (arrival surge)** (confidence 1.00): Requests queue for admission: "
        "TTFT p99 8.00 s > 2.00 s, 100% of it queueing (waiting avg 1,332); "
    ) in md
    assert "| queue_bound | ttft_p99 | 8.00 s | > 2.00 s | yes |" in md
    assert "| queue_bound | kv_usage_max | 50% | < 90% | yes |" in md
    for noise in ("&gt;", "&lt;", "&amp;", "\\(", "\\)", "\\_", "\\>"):
        assert noise not in md, noise


def test_a_hostile_model_name_stays_inert_in_the_export() -> None:
    for evil in ("<img src=x onerror=alert(1)>", "[x](http://evil)", "a`b|c"):
        s = _queue_spike(target="a|b", model=evil)
        alert = AlertRow(
            "PhasewatchTTFTOverSLO", "firing", s.peak_at, "a|b", evil, "warning",
            f"TTFT p99 over its SLO on {evil} (a|b)",
        )  # fmt: skip
        md = incident_markdown(s, diagnosis=None, alerts=[alert], source=evil)
        title = md.splitlines()[0]
        assert title == f"# Incident: {code(evil)} on `a|b`", title
        rendered = _html(md)
        assert "<img" not in rendered and "<a " not in rendered, rendered
        assert "onerror" not in rendered.replace("&lt;img src=x onerror", "")
        (row,) = [line for line in md.splitlines() if "PhasewatchTTFTOverSLO" in line]
        assert row.count(" | ") == 4, row  # the pipes in the names do not split the row
    assert code("a`b|c") == "``a`b|c``" and code("`x`") == "`` `x` ``" and code("") == '`""`'


def _html(md: str) -> str:
    """The Markdown rendered by a CommonMark renderer with GitHub's tables, raw HTML on."""
    markdown_it = pytest.importorskip("markdown_it")
    return str(markdown_it.MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(md))


def test_a_pending_alert_says_it_is_pending_and_since_when() -> None:
    s = _queue_spike()
    notes = "m (t) has been queue_bound for 5 minutes"
    rows = [
        AlertRow("PhasewatchBottleneckPersisting", "pending", T0 + 90, "t", "m", "warning", notes),
        AlertRow(
            "PhasewatchBottleneckPersisting", "resolved", T0 + 150, "t", "m", "warning", notes,
            previous="pending",
        ),
        AlertRow("PhasewatchBottleneckPersisting", "firing", T0 + 390, "t", "m", "warning", notes),
    ]  # fmt: skip
    md = incident_markdown(s, diagnosis=None, alerts=rows, source="live")
    pending, stopped, firing = (line for line in md.splitlines() if "Persisting" in line)
    assert "has been" not in pending and "has been" not in stopped
    assert "| pending | warning | pending since 2025-11-29 08:01:30 UTC" in pending
    assert "never fired" in stopped
    assert firing.endswith("| firing | warning | m (t) has been queue_bound for 5 minutes |")


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
    assert over[1].className == "metric-value over" and "prove" in over[1].title
    assert unproven[1].className == "metric-value unproven" and "cannot prove" in unproven[1].title
    assert within[1].className == "metric-value" and "within" in within[1].title
