"""Settings → the fleet's pure records: SLO specs and imbalance thresholds.

Without an ``slos`` section every model gets one SLO named ``default``: its TTFT and ITL
objectives are the ``slo`` section's p99 objectives (a model's override wins), target
0.99 — "p99 ≤ objective" is "99 % of events within it" — over 30 days, with errors
counting against it. ``slos: []`` turns SLOs off. Every SLO's budget waits for
``slo.min_events_for_budget`` events before it is judged.
"""

from __future__ import annotations

from app.config import ImbalanceConfig, Settings, SloObjectConfig
from app.fleet.imbalance import ImbalanceThresholds
from app.fleet.slo import SloSpec

__all__ = ["DEFAULT_SLO", "imbalance_thresholds", "slo_specs"]

DEFAULT_SLO = "default"
DEFAULT_TARGET = 0.99
DEFAULT_PERIOD_S = 30 * 86400.0


def _spec(c: SloObjectConfig, min_events: float) -> SloSpec:
    return SloSpec(
        name=c.name,
        target=c.target,
        period_s=c.period,
        ttft=c.ttft,
        itl=c.itl,
        tpot=c.tpot,
        bad_reasons=tuple(c.bad_finish_reasons),
        selector=tuple(sorted(c.selector.items())),
        min_events=min_events,
    )


def slo_specs(settings: Settings) -> list[SloSpec]:
    """The configured SLOs, or the implicit ``default`` ones (module docstring)."""
    slo = settings.slo
    min_events = float(slo.min_events_for_budget)
    if settings.slos is not None:
        return [_spec(c, min_events) for c in settings.slos]
    overridden = tuple(sorted(slo.overrides))
    out = [
        SloSpec(
            name=DEFAULT_SLO,
            target=DEFAULT_TARGET,
            period_s=DEFAULT_PERIOD_S,
            ttft=slo.ttft_p99,
            itl=slo.itl_p99,
            exclude_models=overridden,
            min_events=min_events,
        )
    ]
    for key in overridden:  # a key that names a target, not a model, matches nothing
        values = slo.overrides[key]
        out.append(
            SloSpec(
                name=DEFAULT_SLO,
                target=DEFAULT_TARGET,
                period_s=DEFAULT_PERIOD_S,
                ttft=values.ttft_p99,
                itl=values.itl_p99,
                selector=(("model_name", key),),
                min_events=min_events,
            )
        )
    return out


def imbalance_thresholds(cfg: ImbalanceConfig) -> ImbalanceThresholds:
    return ImbalanceThresholds(
        min_replicas=cfg.min_replicas,
        load_ratio=cfg.load_ratio,
        load_min_delta=cfg.load_min_delta,
        waiting_min=cfg.waiting_min,
        idle_waiting_max=cfg.idle_waiting_max,
        kv_spread=cfg.kv_spread,
        latency_ratio=cfg.latency_ratio,
        min_observations=cfg.min_observations,
        latency_slo_share=cfg.latency_slo_share,
        kv_near=cfg.kv_near,
    )
