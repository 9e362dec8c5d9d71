"""``phasewatch review`` on a simulated incident stored in a real Prometheus.

The simulator records the ``incident`` scenario (healthy, a ×4 spike: queue-bound, then
recovery) as pages stamped one hour ago; ``promtool tsdb create-blocks-from
openmetrics`` backfills them (with ``instance``/``job`` labels, as a scrape would add)
into a TSDB that a real Prometheus then serves. This is exactly the post-incident
situation: only Prometheus has the history. Run once with ``vllm:`` names and once with
``vllm_`` names (a page scraped as OpenMetrics from prometheus-client ≥ 0.23).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.cli import main
from app.sim.record import record
from tests.test_prom_support import backfill, prometheus, to_openmetrics

DURATION = 900


@dataclass
class Stored:
    url: str
    start: float
    end: float
    spelling: str = "vllm:"


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float]:
    tmp = tmp_path_factory.mktemp("incident")
    start = float(int(time.time()) - 3600)
    path = record("incident", tmp / "rec", duration=DURATION, seed=1, start_unix=start)
    return Path(path), start


@pytest.fixture(scope="module", params=["vllm:", "vllm_"])
def stored(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    recording: tuple[Path, float],
) -> Iterator[Stored]:
    rec, start = recording
    tmp = tmp_path_factory.mktemp("tsdb")
    om = tmp / "incident.om"
    labels = {"instance": "vllm-0:8000", "job": "vllm"}
    assert to_openmetrics(rec, om, labels=labels, spelling=request.param) > 10_000
    backfill(om, tmp / "data")
    with prometheus(tmp, data=tmp / "data") as url:
        yield Stored(url, start, start + DURATION, request.param)


def test_markdown_report_of_the_incident(
    stored: Stored, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "review",
            "--prometheus",
            stored.url,
            "--start",
            str(stored.start + 120),
            "--end",
            str(stored.end),
            "--selector",
            '{job="vllm"}',
            "--markdown",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.startswith("# phasewatch review:")
    assert "@ `vllm-0:8000`" in out  # names from data are code spans
    timeline = out.split("### Timeline", 1)[1].split("### p99 spikes", 1)[0]
    rows = [line for line in timeline.splitlines() if line.startswith("| ") and "**" in line]
    labels = [row.split("**")[1] for row in rows]
    # healthy before the spike, queue-bound during it, and back to healthy at the end
    assert labels[0] == "healthy" and labels[-1] == "healthy", labels
    # (the label carries the sub-cause the healthy hour before the range tells apart)
    assert any(label.split("/")[0] == "queue_bound" for label in labels), labels
    assert "| ttft_p99 |" in out and "queue_bound |" in out  # a TTFT spike, queue-bound at peak
    assert "### queue_bound" in out and "Evidence:" in out and "What to change" in out
    assert "waiting_avg" in out and "queue_share" in out
    assert "## Alerts that would have fired" in out


def test_html_report_of_the_incident_opens_offline_with_its_charts(
    stored: Stored, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--html FILE``: one file with the five charts, evidence, hints and alerts; opened
    from disk in Chromium with the network off, its chart is drawn."""
    from tests.test_ui_browser import ARTIFACTS, chromium, open_offline

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    spelling = "openmetrics" if stored.spelling == "vllm_" else "text"
    report = ARTIFACTS / f"review-{spelling}.html"
    code = main(
        [
            "review",
            "--prometheus",
            stored.url,
            "--start",
            str(stored.start + 120),
            "--end",
            str(stored.end),
            "--selector",
            '{job="vllm"}',
            "--html",
            str(report),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.strip() == f"wrote {report} (1 stream(s), 1 chart(s))"  # not the Markdown too
    doc = report.read_text(encoding="utf-8")
    assert doc.startswith("<!DOCTYPE html>") and 'Plotly.newPlot("stream-0"' in doc
    with chromium() as browser:  # after the CLI: its asyncio.run needs this thread free
        seen = open_offline(browser, report, report.stem)
    assert seen["charts"] == 1 and seen["traces"][0] > 10
    assert not seen["errors"] and not seen["dialogs"] and not seen["requests"], seen
    text = seen["text"]
    assert "meta-llama/Llama-3.1-8B-Instruct @ vllm-0:8000" in text
    for part in ("Timeline", "p99 spikes", "Queue-bound", "Evidence", "What to change"):
        assert part in text, part
    assert "Alerts that would have fired" in text


def test_json_report_and_selector_that_matches_nothing(
    stored: Stored, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["review", "--prometheus", stored.url, "--start", str(stored.start + 300)]
    code = main([*args, "--end", str(stored.start + 600), "--json", "--raw"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    (stream,) = report["streams"]
    assert stream["target"] == "vllm-0:8000"
    assert stream["model_name"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert stream["windows"] == 20  # 300 s of windows ending every 15 s
    assert any(r["class"] == "queue_bound" for r in stream["timeline"])
    code = main([*args, "--end", str(stored.start + 600), "--json", "--selector", '{job="x"}'])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["streams"] == []


def test_unreachable_prometheus_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.realbins import free_port

    url = f"http://127.0.0.1:{free_port()}"
    assert main(["review", "--prometheus", url, "--start", "now-5m"]) == 1
    assert "prometheus error" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args",
    [
        ["--start", "yesterday-ish"],
        ["--start", "now", "--end", "now-1h"],
        ["--start", "now-1h", "--selector", "job=vllm"],
    ],
)
def test_bad_arguments_exit_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["review", "--prometheus", "http://127.0.0.1:9", *args]) == 2
    assert capsys.readouterr().err


def test_service_on_a_prometheus_source_stores_and_diagnoses_the_same_history(
    stored: Stored, tmp_path: Path
) -> None:
    """``source: prometheus``: the collection job fills the store from Prometheus, and
    the windows API, the diagnosis and the self-metrics work on it unchanged."""
    import asyncio

    from app.config import load_settings
    from app.read.windows import stream_windows
    from app.service import Service

    settings = load_settings(
        None,
        {
            "source": {"kind": "prometheus", "url": stored.url, "selector": '{job="vllm"}'},
            "storage": {"path": str(tmp_path / "pw.db")},
        },
    )
    service = Service(settings)
    spike = stored.start + 420  # inside the ×4 spike
    lag = settings.source.lag

    async def go() -> None:
        try:
            for now in (spike - 60 + lag, spike + lag):
                outcomes = await service.source.read_round(now)
                assert outcomes and all(o.record.ok for o in outcomes)
            assert list(service.source.targets()) == ["vllm-0:8000"]
            ((target, model),) = service.store.streams()
            ws = stream_windows(
                service.store, target, model, start=spike - 30, end=spike, length=60, step=15
            )
            assert len(ws) == 2 and all(w.observations.get("ttft", 0) > 0 for w in ws)
            (reading,) = service.evaluate_streams(spike + lag)
            assert reading.target == "vllm-0:8000" and reading.diagnosis_class == "queue_bound"
        finally:
            await service.stop()

    asyncio.run(go())


def test_whatif_fits_a_target_read_from_prometheus(
    stored: Stored, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``whatif --target`` with ``source: prometheus``: the span read as ``review`` reads
    it; the incident's spike quadruples traffic, so half the traffic lowers the p99."""
    cfg = tmp_path / "pw.yaml"
    cfg.write_text(
        json.dumps(
            {"source": {"kind": "prometheus", "url": stored.url, "selector": '{job="vllm"}'}}
        )
    )
    args = ["whatif", "--config", str(cfg), "--target", "vllm-0:8000"]
    span = ["--start", str(stored.start + 300), "--end", str(stored.start + 600)]
    assert main([*args, *span, "--set", "rate_scale=0.5", "--json", "--seeds", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["target"] == "vllm-0:8000"
    assert out["fit"]["engine"]["num_gpu_blocks"] > 0
    assert out["predicted"]["ttft_p99"] < out["baseline"]["ttft_p99"]
    assert out["predicted"]["waiting_avg"] < out["baseline"]["waiting_avg"]
