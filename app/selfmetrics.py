"""The service's own Prometheus metrics, in a registry of its own (never the global one)."""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector


@dataclass(frozen=True)
class SelfMetrics:
    registry: CollectorRegistry
    scrapes: Counter
    scrape_duration: Histogram
    store_bytes: Gauge
    targets: Gauge
    round_duration: Histogram
    scrape_lag: Histogram
    rounds_missed: Counter
    scrape_gaps: Counter
    held: Gauge
    reload_ok: Gauge
    reload_at: Gauge
    effects_cpu: Counter
    effects_priced: Counter
    effects_failed: Counter
    effects_queued: Gauge


def build_self_metrics() -> SelfMetrics:
    """Create the registry and the metrics phasewatch reports about itself.

    ``process_*`` (CPU seconds, resident memory, open files) come from prometheus_client's
    process collector, registered in this registry rather than the global one. The
    metrics are registered (and exposed) in the order of the fields.
    """
    reg = CollectorRegistry()
    ProcessCollector(registry=reg)
    scrapes, scrape_duration, store_bytes, targets = _scrape_metrics(reg)
    round_duration, scrape_lag, rounds_missed, scrape_gaps = _round_metrics(reg)
    held, reload_ok, reload_at = _service_metrics(reg)
    effects_cpu, effects_priced, effects_failed, effects_queued = _effects_metrics(reg)
    return SelfMetrics(
        registry=reg,
        scrapes=scrapes,
        scrape_duration=scrape_duration,
        store_bytes=store_bytes,
        targets=targets,
        round_duration=round_duration,
        scrape_lag=scrape_lag,
        rounds_missed=rounds_missed,
        scrape_gaps=scrape_gaps,
        held=held,
        reload_ok=reload_ok,
        reload_at=reload_at,
        effects_cpu=effects_cpu,
        effects_priced=effects_priced,
        effects_failed=effects_failed,
        effects_queued=effects_queued,
    )


def _scrape_metrics(reg: CollectorRegistry) -> tuple[Counter, Histogram, Gauge, Gauge]:
    """The scrapes by outcome and their duration, the store's size, the targets."""
    scrapes = Counter(
        "phasewatch_scrapes_total",
        "Scrapes of vLLM targets by outcome (ok or the error kind).",
        ["target", "outcome"],
        registry=reg,
    )
    duration = Histogram(
        "phasewatch_scrape_duration_seconds",
        "Time to fetch one target's /metrics page.",
        buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
        registry=reg,
    )
    store_bytes = Gauge(
        "phasewatch_store_bytes", "Size of the SQLite store in bytes.", registry=reg
    )
    targets = Gauge("phasewatch_targets", "Configured scrape targets.", registry=reg)
    return scrapes, duration, store_bytes, targets


def _round_metrics(reg: CollectorRegistry) -> tuple[Histogram, Histogram, Counter, Counter]:
    """The scrape rounds: their duration, each fetch's lag, rounds missed, gaps."""
    duration = Histogram(
        "phasewatch_scrape_round_duration_seconds",
        "Time for one scrape round over all targets, including storage.",
        buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0),
        registry=reg,
    )
    lag = Histogram(
        "phasewatch_scrape_lag_seconds",
        "Delay from a round's scheduled time to the start of each target's fetch.",
        buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.5, 5.0, 10.0),
        registry=reg,
    )
    missed = Counter(
        "phasewatch_scrape_rounds_missed",
        "Scheduled scrape rounds that did not run (a round overran, or the process stalled).",
        registry=reg,
    )
    gaps = Counter(
        "phasewatch_scrape_gaps",
        "Fetches of a target that started more than 1.5 intervals after its previous one.",
        registry=reg,
    )
    return duration, lag, missed, gaps


def _service_metrics(reg: CollectorRegistry) -> tuple[Gauge, Gauge, Gauge]:
    """What the service holds in memory, and its configuration's last load."""
    held = Gauge(
        "phasewatch_held_entries",
        "Entries held in memory for the targets and streams scraped now, by kind.",
        ["kind"],
        registry=reg,
    )
    reload_ok = Gauge(
        "phasewatch_config_last_reload_successful",
        "Whether the last configuration reload succeeded (1; the start-up load counts).",
        registry=reg,
    )
    reload_at = Gauge(
        "phasewatch_config_last_reload_success_timestamp_seconds",
        "When the configuration was last loaded successfully, Unix seconds.",
        registry=reg,
    )
    return held, reload_ok, reload_at


def _effects_metrics(reg: CollectorRegistry) -> tuple[Counter, Counter, Counter, Gauge]:
    """The job pricing the hints' effects on the twin: its CPU, its streams."""
    cpu = Counter(
        "phasewatch_hint_effects_cpu_seconds",
        "CPU time the job pricing the hints' effects on the twin has used (its thread's).",
        registry=reg,
    )
    priced = Counter(
        "phasewatch_hint_effects_priced_streams",
        "Streams whose hints the job has priced on the twin.",
        registry=reg,
    )
    failed = Counter(
        "phasewatch_hint_effects_failed_streams",
        "Streams priced whose twin could not be fitted (no effect, only its error).",
        registry=reg,
    )
    queued = Gauge(
        "phasewatch_hint_effects_queued_streams",
        "Streams waiting for their hints to be priced.",
        registry=reg,
    )
    return cpu, priced, failed, queued


@dataclass
class ReloadStatus:
    """The configuration's last load: at start-up, or a reload (``app.reload``)."""

    successful: bool = True
    last_attempt: float | None = None
    last_success: float | None = None
    error: str | None = None
    trigger: str = "start"


def record_reload(m: SelfMetrics, status: ReloadStatus) -> None:
    """Export a load's outcome, as Prometheus' ``prometheus_config_last_reload_*``."""
    m.reload_ok.set(1 if status.successful else 0)
    if status.last_success is not None:
        m.reload_at.set(status.last_success)


class TargetSeries:
    """The targets' series of ``phasewatch_scrapes_total``: a target no longer scraped
    loses them (as Prometheus drops a gone target's series), so churn adds none."""

    def __init__(self, scrapes: Counter) -> None:
        self.scrapes = scrapes
        self._outcomes: dict[str, set[str]] = {}

    def count(self, target: str, outcome: str) -> None:
        self.scrapes.labels(target, outcome).inc()
        self._outcomes.setdefault(target, set()).add(outcome)

    def keep_only(self, live: Container[str]) -> list[str]:
        """Drop the series of targets not in ``live``; return their names."""
        gone = [name for name in self._outcomes if name not in live]
        for name in gone:
            for outcome in self._outcomes.pop(name):
                self.scrapes.remove(name, outcome)
        return gone


def set_held(m: SelfMetrics, counts: Mapping[str, int]) -> None:
    """Export what is held in memory per kind (``phasewatch_held_entries``)."""
    for kind, n in counts.items():
        m.held.labels(kind).set(n)


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
    """Register the per-stream gauges (documented in docs/api.md) in ``registry``."""
    from app.diagnose.classes import DiagnosisClass

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


# -- per-SLO gauges: attainment, budget and burn rates of every SLO and fleet --------------

SLO_LABELS = ("slo", "model_name", "fleet")
# The burn-rate gauge's window for the budget's period so far (early in the period the
# budget is told by it, and the budget-left gauge is absent: ``app.fleet.budget``).
PERIOD_WINDOW = "period"


@dataclass(frozen=True)
class SloReading:
    """What the service exports about one SLO on one fleet after an evaluation.

    ``attainment`` per objective over the latest window; ``None`` values are left out.
    """

    slo: str
    model_name: str
    fleet: str
    attainment: dict[str, float | None]
    budget_remaining: float | None
    burn_rates: dict[str, float | None]


@dataclass(frozen=True)
class SloMetrics:
    """Per-SLO gauges; an SLO or fleet that is gone loses its series at the next update."""

    attainment: Gauge
    budget_remaining: Gauge
    burn_rate: Gauge
    _seen: dict[str, set[tuple[str, ...]]]


def build_slo_metrics(registry: CollectorRegistry) -> SloMetrics:
    """Register the per-SLO gauges (documented in docs/api.md) in ``registry``."""
    return SloMetrics(
        attainment=Gauge(
            "phasewatch_slo_attainment_ratio",
            "Share of events meeting the objective over the latest window, from bucket counts "
            "at the objective's bound (objective: ttft, itl, tpot or errors).",
            [*SLO_LABELS, "objective"],
            registry=registry,
        ),
        budget_remaining=Gauge(
            "phasewatch_error_budget_remaining_ratio",
            "Error budget left over the SLO's period (1 = untouched, below 0 = overspent); "
            "absent while the data spans under a tenth of the period.",
            list(SLO_LABELS),
            registry=registry,
        ),
        burn_rate=Gauge(
            "phasewatch_slo_burn_rate",
            "The fastest objective's (1 - attainment) / (1 - target) over the window "
            "(period: the budget's period so far).",
            [*SLO_LABELS, "window"],
            registry=registry,
        ),
        _seen={},
    )


def update_slo_metrics(m: SloMetrics, readings: list[SloReading]) -> None:
    """Set every SLO's gauges from its latest reading; drop series no longer read."""
    values: dict[str, dict[tuple[str, ...], float]] = {
        "attainment": {},
        "budget_remaining": {},
        "burn_rate": {},
    }
    for r in readings:
        key = (r.slo, r.model_name, r.fleet)
        for objective, ratio in r.attainment.items():
            if ratio is not None:
                values["attainment"][(*key, objective)] = ratio
        if r.budget_remaining is not None:
            values["budget_remaining"][key] = r.budget_remaining
        for window, rate in r.burn_rates.items():
            if rate is not None:
                values["burn_rate"][(*key, window)] = rate
    for name, by_labels in values.items():
        gauge: Gauge = getattr(m, name)
        for labels, value in by_labels.items():
            gauge.labels(*labels).set(value)
        for stale in m._seen.get(name, set()) - set(by_labels):
            gauge.remove(*stale)
        m._seen[name] = set(by_labels)
