"""FastAPI dependencies: the parts of the service a route reads, reached per request.

The service is built in the lifespan (``app.state.service``), never at import. A route
declares what it reads — the store, the targets, the silences, a settings section —
rather than the whole :class:`~app.service.Service`, so its signature says what it
needs and it never walks the service's object graph.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated

from fastapi import Depends, Request

from app.alerts.engine import AlertEngine
from app.alerts.history import AlertStore
from app.alerts.outbox import Outbox
from app.alerts.silences import SilenceStore
from app.config import (
    AlertsConfig,
    FleetConfig,
    ScrapeConfig,
    Settings,
    StorageConfig,
    WindowConfig,
)
from app.diagnose import DiagnosisConfig
from app.fleet.slo import SloSpec
from app.fleet.tracker import SloStatus, SloTracker
from app.read.twincache import TwinCache
from app.read.windows import WindowCache
from app.selfmetrics import SelfMetrics
from app.service import Service
from app.sources.base import TargetState
from app.store.diagnoses import DiagnosisStore
from app.store.sqlite import Store

__all__ = [
    "AlertEngineDep",
    "AlertsConfigDep",
    "AlertHistoryDep",
    "DiagnosesDep",
    "DiagnosisConfigDep",
    "EvaluateSlosDep",
    "TwinCacheDep",
    "FleetConfigDep",
    "OutboxDep",
    "ScrapeConfigDep",
    "SelfMetricsDep",
    "ServiceDep",
    "SettingsDep",
    "SilencesDep",
    "SloSpecsDep",
    "StorageConfigDep",
    "StoreDep",
    "TargetLabelsDep",
    "TargetsDep",
    "TrackerDep",
    "WindowCacheDep",
    "WindowConfigDep",
    "get_service",
]


def get_service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


ServiceDep = Annotated[Service, Depends(get_service)]
"""The whole service: for the health routes, whose answer is about all of it."""


# -- settings sections -----------------------------------------------------------------------
def get_settings(service: ServiceDep) -> Settings:
    return service.settings


SettingsDep = Annotated[Settings, Depends(get_settings)]
"""The settings, for the section dependencies below (a route takes its section)."""


def get_window_config(settings: SettingsDep) -> WindowConfig:
    return settings.window


def get_scrape_config(settings: SettingsDep) -> ScrapeConfig:
    return settings.scrape


def get_storage_config(settings: SettingsDep) -> StorageConfig:
    return settings.storage


def get_fleet_config(settings: SettingsDep) -> FleetConfig:
    return settings.fleet


WindowConfigDep = Annotated[WindowConfig, Depends(get_window_config)]
ScrapeConfigDep = Annotated[ScrapeConfig, Depends(get_scrape_config)]
StorageConfigDep = Annotated[StorageConfig, Depends(get_storage_config)]
FleetConfigDep = Annotated[FleetConfig, Depends(get_fleet_config)]


# -- what the service holds ------------------------------------------------------------------
def get_store(service: ServiceDep) -> Store:
    return service.store


def get_twin_cache(service: ServiceDep) -> TwinCache:
    return service.twin_cache


def get_targets(service: ServiceDep) -> Mapping[str, TargetState]:
    return service.source.targets()


def get_target_labels(service: ServiceDep) -> dict[str, dict[str, str]]:
    return service.evaluator.target_labels()


def get_window_cache(service: ServiceDep) -> WindowCache:
    return service.window_cache


def get_diagnosis_config(service: ServiceDep) -> DiagnosisConfig:
    return service.diagnosis_config


def get_diagnoses(service: ServiceDep) -> DiagnosisStore:
    return service.evaluator.diagnoses


def get_self_metrics(service: ServiceDep) -> SelfMetrics:
    return service.metrics


StoreDep = Annotated[Store, Depends(get_store)]
TwinCacheDep = Annotated[TwinCache, Depends(get_twin_cache)]
TargetsDep = Annotated[Mapping[str, TargetState], Depends(get_targets)]
"""Every target the source knows now (configured or discovered), by name."""
TargetLabelsDep = Annotated[dict[str, dict[str, str]], Depends(get_target_labels)]
"""Every target's labels: the source's targets, then those with stored streams (none)."""
WindowCacheDep = Annotated[WindowCache, Depends(get_window_cache)]
DiagnosisConfigDep = Annotated[DiagnosisConfig, Depends(get_diagnosis_config)]
DiagnosesDep = Annotated[DiagnosisStore, Depends(get_diagnoses)]
SelfMetricsDep = Annotated[SelfMetrics, Depends(get_self_metrics)]


# -- SLOs ------------------------------------------------------------------------------------
def get_tracker(service: ServiceDep) -> SloTracker:
    return service.evaluator.tracker


TrackerDep = Annotated[SloTracker, Depends(get_tracker)]
"""The SLO counts cache the alert rounds, the gauges, the API and the UI share."""


def get_slo_specs(tracker: TrackerDep) -> list[SloSpec]:
    return tracker.specs


def get_evaluate_slos(service: ServiceDep) -> Callable[[float], list[SloStatus]]:
    return service.evaluate_slos


SloSpecsDep = Annotated[list[SloSpec], Depends(get_slo_specs)]
"""The SLOs the service evaluates."""
EvaluateSlosDep = Annotated[Callable[[float], list[SloStatus]], Depends(get_evaluate_slos)]
"""Every SLO on every fleet at a time, counts cached (blocking: call it in a thread)."""


# -- alerting --------------------------------------------------------------------------------
def get_alert_engine(service: ServiceDep) -> AlertEngine:
    return service.alerting.engine


AlertEngineDep = Annotated[AlertEngine, Depends(get_alert_engine)]


def get_alerts_config(engine: AlertEngineDep) -> AlertsConfig:
    return engine.cfg


AlertsConfigDep = Annotated[AlertsConfig, Depends(get_alerts_config)]
"""The alerting settings in force (a reload's, once the engine took it)."""


def get_alert_history(engine: AlertEngineDep) -> AlertStore:
    return engine.repo


def get_silences(engine: AlertEngineDep) -> SilenceStore:
    return engine.silences


def get_outbox(service: ServiceDep) -> Outbox:
    return service.alerting.outbox


AlertHistoryDep = Annotated[AlertStore, Depends(get_alert_history)]
SilencesDep = Annotated[SilenceStore, Depends(get_silences)]
OutboxDep = Annotated[Outbox, Depends(get_outbox)]
