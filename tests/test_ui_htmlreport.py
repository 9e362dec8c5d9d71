"""The self-contained HTML reports (pure): one file, Plotly inlined, every value escaped.

The builders here are shared with the browser test, which opens the files in Chromium
with the network off (``tests/test_ui_browser.py``).
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from dataclasses import replace

from app.diagnose import diagnose
from app.read.alertfeed import AlertRow
from app.read.review.report import AlertEvent, build_review
from app.ui.figures import Mark
from app.ui.htmlreport import incident_html
from app.ui.htmlreview import review_html
from app.ui.markdown import incident_markdown
from app.ui.spikes import find_spikes
from tests.diagnose_windows import make_window
from tests.ui_points import T0, pt, series, timeline

EVIL = "<script>alert(1)</script>"
EVIL_ATTR = '"><img src=x onerror=alert(2)>'
GENERATED = T0 + 3600.0


def _hostile_diagnosis(target: str, model: str, end: float):  # type: ignore[no-untyped-def]
    d = diagnose(
        make_window(ttft=(5.0, 8.0, 120, 6.0), waiting=(30.0, 40.0, 30.0), queue_time=(5.5, 120))
    )
    return replace(
        d, target=target, model_name=model, start=end - 60.0, end=end, notes=(EVIL_ATTR,)
    )


def hostile_incident() -> str:
    """An incident whose target, model, alert and source are markup."""
    pts = series(["healthy"] * 6 + ["queue_bound"] * 4 + ["healthy"] * 6)
    for i in range(6, 10):
        pts[i] = pt(pts[i].end, "queue_bound", ttft=8.0, waiting=30.0)
    tl = timeline(pts, target=EVIL_ATTR, model=EVIL)
    (spike,) = find_spikes(tl)
    alert = AlertRow(
        "PhasewatchTTFTOverSLO", "firing", spike.peak_at, EVIL_ATTR, EVIL, "warning", EVIL
    )
    d = _hostile_diagnosis(EVIL_ATTR, EVIL, spike.peak_at)
    md = incident_markdown(spike, diagnosis=d, alerts=[alert], source=EVIL)
    marks = [Mark(spike.peak_at, "peak"), Mark(alert.at, f"{alert.name} firing")]
    return incident_html(
        spike,
        tl,
        marks=marks,
        diagnosis=d,
        alerts=[alert],
        source=EVIL,
        markdown=md,
        generated_at=GENERATED,
    )


def hostile_review() -> str:
    """A review of one stream whose target, model, selector and alert are markup."""
    pts = series(["healthy"] * 6 + ["queue_bound"] * 4 + ["healthy"] * 6)
    tl = timeline(pts, target=EVIL_ATTR, model=EVIL)
    ds = [
        _hostile_diagnosis(EVIL_ATTR, EVIL, p.end)
        if p.cls == "queue_bound"
        else replace(diagnose(make_window()), target=EVIL_ATTR, model_name=EVIL, end=p.end)
        for p in pts
    ]
    alert = AlertEvent("PhasewatchQueueBuildup", EVIL_ATTR, EVIL, "warning", T0 + 120, None, EVIL)
    review = build_review(
        ds,
        source=EVIL,
        selector=EVIL_ATTR,
        start=tl.start,
        end=tl.end,
        window=60.0,
        step=15.0,
        alerts=[alert],
    )
    return review_html(review, {(EVIL_ATTR, EVIL): tl}, generated_at=GENERATED)


def _scripts(doc: str) -> list[str]:
    return re.findall(r"<script[^>]*>(.*?)</script>", doc, re.S)


def _csp(doc: str) -> str:
    m = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', doc)
    assert m, "the report carries a Content-Security-Policy"
    return html.unescape(m.group(1))


def test_the_incident_report_is_one_offline_file_with_charts_diagnosis_alerts_summary() -> None:
    doc = hostile_incident()
    assert doc.startswith("<!DOCTYPE html>")
    for part in (
        "<h2>Peaks</h2>",
        "<h2>Five metrics</h2>",
        "<h2>Class sequence</h2>",
        "<h2>Diagnosis at the peak</h2>",
        "<h4>Evidence</h4>",
        "<h4>What to change</h4>",
        "<h2>Alerts</h2>",
        "<h2>Summary (Markdown)</h2>",
        'id="incident-chart"',
        "Queue-bound",
    ):
        assert part in doc, part
    plotly, chart = _scripts(doc)
    assert "Plotly" in plotly and len(plotly) > 1_000_000  # plotly.js itself, inlined
    assert 'Plotly.newPlot("incident-chart"' in chart
    # Nothing to fetch: no src or href attribute anywhere, no stylesheet link.
    assert not re.search(r"<(script|img|link|iframe)[^>]*\s(src|href)=", doc)


def test_every_value_from_data_is_escaped_and_only_the_reports_own_scripts_may_run() -> None:
    for doc in (hostile_incident(), hostile_review()):
        outside = re.sub(r"<script[^>]*>.*?</script>", "", doc, flags=re.S)
        assert "<script>alert" not in doc and "<img src=x" not in doc
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in outside
        assert "&quot;&gt;&lt;img src=x onerror=alert(2)&gt;" in outside
        # A figure's JSON escapes < > / inside its strings: no tag can close its script.
        for body in _scripts(doc)[1:]:
            assert "</" not in body and "<script" not in body
        # The CSP names each of the file's scripts by hash, and nothing else runs.
        csp = _csp(doc)
        hashes = set(re.findall(r"'sha256-([A-Za-z0-9+/=]+)'", csp))
        scripts = _scripts(doc)
        assert len(hashes) == len(scripts) == doc.count("<script")
        for body in scripts:
            digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
            assert digest in hashes
        assert "default-src 'none'" in csp and "connect-src 'none'" in csp
        assert "unsafe-inline" not in csp.split("script-src", 1)[1].split(";", 1)[0]


def test_the_review_report_has_a_chart_and_the_findings_of_each_stream() -> None:
    doc = hostile_review()
    assert "<h2>Summary</h2>" in doc and "<h3>Timeline</h3>" in doc
    assert "<h3>p99 spikes</h3>" in doc and "<h2>Alerts that would have fired</h2>" in doc
    assert 'Plotly.newPlot("stream-0"' in doc and 'id="stream-0"' in doc
    assert "Queue-bound" in doc and "What to change" in doc
    assert "firing at the end" in doc
