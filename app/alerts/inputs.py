"""Windows, diagnoses and scrape health → the instances rules are evaluated on.

The glue shared by the service's evaluation job and ``replay``, so both judge the same
fields the same way. Pure: the caller passes the time and everything it read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from app.alerts.fields import (
    Instance,
    ScrapeStatus,
    stream_fields,
    stream_instance,
    target_fields,
    target_instance,
)
from app.config import SloConfig
from app.diagnose import DEFAULT_CONFIG, Diagnosis, DiagnosisConfig, diagnose
from app.model import Window
from app.queries import window_to_dict

__all__ = ["diagnosis_config", "evaluate_stream", "target_input"]


def diagnosis_config(
    slo: SloConfig, target: str, model_name: str, base: DiagnosisConfig = DEFAULT_CONFIG
) -> DiagnosisConfig:
    """The diagnosis thresholds with the SLOs ``Settings.slo`` gives this stream."""
    values = slo.for_stream(target, model_name)
    return dataclasses.replace(base, slo_ttft_p99=values.ttft_p99, slo_itl_p99=values.itl_p99)


def target_input(
    target: str,
    status: ScrapeStatus,
    *,
    now: float,
    stale_after: float,
    labels: Mapping[str, str],
    ui_base_url: str,
) -> Instance:
    """The target-scope instance (scrape health) at ``now``."""
    fields = target_fields(
        target, status, now=now, stale_after=stale_after, labels=labels, ui_base_url=ui_base_url
    )
    return target_instance(target, fields, labels)


def evaluate_stream(
    window: Window,
    target: Instance,
    slo: SloConfig,
    *,
    failed_scrapes: int,
    attempted_scrapes: int,
    labels: Mapping[str, str],
    ui_base_url: str,
) -> tuple[Diagnosis, Instance, dict[str, Any]]:
    """Diagnose one stream's window; return the diagnosis, its instance and the window's
    JSON (``window_to_dict``)."""
    config = diagnosis_config(slo, window.target, window.model_name)
    diagnosis = diagnose(
        window, config, failed_scrapes=failed_scrapes, attempted_scrapes=attempted_scrapes
    )
    flat = window_to_dict(window)
    fields = stream_fields(
        flat,
        diagnosis.to_dict(),
        target.fields,
        slo_ttft_p99=config.slo_ttft_p99,
        slo_itl_p99=config.slo_itl_p99,
        ui_base_url=ui_base_url,
    )
    return diagnosis, stream_instance(window.target, window.model_name, fields, labels), flat
