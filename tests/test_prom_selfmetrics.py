"""Per-stream self-metrics: ``phasewatch_ttft_p99_seconds`` … ``phasewatch_diagnosis`` on
the service's ``/metrics``, from the latest window of every stream."""

from __future__ import annotations

import asyncio
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from app.config import load_settings
from app.evaluate.settings import diagnosis_config
from app.scrape.client import read_file
from app.selfmetrics import StreamReading, build_stream_metrics, update_stream_metrics
from app.service import Service
from app.sim.record import record
from app.sources.process import PageFeed
from app.store.sqlite import ScrapeRecord


def _text(registry: CollectorRegistry) -> str:
    return generate_latest(registry).decode()


def test_gauges_follow_the_latest_readings_and_drop_gone_streams() -> None:
    reg = CollectorRegistry()
    m = build_stream_metrics(reg)
    a = StreamReading("t1", "m", 2.5, 0.05, 0.97, 3.0, "kv_pressure", alerts_firing=2)
    b = StreamReading("t2", "m", None, None, None, None, "idle")
    update_stream_metrics(m, [a, b])
    text = _text(reg)
    assert 'phasewatch_ttft_p99_seconds{model_name="m",target="t1"} 2.5' in text
    assert 'phasewatch_itl_p99_seconds{model_name="m",target="t1"} 0.05' in text
    assert 'phasewatch_kv_usage_max{model_name="m",target="t1"} 0.97' in text
    assert 'phasewatch_waiting_avg{model_name="m",target="t1"} 3.0' in text
    assert 'phasewatch_diagnosis{class="kv_pressure",model_name="m",target="t1"} 1.0' in text
    assert 'phasewatch_diagnosis{class="healthy",model_name="m",target="t1"} 0.0' in text
    assert 'phasewatch_alerts_firing{model_name="m",target="t1"} 2.0' in text
    assert 'phasewatch_ttft_p99_seconds{model_name="m",target="t2"}' not in text  # no data
    assert 'phasewatch_diagnosis{class="idle",model_name="m",target="t2"} 1.0' in text
    update_stream_metrics(m, [b])
    text = _text(reg)
    assert 'target="t1"' not in text and 'target="t2"' in text


def test_service_exports_the_diagnosis_of_each_stored_stream(tmp_path: Path) -> None:
    start = 1_800_000_000.0
    rec = Path(record("queue_overload", tmp_path / "rec", duration=150, seed=1, start_unix=start))
    settings = load_settings(
        None,
        {
            "targets": [{"name": "sim", "url": "http://127.0.0.1:9/metrics"}],
            "storage": {"path": str(tmp_path / "pw.db")},
            "slo": {"overrides": {"sim": {"ttft_p99": 1.0, "itl_p99": 0.2}}},
        },
    )
    service = Service(settings)
    feed = PageFeed("sim", "http://x")
    for page in sorted(rec.glob("*.prom")):
        ts = float(page.name[: -len(".prom")])
        o = feed(ts, read_file(page, max_bytes=10**8))
        assert o.snapshot is not None
        snaps = [("sim", ts, s) for s in o.snapshot.streams.values()]
        service.store.write_round([o.record], o.deltas, snaps)
    service.store.write_round(
        [ScrapeRecord("sim", start + 150.5, False, "timeout", "t", 4.0, 0, 0)], [], []
    )
    readings = service.evaluate_streams(start + 150)
    (r,) = readings
    assert r.target == "sim" and r.diagnosis_class == "queue_bound"
    assert r.ttft_p99 is not None and r.ttft_p99 > 1.0
    assert r.waiting_avg is not None and r.waiting_avg >= 1
    update_stream_metrics(service.stream_metrics, readings)
    text = _text(service.metrics.registry)
    assert 'phasewatch_diagnosis{class="queue_bound",model_name=' in text
    cfg = diagnosis_config(settings)
    assert cfg.slo_for("sim", "any").ttft_p99 == 1.0
    assert cfg.slo_for("other", "sim").itl_p99 == 0.2
    assert cfg.slo_for("other", "m").ttft_p99 == 2.0
    asyncio.run(service.stop())
