"""A window flattened into named fields: the API's window object and the rules' fields.

``GET /api/v1/windows`` answers these objects and the alert rules read the same names
(``app.alerts.fields.WINDOW_FIELDS``). Pure. A value that is not finite (no
observations, a rate over nothing) is null, never 0.
"""

from __future__ import annotations

from typing import Any

from app.model import PROBE_HISTOGRAM_SIGNALS, Window
from app.windows.probefacts import probe_facts

__all__ = ["FIELD_PREFIX", "FLAT_QUANTILES", "window_to_dict"]

# API field prefix for each histogram signal (``queue_time`` is reported as ``queue_p99``).
FIELD_PREFIX: dict[str, str] = {
    "ttft": "ttft",
    "itl": "itl",
    "tpot": "tpot",
    "e2e": "e2e",
    "queue_time": "queue",
    "prefill_time": "prefill",
    "decode_time": "decode",
}

# The histograms whose quantiles the flat object reads (its fields and a probe's): a
# window built only to be flattened (``lean``, ``app.windows.assemble``) computes no other.
FLAT_QUANTILES: frozenset[str] = frozenset(FIELD_PREFIX) | frozenset(PROBE_HISTOGRAM_SIGNALS)


# (signal, ((percentile, field), ...), mean field, count field), in the object's order
_HISTOGRAM_FIELDS = tuple(
    (
        signal,
        tuple((p, f"{prefix}_{p}") for p in ("p50", "p90", "p99")),
        f"{prefix}_mean",
        f"{prefix}_count",
    )
    for signal, prefix in FIELD_PREFIX.items()
)


def _clean(x: float | None) -> float | None:
    if x is None or x - x != 0:  # NaN and infinities give NaN
        return None
    return x


def window_to_dict(w: Window) -> dict[str, Any]:
    """Flatten a window into the API's JSON object."""
    out: dict[str, Any] = {
        "target": w.target,
        "model_name": w.model_name,
        "start": float(w.start),
        "end": float(w.end),
    }
    ge_top: list[str] = []
    # A window of the API is flattened 1,440 times for a day: the lookups are hoisted and
    # ``_clean`` written in line where it runs per field.
    quantiles, means, observations = w.quantiles, w.means, w.observations
    for signal, percentiles, mean_field, count_field in _HISTOGRAM_FIELDS:
        qs = quantiles.get(signal)
        for p, name in percentiles:
            q = None if qs is None else qs.get(p)
            if q is None:
                out[name] = None
                continue
            v = q.value
            out[name] = v if v is not None and v - v == 0 else None
            if q.ge_top_bucket:
                ge_top.append(name)
        m = means.get(signal)
        out[mean_field] = m if m is not None and m - m == 0 else None
        out[count_field] = observations.get(signal)
    for gauge, prefix in (("running", "running"), ("waiting", "waiting"), ("kv_usage", "kv")):
        g = w.gauges.get(gauge)
        out[f"{prefix}_avg"] = _clean(g.avg) if g is not None else None
        out[f"{prefix}_max"] = _clean(g.max) if g is not None else None
    for counter, name in (
        ("preemptions", "preemptions_per_s"),
        ("prompt_tokens", "prompt_tokens_per_s"),
        ("generation_tokens", "generation_tokens_per_s"),
    ):
        out[name] = _clean(w.rates.get(counter))
    out["mean_prompt_len"] = _clean(w.means.get("prompt_len"))
    out["mean_gen_len"] = _clean(w.means.get("gen_len"))
    queries = w.increases.get("prefix_queries")
    hits = w.increases.get("prefix_hits")
    out["prefix_hit_ratio"] = hits / queries if queries and hits is not None else None
    finished = [v for k, v in w.increases.items() if k.startswith("finished:")]
    out["requests_finished"] = sum(finished) if finished else None
    out["ge_top_bucket"] = ge_top
    out["covered_s"] = w.covered
    out["intervals"] = w.intervals
    out["reset"] = w.reset
    out["missing"] = list(w.missing)
    probe = probe_facts(w)  # a probe's stream: what a client saw (app.windows.probefacts)
    out["probe"] = None if probe is None else probe.as_dict()
    return out
