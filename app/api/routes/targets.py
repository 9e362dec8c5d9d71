"""``GET /api/v1/targets``: every configured target and its scrape health."""

from __future__ import annotations

from fastapi import APIRouter, Response
from pydantic import BaseModel

from app.api.deps import TargetsDep
from app.api.params import PageDep
from app.redact import redact_url

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
    # Kinds of what the last scrape left out while the target stayed up (the first is
    # ``last_error_kind``): too_many_streams, invalid_values, duplicate_series.
    problems: list[str] = []


@router.get("/targets", response_model=list[TargetPublic])
def list_targets(targets: TargetsDep, page: PageDep, response: Response) -> list[TargetPublic]:
    """List targets with whether the last scrape succeeded and, if not, why; one page of
    them in configuration order (``limit``, ``offset``; ``X-Total-Count``: all)."""
    out = []
    for state in page.take(list(targets.values()), response):
        rec = state.last_record
        snap = state.last_ok
        out.append(
            TargetPublic(
                name=state.config.name,
                url=redact_url(state.config.url),
                labels=state.config.labels,
                up=bool(rec and rec.ok),
                last_error=rec.error if rec else None,
                last_error_kind=rec.error_kind if rec else None,
                last_scrape=rec.ts if rec else None,
                last_scrape_duration_s=rec.duration if rec else None,
                parse_errors=rec.parse_errors if rec else 0,
                metrics_disabled=state.metrics_disabled,
                models=sorted(snap.streams) if snap else [],
                problems=list(state.problems),
            )
        )
    return out
