"""Settings → the diagnosis configuration: the one place the ``slo`` section is resolved.

``Settings.slo`` gives default objectives and ``overrides`` keyed by a name that is a
target's or a model's: a target key beats a model key, and an override replaces both
objectives. :func:`with_slo` turns that into ``DiagnosisConfig`` SLO overrides, whose
``slo_for(target, model_name)`` is the only SLO lookup: the diagnosis, the alert rules'
``slo.*`` fields, the UI's SLO lines and the fleet views all read a stream's SLOs from
it. The diagnosis core never sees ``Settings``: it is handed the value built here.
"""

from __future__ import annotations

import dataclasses

from app.config import Settings, SloConfig
from app.diagnose import DEFAULT_CONFIG, DiagnosisConfig, SloOverride

__all__ = ["diagnosis_config", "with_slo"]


def with_slo(base: DiagnosisConfig, slo: SloConfig) -> DiagnosisConfig:
    """``base`` with the SLOs of a settings ``slo`` section (module docstring)."""
    overrides: list[SloOverride] = []
    for key, v in slo.overrides.items():  # a key names a target or a model
        overrides.append(SloOverride(target=key, ttft_p99=v.ttft_p99, itl_p99=v.itl_p99))
        overrides.append(SloOverride(model_name=key, ttft_p99=v.ttft_p99, itl_p99=v.itl_p99))
    return dataclasses.replace(
        base,
        slo_ttft_p99=slo.ttft_p99,
        slo_itl_p99=slo.itl_p99,
        slo_overrides=tuple(overrides),
    )


def diagnosis_config(settings: Settings) -> DiagnosisConfig:
    """The service's diagnosis configuration: the default thresholds, the configured SLOs."""
    return with_slo(DEFAULT_CONFIG, settings.slo)
