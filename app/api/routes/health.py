"""``/healthz``, the component health page and the service's own ``/metrics``."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from app.api.deps import ServiceDep

router = APIRouter()


@router.get("/healthz", tags=["health"])
def healthz(service: ServiceDep) -> dict[str, Any]:
    """Liveness: the process answers and its scheduler runs; the rounds each job has
    finished so far (scrape, alert evaluation, outbox send)."""
    return {
        "status": "ok" if service.scheduler.running else "starting",
        "targets": len(service.source.targets()),
        "rounds": service.source.rounds,
        "evaluations": service.alerting.evaluations,
        "send_rounds": service.alerting.send_rounds,
        "schema_version": service.store.schema_version,
        "components": service.components(time.time())["status"],
    }


@router.get("/api/v1/health/components", tags=["health"])
def components(service: ServiceDep) -> dict[str, Any]:
    """The store (write errors by kind), the outbox backlog, each receiver's last error
    kind and a summary of target health; ``status`` is ``degraded`` when one fails."""
    return service.components(time.time())


@router.get("/metrics", tags=["health"])
def metrics(service: ServiceDep) -> Response:
    """phasewatch's own metrics in Prometheus text format 0.0.4."""
    service.metrics.store_bytes.set(service.store.size_bytes())
    return Response(generate_latest(service.metrics.registry), media_type=CONTENT_TYPE_LATEST)
