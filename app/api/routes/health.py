"""``/healthz``, the component health page and the service's own ``/metrics``."""

from __future__ import annotations

import time
from typing import Any, Literal

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import Field

from app.alerts.receivers.http import DeliveryErrorKind
from app.api.deps import SelfMetricsDep, ServiceDep, StoreDep
from app.api.schemas import Answer
from app.service import health
from app.store.health import StoreErrorKind

router = APIRouter()


class HealthzPublic(Answer):
    """Liveness, and the rounds each job has finished since the process started."""

    status: Literal["ok", "starting"] = Field(description="starting: the scheduler is not up")
    targets: int
    rounds: int = Field(description="scrape (or Prometheus read) rounds")
    evaluations: int = Field(description="alert evaluation rounds")
    send_rounds: int = Field(description="outbox send rounds")
    schema_version: int
    components: Literal["ok", "degraded"]


class StoreHealthPublic(Answer):
    """Whether the latest write got through; the last failure and when it happened."""

    ok: bool
    error_kind: StoreErrorKind | None
    last_error: str | None
    last_error_at: float | None
    last_write_ok: float | None
    failed_writes: int


class OutboxBacklogPublic(Answer):
    backlog: int | None = Field(description="undelivered notifications; null if unreadable")
    oldest_undelivered_age_s: float | None


class ReceiverHealthPublic(Answer):
    """What this process last heard from one receiver."""

    id: str
    kind: str
    ok: bool
    last_attempt: float | None
    last_success: float | None
    last_error: str | None
    last_error_kind: DeliveryErrorKind | None
    last_error_at: float | None
    failures: int = Field(description="failed attempts in a row")


class TargetsHealthPublic(Answer):
    total: int
    up: int
    down: dict[str, int] = Field(description="targets down per error kind")
    problems: dict[str, int] = Field(
        description="up targets whose last scrape left something out, per kind"
    )


class ConfigLoadPublic(Answer):
    """The configuration's last load (start-up or reload: SIGHUP, ``POST /-/reload``)."""

    successful: bool = Field(description="false: the last reload was refused, the old runs")
    last_attempt: float | None
    last_success: float | None
    error: str | None = Field(description="why the last reload was refused")
    trigger: str = Field(description="start, SIGHUP or api")


class DiscoveryHealthPublic(Answer):
    """One file_sd or http_sd config's last look (a failed look keeps the last list)."""

    kind: Literal["file_sd", "http_sd"]
    source: str = Field(description="the file patterns, or the URL (secrets masked)")
    ok: bool
    targets: int
    skipped: int = Field(description="entries left out of the list (bad address, name twice)")
    skipped_why: list[str]
    last_refresh: float | None
    last_error: str | None
    last_error_at: float | None
    failures: int


class ComponentsPublic(Answer):
    """What the service needs besides its targets; ``degraded`` while one fails."""

    status: Literal["ok", "degraded"]
    config: ConfigLoadPublic
    discovery: list[DiscoveryHealthPublic]
    store: StoreHealthPublic
    outbox: OutboxBacklogPublic
    receivers: list[ReceiverHealthPublic]
    targets: TargetsHealthPublic


@router.get("/healthz", tags=["health"], response_model=HealthzPublic)
def healthz(service: ServiceDep) -> dict[str, Any]:
    """Liveness: the process answers and its scheduler runs; the rounds each job has
    finished so far (scrape, alert evaluation, outbox send)."""
    return health.liveness(service, time.time())


@router.get("/api/v1/health/components", tags=["health"], response_model=ComponentsPublic)
def components(service: ServiceDep) -> dict[str, Any]:
    """The store (write errors by kind), the outbox backlog, each receiver's last error
    kind, the configuration's last load, each discovery config's last look and a summary
    of target health; ``status`` is ``degraded`` when one fails (a refused reload too)."""
    return health.components(service, time.time())


@router.get(
    "/metrics",
    tags=["health"],
    response_class=Response,
    responses={
        200: {
            "description": "Prometheus text format 0.0.4",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        }
    },
)
def metrics(self_metrics: SelfMetricsDep, store: StoreDep) -> Response:
    """phasewatch's own metrics in Prometheus text format 0.0.4."""
    self_metrics.store_bytes.set(store.size_bytes())
    return Response(generate_latest(self_metrics.registry), media_type=CONTENT_TYPE_LATEST)
