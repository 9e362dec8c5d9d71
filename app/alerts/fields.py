"""What a rule can read: the field names, their types, and the inputs built from them.

Two scopes. A **stream** input (one per target and model) carries the window's numbers
(the same names as ``GET /api/v1/windows``), the diagnosis (``class``, ``sub_cause``,
``confidence``, ``summary``, ``hints``, ``change``: what moved against the stream's
healthy baseline, or why there is no baseline; null when the window is no problem), the
SLOs that apply (``slo.ttft_p99``,
``slo.itl_p99``) and everything a target input has. A **target** input (one per target,
also when it has no stream at all — a target that never answered) carries its scrape
health: ``target_up``, ``metrics_disabled``, ``scrape_error_kind``, ``scrape_age_s``.
Both have ``target`` and ``labels.<name>`` (the target's configured labels plus
``target`` and, for streams, ``model_name``).

``ttft_slo`` and ``itl_slo`` are the diagnosis' one judgement of each SLO
(``app.diagnose.slo.verdict``): ``"over"`` (the histogram's bucket edges prove it),
``"unproven"`` (the p99 lies in a bucket around the SLO, more likely than not over it),
``"within"``, or null (cannot tell); decode is judged per token (TPOT) under speculative
decoding. ``fire_on_unproven`` is the ``alerts.fire_on_unproven`` setting, so a rule can
say whether an unproven breach fires it.

A rule reading only target fields is evaluated once per target; any other rule once
per stream. A third scope, **slo** (one input per SLO and fleet, :func:`slo_instance`),
carries the SLO's burn rates per window (``slo.burn_rate_5m`` … ``slo.burn_rate_1d``),
its budget left, the fleet's diagnosis and its imbalance; a rule reading any of its own
fields (``SLO_ONLY_FIELDS``) is evaluated once per SLO and fleet. Pure: no I/O, no clock.

A probe's stream (``app.sources.probe``) also carries what a client saw: ``probe.<name>``
for each reading of ``app.windows.probefacts.ProbeFacts`` (``probe.client_gap``,
``probe.ttft_mean``, ``probe.failures``…; null on every other stream, the windows API's
``probe`` object).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from dataclasses import fields as fields_of
from typing import Any
from urllib.parse import quote, urlencode

from app.diagnose.changes import change_of
from app.model import PARTIAL_KINDS
from app.windows.probefacts import ProbeFacts

_LATENCY = ("ttft", "itl", "tpot", "e2e", "queue", "prefill", "decode")

# name → type, as the expression checker knows them ("number", "string", "bool", "list").
WINDOW_FIELDS: dict[str, str] = {
    "target": "string",
    "model_name": "string",
    "start": "number",
    "end": "number",
    **{f"{s}_{p}": "number" for s in _LATENCY for p in ("p50", "p90", "p99", "mean", "count")},
    **{f"{g}_{s}": "number" for g in ("running", "waiting", "kv") for s in ("avg", "max")},
    "preemptions_per_s": "number",
    "prompt_tokens_per_s": "number",
    "generation_tokens_per_s": "number",
    "mean_prompt_len": "number",
    "mean_gen_len": "number",
    "prefix_hit_ratio": "number",
    "requests_finished": "number",
    "ge_top_bucket": "list",
    "covered_s": "number",
    "intervals": "number",
    "reset": "bool",
    "missing": "list",
}
# A probe's window, the windows API's ``probe`` object flattened (null elsewhere).
PROBE_FIELDS: dict[str, str] = {
    f"probe.{f.name}": "bool" if f.type in ("bool", bool) else "number"
    for f in fields_of(ProbeFacts)
    if "hist" not in f.name
}
DIAGNOSIS_FIELDS: dict[str, str] = {
    "class": "string",
    "sub_cause": "string",
    "confidence": "number",
    "summary": "string",
    "change": "string",
    "hints": "string",
    "hint_ids": "list",
    "ttft_slo": "string",
    "itl_slo": "string",
    "slo.ttft_p99": "number",
    "slo.itl_p99": "number",
    "ui_url": "string",
}
# Settings a stream rule may read (the verdicts above are judged the same everywhere; this
# says whether the alerts act on the unproven ones).
SETTING_FIELDS: dict[str, str] = {"fire_on_unproven": "bool"}
TARGET_FIELDS: dict[str, str] = {
    "target": "string",
    "target_up": "number",
    "metrics_disabled": "bool",
    "scrape_error_kind": "string",
    "scrape_age_s": "number",
    "ui_url": "string",
}
STREAM_FIELDS: dict[str, str] = {
    **WINDOW_FIELDS,
    **PROBE_FIELDS,
    **DIAGNOSIS_FIELDS,
    **TARGET_FIELDS,
    **SETTING_FIELDS,
}
# Fields only an SLO instance has (one per SLO and fleet, ``app.fleet``): a rule reading
# any of them is evaluated once per SLO and fleet.
BURN_WINDOW_LABELS = ("5m", "30m", "1h", "2h", "6h", "1d")
SLO_ONLY_FIELDS: dict[str, str] = {
    "slo.name": "string",
    "slo.target": "number",
    "slo.period_s": "number",
    **{f"slo.burn_rate_{w}": "number" for w in BURN_WINDOW_LABELS},
    "slo.objective": "string",
    "slo.budget_remaining": "number",
    "slo.budget": "string",
    "slo.attainment": "number",
    "slo.error_share": "number",
    "fleet": "string",
    "replicas": "number",
    "worst_replica": "string",
    "imbalance": "string",
}
SLO_FIELDS: dict[str, str] = {
    **SLO_ONLY_FIELDS,
    "model_name": "string",
    **{k: v for k, v in DIAGNOSIS_FIELDS.items() if not k.startswith("slo.")},
}
LABEL_PREFIX = "labels."
TOP_HINTS = 3
# What an alert knows of itself, for its annotations only (``app.alerts.state``): the
# seconds since its condition began to hold, and the values it held with meanwhile.
ALERT_FIELDS: dict[str, str] = {"active_for": "number", "held": "string"}

# A scrape that got a page counts as "up" (even with no vllm: families on it): the
# server answered. Refused, timed out, HTTP errors, non-Prometheus bodies are "down".
# A scrape used with something left out (PARTIAL_KINDS) is up too.
_REACHED = {
    None,
    "metrics_disabled",
    "bucket_layout_changed",
    "too_many_series",
    "label_limit",
    *PARTIAL_KINDS,
}


def reached(error_kind: str | None) -> bool:
    """Whether a scrape with this outcome got a Prometheus page from the server."""
    return error_kind in _REACHED


def field_type(name: str, scope: str) -> str | None:
    """The type of a field in a scope (``target``, ``stream`` or ``slo``); None when
    unknown."""
    if name.startswith(LABEL_PREFIX) and len(name) > len(LABEL_PREFIX):
        return "string"
    tables = {"target": TARGET_FIELDS, "slo": SLO_FIELDS}
    return tables.get(scope, STREAM_FIELDS).get(name)


def known_names() -> list[str]:
    """Every field name (for "did you mean" suggestions)."""
    return sorted({*STREAM_FIELDS, *SLO_FIELDS})


@dataclass(frozen=True, slots=True)
class ScrapeStatus:
    """The latest scrape of a target at evaluation time (None fields: never scraped)."""

    ts: float | None = None
    ok: bool | None = None
    error_kind: str | None = None


@dataclass(frozen=True, slots=True)
class Instance:
    """One thing rules are evaluated on: a target, or a stream of a target.

    ``labels`` are the alert labels the instance contributes (configured target labels,
    ``target``, ``model_name`` for a stream); ``fields`` what conditions read.
    """

    scope: str
    target: str
    model_name: str | None
    labels: Mapping[str, str]
    fields: Mapping[str, Any] = field(default_factory=dict)


def ui_link(base: str, target: str, model_name: str | None, at: float) -> str:
    """The UI page of a target (and model) around time ``at``."""
    params = {"at": str(int(at))}
    if model_name:
        params["model"] = model_name
    return f"{base.rstrip('/')}/targets/{quote(target, safe='')}?{urlencode(params)}"


def target_fields(
    target: str,
    status: ScrapeStatus,
    *,
    now: float,
    stale_after: float,
    labels: Mapping[str, str],
    ui_base_url: str,
) -> dict[str, Any]:
    """Scrape-health fields of one target at ``now``.

    ``target_up`` is 1 when the latest scrape reached a Prometheus page, 0 when it
    failed, and null (cannot evaluate) before the first scrape or when the latest is
    older than ``stale_after`` seconds (the scraper itself is behind: we do not know).
    ``metrics_disabled`` is null under the same conditions.
    """
    fresh = status.ts is not None and now - status.ts <= stale_after
    up: float | None = None
    disabled: bool | None = None
    if fresh:
        up = 1.0 if reached(status.error_kind) else 0.0
        disabled = status.error_kind == "metrics_disabled"
    out: dict[str, Any] = {
        "target": target,
        "target_up": up,
        "metrics_disabled": disabled,
        "scrape_error_kind": status.error_kind if fresh else None,
        "scrape_age_s": None if status.ts is None else max(0.0, now - status.ts),
        "ui_url": ui_link(ui_base_url, target, None, now),
    }
    out.update({LABEL_PREFIX + k: v for k, v in labels.items()})
    out[LABEL_PREFIX + "target"] = target
    return out


def _hint_line(h: Mapping[str, Any]) -> str:
    line = f"- {h.get('title', '')}: {h.get('action', '')}"
    effect = h.get("effect")
    # The what-if twin's prediction (app.diagnose.effects), unless marked unreliable.
    if isinstance(effect, Mapping) and effect.get("text") and effect.get("reliable", True):
        line += f" — {effect['text']}"
    return line


def _hint_lines(hints: Sequence[Mapping[str, Any]]) -> str:
    return "\n".join(_hint_line(h) for h in hints[:TOP_HINTS])


def stream_fields(
    window: Mapping[str, Any],
    diagnosis: Mapping[str, Any] | None,
    target: Mapping[str, Any],
    *,
    slo_ttft_p99: float,
    slo_itl_p99: float,
    ui_base_url: str,
    fire_on_unproven: bool = False,
) -> dict[str, Any]:
    """Fields of one stream: ``window`` (``window_to_dict``), ``diagnosis.to_dict()``,
    the target's fields (``target_fields``) and ``alerts.fire_on_unproven``."""
    out: dict[str, Any] = dict(target)
    for name in WINDOW_FIELDS:
        value = window.get(name)
        if isinstance(value, float) and not math.isfinite(value):
            value = None
        out[name] = value
    probe = window.get("probe") or {}
    for name in PROBE_FIELDS:
        out[name] = probe.get(name.removeprefix("probe."))
    d = diagnosis or {}
    hints = list(d.get("hints") or [])
    out.update(
        {
            "class": d.get("class"),
            "sub_cause": d.get("sub_cause"),
            "confidence": d.get("confidence"),
            "summary": d.get("summary"),
            "change": change_of(d),
            "hints": _hint_lines(hints) or None,
            "hint_ids": [h.get("id") for h in hints],
            "ttft_slo": d.get("ttft_slo"),
            "itl_slo": d.get("itl_slo"),
            "fire_on_unproven": fire_on_unproven,
            "slo.ttft_p99": slo_ttft_p99,
            "slo.itl_p99": slo_itl_p99,
            "ui_url": ui_link(
                ui_base_url, str(window.get("target")), window.get("model_name"), window["end"]
            ),
        }
    )
    out[LABEL_PREFIX + "model_name"] = window.get("model_name")
    return out


def target_instance(
    target: str, fields: Mapping[str, Any], config_labels: Mapping[str, str]
) -> Instance:
    return Instance("target", target, None, {**config_labels, "target": target}, fields)


def stream_instance(
    target: str, model_name: str, fields: Mapping[str, Any], config_labels: Mapping[str, str]
) -> Instance:
    labels = {**config_labels, "target": target, "model_name": model_name}
    return Instance("stream", target, model_name, labels, fields)


def fleet_link(base: str, model_name: str, at: float) -> str:
    """The UI's fleet page of a model around time ``at``."""
    params = {"at": str(int(at))}
    return f"{base.rstrip('/')}/fleets/{quote(model_name, safe='')}?{urlencode(params)}"


def slo_instance(
    slo_name: str,
    model_name: str,
    group_labels: Mapping[str, str],
    fields: Mapping[str, Any],
) -> Instance:
    """The input of one SLO on one fleet: labels ``slo``, ``model_name`` and the fleet's
    ``group_by`` labels (no ``target``: it is about every replica)."""
    labels = {**group_labels, "slo": slo_name, "model_name": model_name}
    out = dict(fields)
    out.update({LABEL_PREFIX + k: v for k, v in labels.items()})
    return Instance("slo", "", model_name, labels, out)
