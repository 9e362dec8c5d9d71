"""The review report, pure: runs, spikes, findings, Markdown/JSON, and time parsing."""

from __future__ import annotations

import json

import pytest

from app.diagnose.records import Diagnosis, DiagnosisClass, Evidence, Hint, SubCause
from app.read.review.render import to_json, to_markdown
from app.read.review.report import AlertEvent, build_review, classes_seen, spikes, timeline
from app.read.review.run import default_resolution, parse_time

C = DiagnosisClass


def _d(
    end: float,
    cls: DiagnosisClass,
    ttft: float | None = 0.2,
    itl: float | None = 0.03,
    *,
    sub: SubCause | None = None,
    confidence: float = 0.8,
    target: str = "a:8000",
) -> Diagnosis:
    evidence = (Evidence(cls.value, "waiting_avg", 4.0, ">=", 1.0, True),)
    hints = (Hint("replicas", "Add replicas", "run more vLLM replicas", "capacity"),)
    return Diagnosis(
        target=target,
        model_name="m",
        start=end - 60,
        end=end,
        cls=cls,
        confidence=confidence,
        summary=f"{cls.value} at {end:g}",
        sub_cause=sub,
        evidence=evidence,
        hints=hints,
        ttft_p99=ttft,
        itl_p99=itl,
    )


def _incident() -> list[Diagnosis]:
    out = [_d(t, C.HEALTHY) for t in (15, 30, 45, 60)]
    out += [_d(75, C.QUEUE_BOUND, 5.0), _d(90, C.QUEUE_BOUND, 9.0, confidence=0.95)]
    out += [_d(105, C.DECODE_BOUND, itl=0.3, sub=SubCause.BANDWIDTH_BOUND)]
    out += [_d(t, C.HEALTHY) for t in (120, 135)]
    return out


def test_timeline_merges_consecutive_windows_of_one_label() -> None:
    runs = timeline(_incident())
    assert [(r.label, r.first_end, r.last_end, r.windows) for r in runs] == [
        ("healthy", 15, 60, 4),
        ("queue_bound", 75, 90, 2),
        ("decode_bound/bandwidth_bound", 105, 105, 1),
        ("healthy", 120, 135, 2),
    ]
    assert runs[1].ttft_p99_max == 9.0


def test_spikes_over_slo_or_baseline_with_their_peak() -> None:
    found, base_ttft, base_itl = spikes(_incident())
    assert base_ttft == 0.2 and base_itl == 0.03
    ttft, itl = found
    assert (ttft.signal, ttft.first_end, ttft.last_end) == ("ttft_p99", 75, 90)
    assert (ttft.peak, ttft.peak_end, ttft.reason) == (9.0, 90, "slo+baseline")
    assert ttft.class_at_peak == "queue_bound"
    assert (itl.signal, itl.peak, itl.class_at_peak) == (
        "itl_p99",
        0.3,
        "decode_bound/bandwidth_bound",
    )
    # 3 x baseline without an SLO breach is still a spike
    only_base = [_d(15, C.HEALTHY, 0.1), _d(30, C.HEALTHY, 0.1), _d(45, C.HEALTHY, 0.5)]
    (s,) = spikes(only_base)[0]
    assert s.reason == "baseline" and s.peak == 0.5


def test_markdown_report_has_timeline_spikes_findings_and_alerts() -> None:
    alerts = [AlertEvent("PhasewatchQueueBound", "a:8000", "m", "warning", 80.0, 130.0, "q")]
    review = build_review(
        _incident(),
        source="http://prom:9090",
        selector='{job="vllm"}',
        start=0,
        end=135,
        window=60,
        step=15,
        alerts=alerts,
    )
    assert classes_seen(review) == {"healthy", "queue_bound", "decode_bound"}
    md = to_markdown(review)
    assert md.startswith("# phasewatch review: 1970-01-01 00:00:00 – 1970-01-01 00:02:15 UTC")
    assert '`{job="vllm"}`' in md
    assert "| 00:01:15 → 00:01:30 | **queue_bound** | 2 |" in md
    assert "### queue_bound: 00:01:15 → 00:01:30" in md
    assert "queue_bound at 90" in md  # the most confident window's summary
    assert "- waiting_avg 4 >= 1: yes" in md
    assert "1. **Add replicas**: run more vLLM replicas — capacity" in md
    assert "| PhasewatchQueueBound | warning | `m` @ `a:8000` |" in md
    data = json.loads(to_json(review, with_diagnoses=True))
    stream = data["streams"][0]
    assert stream["problem_windows"] == 3
    assert len(stream["diagnoses"]) == 9
    assert data["alerts"][0]["ends_at"] == 130.0


def test_streams_with_problems_come_first_and_no_rules_means_not_evaluated() -> None:
    calm = [_d(t, C.HEALTHY, target="b:1") for t in (15, 30)]
    review = build_review(
        calm + _incident(), source="p", selector="", start=0, end=135, window=60, step=15
    )
    assert [s.target for s in review.streams] == ["a:8000", "b:1"]
    assert "Not evaluated" in to_markdown(review)
    empty = build_review([], source="p", selector="", start=0, end=1, window=60, step=15)
    assert "No vLLM series matched" in to_markdown(empty)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1764403200", 1764403200.0),
        ("1764403200.5", 1764403200.5),
        ("2025-11-29T08:00:00Z", 1764403200.0),
        ("2025-11-29T09:00:00+01:00", 1764403200.0),
        ("2025-11-29 08:00:00", 1764403200.0),
        ("now", 1764403200.0),
        ("now-1h30m", 1764403200.0 - 5400),
        ("now+15s", 1764403215.0),
    ],
)
def test_times_are_unix_rfc3339_or_relative_to_now(text: str, expected: float) -> None:
    assert parse_time(text, now=1764403200.0) == expected


def test_bad_time_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot read time"):
        parse_time("last tuesday", now=0)


def test_default_resolution_keeps_long_ranges_bounded() -> None:
    assert default_resolution(0, 3600, 15) == 5.0
    assert default_resolution(0, 7 * 86400, 300) == 121.0
    assert default_resolution(0, 7 * 86400, 60) == 60.0
