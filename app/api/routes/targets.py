"""``GET /api/v1/targets``: every configured target and its scrape health."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from app.api.deps import ServiceDep

router = APIRouter(tags=["targets"])


class TargetPublic(BaseModel):
    name: str
    url: str
    labels: dict[str, str]
    up: bool
    last_error: str | None
    last_error_kind: str | None
    last_scrape: float | None
    last_scrape_duration_s: float | None
    parse_errors: int
    metrics_disabled: bool
    models: list[str]


@router.get("/targets", response_model=list[TargetPublic])
def list_targets(service: ServiceDep) -> list[TargetPublic]:
    """List targets with whether the last scrape succeeded and, if not, why."""
    out = []
    for state in service.collector.states.values():
        rec = state.last_record
        snap = state.last_ok
        out.append(
            TargetPublic(
                name=state.config.name,
                url=state.config.url,
                labels=state.config.labels,
                up=bool(rec and rec.ok),
                last_error=rec.error if rec else None,
                last_error_kind=rec.error_kind if rec else None,
                last_scrape=rec.ts if rec else None,
                last_scrape_duration_s=rec.duration if rec else None,
                parse_errors=rec.parse_errors if rec else 0,
                metrics_disabled=state.metrics_disabled,
                models=sorted(snap.streams) if snap else [],
            )
        )
    return out
