"""Settings → the diagnosis of probes: the ``probing`` thresholds and each probe's device.

``probing.frontend_gap_min``/``frontend_gap_share`` become the ``frontend_bound`` rule's
thresholds; a probe's ``device`` (a preset of docs/concepts.md's table) and
``model_params_b``/``weight_bits`` its decode ceiling (``DiagnosisConfig.hardware_by_target``,
read per stream through ``hardware_for``). A device that is not a preset gives no ceiling
and is said so in the log whenever the configuration is resolved; the probe runs all the
same.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

from app.diagnose import DiagnosisConfig, Hardware
from app.probeconfig import ProbeConfig, ProbingConfig

__all__ = ["probe_hardware", "with_probes"]

log = logging.getLogger(__name__)

_DTYPE = {4: "int4", 8: "int8", 16: "bfloat16", 32: "float32"}


def probe_hardware(p: ProbeConfig) -> Hardware | None:
    """A probe's device and weights (None: not both given, or an unknown device)."""
    if p.device is None or p.model_params_b is None:
        return None
    try:
        return Hardware.resolve(
            device=p.device, params=p.model_params_b * 1e9, dtype=_DTYPE[p.weight_bits]
        )
    except ValueError as exc:
        log.warning("probe %s: no decode ceiling: %s", p.name, exc)
        return None


def with_probes(
    base: DiagnosisConfig, probes: Sequence[ProbeConfig], probing: ProbingConfig
) -> DiagnosisConfig:
    """``base`` with the probing thresholds and every probe's hardware."""
    hardware = tuple((p.name, hw) for p in probes if (hw := probe_hardware(p)) is not None)
    return dataclasses.replace(
        base,
        frontend_gap_min=probing.frontend_gap_min,
        frontend_gap_share=probing.frontend_gap_share,
        hardware_by_target=hardware,
    )
