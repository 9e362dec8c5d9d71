"""Settings → the diagnosis configuration: the one place the ``slo`` section and the
targets' ``server:`` blocks are resolved.

``Settings.slo`` gives default objectives and ``overrides`` keyed by a name that is a
target's or a model's: a target key beats a model key, and an override replaces both
objectives. :func:`with_slo` turns that into ``DiagnosisConfig`` SLO overrides, whose
``slo_for(target, model_name)`` is the only SLO lookup: the diagnosis, the alert rules'
``slo.*`` fields, the UI's SLO lines and the fleet views all read a stream's SLOs from
it. The same way :func:`with_servers` turns each target's ``server:`` block (its vLLM
engine settings) into ``DiagnosisConfig.servers``, read per stream through
``server_for(target)``. The diagnosis core never sees ``Settings``: it is handed the
value built here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from app.config import Settings, SloConfig, TargetConfig, TargetServerConfig
from app.diagnose import DEFAULT_CONFIG, DiagnosisConfig, SloOverride
from app.diagnose.server import ServerSettings
from app.evaluate.probes import with_probes

__all__ = ["diagnosis_config", "server_settings", "with_servers", "with_slo"]


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


def server_settings(block: TargetServerConfig) -> ServerSettings:
    """A ``server:`` block as the diagnosis' value (the same field names)."""
    return ServerSettings(**block.model_dump())


def with_servers(base: DiagnosisConfig, targets: Iterable[TargetConfig]) -> DiagnosisConfig:
    """``base`` with the engine settings of every target that has a ``server:`` block."""
    servers = tuple((t.name, server_settings(t.server)) for t in targets if t.server is not None)
    return dataclasses.replace(base, servers=servers)


def diagnosis_config(settings: Settings) -> DiagnosisConfig:
    """The service's diagnosis configuration: the default thresholds, the configured SLOs,
    the targets' server settings and the probes' (``app.evaluate.probes``)."""
    config = with_servers(with_slo(DEFAULT_CONFIG, settings.slo), settings.targets)
    return with_probes(config, settings.probes, settings.probing)
