"""The service's own Prometheus metrics, in a registry of its own (never the global one)."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


@dataclass(frozen=True)
class SelfMetrics:
    registry: CollectorRegistry
    scrapes: Counter
    scrape_duration: Histogram
    store_bytes: Gauge
    targets: Gauge
    round_duration: Histogram


def build_self_metrics() -> SelfMetrics:
    """Create the registry and the metrics phasewatch reports about itself."""
    reg = CollectorRegistry()
    return SelfMetrics(
        registry=reg,
        scrapes=Counter(
            "phasewatch_scrapes_total",
            "Scrapes of vLLM targets by outcome (ok or the error kind).",
            ["target", "outcome"],
            registry=reg,
        ),
        scrape_duration=Histogram(
            "phasewatch_scrape_duration_seconds",
            "Time to fetch one target's /metrics page.",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
            registry=reg,
        ),
        store_bytes=Gauge(
            "phasewatch_store_bytes", "Size of the SQLite store in bytes.", registry=reg
        ),
        targets=Gauge("phasewatch_targets", "Configured scrape targets.", registry=reg),
        round_duration=Histogram(
            "phasewatch_scrape_round_duration_seconds",
            "Time for one scrape round over all targets, including storage.",
            buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0),
            registry=reg,
        ),
    )


# -- per-stream gauges: the latest window and diagnosis of every stream ------------------

STREAM_LABELS = ("target", "model_name")


@dataclass(frozen=True)
class StreamReading:
    """What the service exports about one stream after an evaluation.

    ``None`` values are left out of the exposition (no observations is not 0).
    ``diagnosis_class`` is one of ``DiagnosisClass``'s values.
    """

    target: str
    model_name: str
    ttft_p99: float | None
    itl_p99: float | None
    kv_usage_max: float | None
    waiting_avg: float | None
    diagnosis_class: str | None
    alerts_firing: int = 0


@dataclass(frozen=True)
class StreamMetrics:
    """Per-stream gauges; a stream that is gone loses its series at the next update."""

    ttft_p99: Gauge
    itl_p99: Gauge
    kv_usage_max: Gauge
    waiting_avg: Gauge
    diagnosis: Gauge
    alerts_firing: Gauge
    classes: tuple[str, ...]
    # label values set by the previous update, per gauge name
    _seen: dict[str, set[tuple[str, ...]]]


def build_stream_metrics(registry: CollectorRegistry) -> StreamMetrics:
    """Register the per-stream gauges (documented in the README) in ``registry``."""
    from app.diagnose.records import DiagnosisClass

    def gauge(name: str, text: str, extra: tuple[str, ...] = ()) -> Gauge:
        return Gauge(name, text, [*STREAM_LABELS, *extra], registry=registry)

    return StreamMetrics(
        ttft_p99=gauge(
            "phasewatch_ttft_p99_seconds",
            "TTFT p99 of the stream's latest window (histogram_quantile of the bucket deltas).",
        ),
        itl_p99=gauge(
            "phasewatch_itl_p99_seconds", "Inter-token latency p99 of the latest window."
        ),
        kv_usage_max=gauge(
            "phasewatch_kv_usage_max", "Highest KV-cache usage (0-1) sampled in the latest window."
        ),
        waiting_avg=gauge(
            "phasewatch_waiting_avg", "Average number of waiting requests in the latest window."
        ),
        diagnosis=gauge(
            "phasewatch_diagnosis",
            "1 for the class of the stream's latest diagnosis, 0 for the other classes.",
            ("class",),
        ),
        alerts_firing=gauge("phasewatch_alerts_firing", "Alerts firing for the stream."),
        classes=tuple(c.value for c in DiagnosisClass),
        _seen={},
    )


def update_stream_metrics(m: StreamMetrics, readings: list[StreamReading]) -> None:
    """Set every stream's gauges from its latest reading; drop streams no longer read."""
    values: dict[str, dict[tuple[str, ...], float]] = {
        "ttft_p99": {},
        "itl_p99": {},
        "kv_usage_max": {},
        "waiting_avg": {},
        "diagnosis": {},
        "alerts_firing": {},
    }
    for r in readings:
        key = (r.target, r.model_name)
        for name, value in (
            ("ttft_p99", r.ttft_p99),
            ("itl_p99", r.itl_p99),
            ("kv_usage_max", r.kv_usage_max),
            ("waiting_avg", r.waiting_avg),
        ):
            if value is not None and value == value:
                values[name][key] = value
        if r.diagnosis_class is not None:
            for cls in m.classes:
                values["diagnosis"][(*key, cls)] = 1.0 if cls == r.diagnosis_class else 0.0
        values["alerts_firing"][key] = float(r.alerts_firing)
    for name, by_labels in values.items():
        gauge: Gauge = getattr(m, name)
        for labels, value in by_labels.items():
            gauge.labels(*labels).set(value)
        for stale in m._seen.get(name, set()) - set(by_labels):
            gauge.remove(*stale)
        m._seen[name] = set(by_labels)
