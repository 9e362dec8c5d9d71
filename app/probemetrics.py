"""The probes on the service's ``/metrics``, in blackbox_exporter's style.

Per probe (label ``probe``; ``kind`` on the success gauge), from its latest answer:

* ``phasewatch_probe_success`` — 1 when the answer came whole, else 0 (blackbox's
  ``probe_success``);
* ``phasewatch_probe_duration_seconds`` — the whole probe (blackbox's
  ``probe_duration_seconds``);
* ``phasewatch_probe_phase_duration_seconds{phase}`` — ``connect`` (TCP and TLS),
  ``first_byte`` (request sent → headers), ``first_token`` (the client's TTFT), as
  blackbox's ``probe_http_duration_seconds{phase}``; NaN when the answer did not get that
  far;
* ``phasewatch_probe_client_gap_seconds`` — client TTFT − the server's own TTFT for the
  same request, where the server reported it (else NaN);
* ``phasewatch_probe_decode_tokens_per_second{side}`` — ``client`` (as received) and
  ``server`` (as reported: Ollama's eval counters, vLLM's per-request metrics);
  ``phasewatch_probe_prefill_tokens_per_second`` — the server's, where reported;

and over all answers: ``phasewatch_probe_ttft_seconds`` and ``phasewatch_probe_itl_seconds``
(histograms of the client's TTFT and token gaps, the probe streams' bucket layout),
``phasewatch_probes_total{result}`` (``ok`` or the error kind).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from app.probeconfig import ProbeConfig
from app.scrape.probe_fetch import ProbeResult
from app.sources.probe_tally import LATENCY_BOUNDS

__all__ = ["ProbeMetrics", "build_probe_metrics"]

NAN = math.nan


@dataclass(frozen=True)
class ProbeMetrics:
    """The probe families, registered on one registry; :meth:`observe` each answer."""

    success: Gauge
    duration: Gauge
    phase: Gauge
    client_gap: Gauge
    decode_rate: Gauge
    prefill_rate: Gauge
    ttft: Histogram
    itl: Histogram
    results: Counter

    def observe(self, p: ProbeConfig, r: ProbeResult) -> None:
        """Export one answer of probe ``p``."""
        name = p.name
        self.success.labels(name, p.kind).set(1.0 if r.ok else 0.0)
        self.duration.labels(name).set(r.total)
        for phase, value in (
            ("connect", r.connect),
            ("first_byte", r.ttfb),
            ("first_token", r.ttft),
        ):
            self.phase.labels(name, phase).set(NAN if value is None else value)
        s = r.server
        gap = None if s is None or s.ttft is None or r.ttft is None else r.ttft - s.ttft
        self.client_gap.labels(name).set(NAN if gap is None else gap)
        client = r.decode_tokens_per_s
        server = None
        if s is not None and s.decode_s and s.decode_tokens:
            server = s.decode_tokens / s.decode_s
        prefill = None
        if s is not None and s.prefill_s and s.prefill_tokens:
            prefill = s.prefill_tokens / s.prefill_s
        self.decode_rate.labels(name, "client").set(NAN if client is None else client)
        self.decode_rate.labels(name, "server").set(NAN if server is None else server)
        self.prefill_rate.labels(name).set(NAN if prefill is None else prefill)
        if r.ttft is not None:
            self.ttft.labels(name).observe(r.ttft)
        for gap_s in r.gaps:
            self.itl.labels(name).observe(gap_s)
        self.results.labels(name, r.error_kind or "ok").inc()


def build_probe_metrics(registry: CollectorRegistry) -> ProbeMetrics:
    """Register the probe families on ``registry`` (the service's own)."""
    buckets = (*LATENCY_BOUNDS, math.inf)
    return ProbeMetrics(
        success=Gauge(
            "phasewatch_probe_success",
            "1 when the probe's latest answer came whole, else 0.",
            ("probe", "kind"),
            registry=registry,
        ),
        duration=Gauge(
            "phasewatch_probe_duration_seconds",
            "How long the probe's latest request took, seconds.",
            ("probe",),
            registry=registry,
        ),
        phase=Gauge(
            "phasewatch_probe_phase_duration_seconds",
            "The latest probe's connect, first_byte and first_token times, seconds.",
            ("probe", "phase"),
            registry=registry,
        ),
        client_gap=Gauge(
            "phasewatch_probe_client_gap_seconds",
            "The latest probe's TTFT minus the server's own TTFT for it, seconds.",
            ("probe",),
            registry=registry,
        ),
        decode_rate=Gauge(
            "phasewatch_probe_decode_tokens_per_second",
            "The latest probe's decode speed, as received (client) and as reported (server).",
            ("probe", "side"),
            registry=registry,
        ),
        prefill_rate=Gauge(
            "phasewatch_probe_prefill_tokens_per_second",
            "The latest probe's prefill speed as the server reported it.",
            ("probe",),
            registry=registry,
        ),
        ttft=Histogram(
            "phasewatch_probe_ttft_seconds",
            "The probes' time to first token as a client sees it, seconds.",
            ("probe",),
            buckets=buckets,
            registry=registry,
        ),
        itl=Histogram(
            "phasewatch_probe_itl_seconds",
            "The gaps between the probes' output events as a client receives them, seconds.",
            ("probe",),
            buckets=buckets,
            registry=registry,
        ),
        results=Counter(
            "phasewatch_probes_total",
            "Probes sent, by result: ok or the error kind.",
            ("probe", "result"),
            registry=registry,
        ),
    )
