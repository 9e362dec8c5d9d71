"""What one window of a probe's stream says (``app.model.PROBE_*_SIGNALS``).

A probe window is recognised by its ``probe_attempts`` counter (:func:`is_probe_window`).
Times are means over the window's answers (Δsum / Δcount: exact, where a handful of
probes make a p99 little more than the maximum) and quantiles like any histogram's.

**The client gap** — how much longer a client waits for its first token than the server
says it took — comes from the best source the window has:

1. per request (``probe_gap``): the probe's TTFT minus the server's own TTFT for the same
   request, where the server reported it (vLLM's per-request metrics, Ollama's
   durations); the share is of those requests' client TTFT (gap + server TTFT);
2. an **estimate**, for a probe of a scraped target whose server reports no per-request
   timings: the probe's mean TTFT minus the server's TTFT p50 over the window
   (``probe_page_ttft``, its page); the share is of the probe's mean TTFT. The p50 is
   the typical request's, and the probe's own request is one of them.

Speeds: the client's decode tokens/s (tokens after the first over first-to-last output
event), and the server's own prefill and decode tokens/s where it reports them (Ollama's
``prompt_eval``/``eval`` counters, vLLM's per-request metrics) — the roofline's measured
speed is the server's when known, else the client's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from app.model import HistogramDelta, Quantile, Window

__all__ = ["ProbeFacts", "is_probe_window", "probe_facts"]


def is_probe_window(window: Window) -> bool:
    """Whether the window is of a probe's stream."""
    return "probe_attempts" in window.increases


@dataclass(frozen=True, slots=True)
class ProbeFacts:
    """Readings of one probe window; None where unknown (module docstring)."""

    attempts: float
    failures: float
    timeouts: float
    page_up: float | None
    ttft_n: float
    ttft_mean: float | None
    ttft_p50: float | None
    ttft_p99: float | None
    ttft_p99_ge: bool
    ttft_hist: HistogramDelta | None
    itl_n: float
    itl_mean: float | None
    itl_p50: float | None
    itl_p99: float | None
    itl_p99_ge: bool
    itl_hist: HistogramDelta | None
    connect_mean: float | None
    ttfb_mean: float | None
    total_mean: float | None
    server_ttft_n: float
    server_ttft_mean: float | None
    page_ttft_n: float | None
    page_ttft_p50: float | None
    page_generation_tokens: float | None
    client_gap: float | None
    client_gap_share: float | None
    client_gap_estimated: bool
    client_ttft: float | None
    decode_tps: float | None
    server_decode_tps: float | None
    server_prefill_tps: float | None
    server_prefill_mean: float | None

    @property
    def measured_decode_tps(self) -> float | None:
        """The decode speed the roofline compares: the server's own, else the client's."""
        return self.server_decode_tps or self.decode_tps

    def as_dict(self) -> dict[str, float | bool | None]:
        """The readings by name (the API's ``probe`` object of a window); histograms left
        out, non-finite numbers as None."""
        out: dict[str, float | bool | None] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool):
                out[f.name] = value
            elif isinstance(value, int | float):
                out[f.name] = float(value) if math.isfinite(value) else None
            elif value is None:
                out[f.name] = None
        return out

    def numbers(self) -> dict[str, float | None]:
        """The numeric readings, prefixed ``probe_`` (``Diagnosis.facts``)."""
        return {
            (k if k.startswith("client_") else f"probe_{k}"): v
            for k, v in self.as_dict().items()
            if not isinstance(v, bool)
        }


def _mean(w: Window, sig: str) -> float | None:
    return w.means.get(sig) if w.observations.get(sig, 0.0) > 0 else None


def _q(w: Window, sig: str, p: str) -> Quantile:
    return w.quantiles.get(sig, {}).get(p) or Quantile(None)


def _ratio(w: Window, num: str, den: str) -> float | None:
    n, d = w.increases.get(num), w.increases.get(den)
    return n / d if n and d else None


def probe_facts(w: Window) -> ProbeFacts | None:
    """Read a probe window (None for any other window)."""
    if not is_probe_window(w):
        return None
    inc = w.increases
    ttft_mean = _mean(w, "probe_ttft")
    server_mean = _mean(w, "probe_server_ttft")
    gap_mean = _mean(w, "probe_gap")
    page_n = w.observations.get("probe_page_ttft") if "probe_page_ttft" in w.histograms else None
    page_p50 = _q(w, "probe_page_ttft", "p50").value if page_n else None
    gap = reference = None
    estimated = False
    if gap_mean is not None and server_mean is not None:
        gap, reference = gap_mean, gap_mean + server_mean
    elif ttft_mean is not None and page_p50 is not None:
        gap, reference, estimated = ttft_mean - page_p50, ttft_mean, True
    # Answers that reported the server's timings (else every answer that came whole).
    reported = w.observations.get("probe_server_ttft", 0.0) or (
        inc.get("probe_attempts", 0.0) - inc.get("probe_failures", 0.0)
    )
    prefill_tokens = inc.get("probe_server_prefill_tokens")
    prefill_s = inc.get("probe_server_prefill_seconds")
    return ProbeFacts(
        attempts=inc.get("probe_attempts", 0.0),
        failures=inc.get("probe_failures", 0.0),
        timeouts=inc.get("probe_timeouts", 0.0),
        page_up=inc.get("probe_page_up"),
        ttft_n=w.observations.get("probe_ttft", 0.0),
        ttft_mean=ttft_mean,
        ttft_p50=_q(w, "probe_ttft", "p50").value,
        ttft_p99=_q(w, "probe_ttft", "p99").value,
        ttft_p99_ge=_q(w, "probe_ttft", "p99").ge_top_bucket,
        ttft_hist=w.histograms.get("probe_ttft"),
        itl_n=w.observations.get("probe_itl", 0.0),
        itl_mean=_mean(w, "probe_itl"),
        itl_p50=_q(w, "probe_itl", "p50").value,
        itl_p99=_q(w, "probe_itl", "p99").value,
        itl_p99_ge=_q(w, "probe_itl", "p99").ge_top_bucket,
        itl_hist=w.histograms.get("probe_itl"),
        connect_mean=_mean(w, "probe_connect"),
        ttfb_mean=_mean(w, "probe_ttfb"),
        total_mean=_mean(w, "probe_total"),
        server_ttft_n=w.observations.get("probe_server_ttft", 0.0),
        server_ttft_mean=server_mean,
        page_ttft_n=page_n,
        page_ttft_p50=page_p50,
        page_generation_tokens=inc.get("probe_page_generation_tokens"),
        client_gap=gap,
        client_gap_share=None if gap is None or not reference else gap / reference,
        client_gap_estimated=estimated,
        client_ttft=reference,
        decode_tps=_ratio(w, "probe_decode_tokens", "probe_decode_seconds"),
        server_decode_tps=_ratio(w, "probe_server_decode_tokens", "probe_server_decode_seconds"),
        server_prefill_tps=None if not prefill_s else (prefill_tokens or 0.0) / prefill_s,
        server_prefill_mean=None if not prefill_s else prefill_s / max(1.0, reported),
    )
