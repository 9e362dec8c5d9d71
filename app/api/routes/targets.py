"""``GET /api/v1/targets``: every target scraped now and its scrape health, then the
gone ones (removed from the list; their history kept for the retention)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Depends, Response
from pydantic import BaseModel

from app.api.deps import ServiceDep, StoreDep, TargetsDep
from app.api.params import PageDep
from app.read.gone import GoneTarget, gone_targets, last_scrape
from app.redact import redact_url
from app.sources.base import TargetState

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
    # The engine of the last usable page: "vllm" or "sglang" (every stream of the target
    # is that engine's); null: none yet, or a page without engine families.
    engine_kind: str | None = None
    models: list[str]
    # Kinds of what the last scrape left out while the target stayed up (the first is
    # ``last_error_kind``): too_many_streams, invalid_values, duplicate_series,
    # cut_last_line.
    problems: list[str] = []
    # No longer scraped (removed from the list): its history is kept for the retention.
    gone: bool = False


def get_gone(service: ServiceDep) -> Callable[[str], bool] | None:
    return service.target_gone


GoneDep = Annotated[Callable[[str], bool] | None, Depends(get_gone)]


@router.get("/targets", response_model=list[TargetPublic])
def list_targets(
    targets: TargetsDep, gone: GoneDep, store: StoreDep, page: PageDep, response: Response
) -> list[TargetPublic]:
    """List targets with whether the last scrape succeeded and, if not, why; one page of
    them in configuration (or discovery) order, then the gone ones, by name (``limit``,
    ``offset``; ``X-Total-Count``: all)."""
    rows: list[TargetState | GoneTarget] = [*targets.values()]
    rows += gone_targets(store, targets, gone)
    return [
        _gone(row, last_scrape(store, row.name)) if isinstance(row, GoneTarget) else _live(row)
        for row in page.take(rows, response)
    ]


def _live(state: TargetState) -> TargetPublic:
    rec = state.last_record
    snap = state.last_ok
    return TargetPublic(
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
        engine_kind=(snap.engine_kind or None) if snap else None,
        models=sorted(snap.streams) if snap else [],
        problems=list(state.problems),
    )


def _gone(target: GoneTarget, last: float | None) -> TargetPublic:
    return TargetPublic(
        name=target.name,
        url="",
        labels={},
        up=False,
        last_error=None,
        last_error_kind=None,
        last_scrape=last,
        last_scrape_duration_s=None,
        parse_errors=0,
        metrics_disabled=False,
        models=list(target.models),
        gone=True,
    )
