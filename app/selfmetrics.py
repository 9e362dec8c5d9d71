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
