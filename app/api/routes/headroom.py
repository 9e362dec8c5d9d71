"""``GET /api/v1/targets/{name}/headroom`` and ``GET /api/v1/fleets/{model}/headroom``: how
much more traffic before a p99 breaks its SLO, and what breaks first (the what-if twin,
``docs/whatif.md``; computed on demand, kept 5 minutes per stream), at the page's
``cache_config_info`` as of the stream's latest stored snapshot."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query
from pydantic import Field

from app.api.deps import DiagnosisConfigDep, StoreDep, TwinCacheDep
from app.api.schemas import Answer
from app.read.headroom import fleet_headroom, stream_headroom
from app.read.twincache import page_info

router = APIRouter(tags=["headroom"])

NAME = Annotated[str, Path(min_length=1, max_length=256)]


class HeadroomPublic(Answer):
    """One stream's headroom over its last 15 minutes (``headroom`` null with ``error``
    saying why it could not be computed)."""

    target: str
    model_name: str
    start: float
    end: float
    headroom: dict[str, Any] | None = Field(
        description="rate_scale (traffic × k that keeps both p99s within the SLO), "
        "at_least, breaks_at, breaks, limit (queue, kv, decode, prefill), slo, at_break, text"
    )
    error: str | None
    replay_error: float | None = Field(description="how far the twin's replay is from measured")
    warnings: list[str]
    history: dict[str, float | None] | None = Field(
        None,
        description="a thin history, not fitted: span_s, covered_s and busy_s (seconds "
        "scraped, and with traffic), need_s, answer_at (Unix seconds; null: not within a span)",
    )


class FleetHeadroomPublic(Answer):
    """A fleet's headroom: its tightest replica's, and every replica's."""

    model_name: str
    headroom: HeadroomPublic | None
    replicas: list[HeadroomPublic]


@router.get("/targets/{name}/headroom", response_model=HeadroomPublic)
def target_headroom(
    name: NAME,
    store: StoreDep,
    config: DiagnosisConfigDep,
    cache: TwinCacheDep,
    model: Annotated[str | None, Query(max_length=512)] = None,
) -> HeadroomPublic:
    """The largest traffic × k that keeps TTFT p99 and ITL p99 within the stream's SLO, on
    the twin fitted to its last 15 minutes; ``model`` picks the stream of a target that
    serves several. 404 for an unknown target or model."""
    models = [m for _, m in store.streams(name)]
    if not models:
        raise HTTPException(404, f"no stream of target {name!r}")
    if model is None:
        if len(models) > 1:
            raise HTTPException(400, f"target {name!r} serves several models: give ?model=")
        model = models[0]
    elif model not in models:
        raise HTTPException(404, f"target {name!r} has no stream of model {model!r}")
    result = stream_headroom(
        store.intervals,
        name,
        model,
        now=time.time(),
        config=config,
        cache=cache,
        info=page_info(store, name, model),
    )
    return HeadroomPublic(**result.to_dict())


@router.get("/fleets/{model:path}/headroom", response_model=FleetHeadroomPublic)
def fleet_headroom_route(
    model: Annotated[str, Path(min_length=1, max_length=512, description="the model_name")],
    store: StoreDep,
    config: DiagnosisConfigDep,
    cache: TwinCacheDep,
) -> FleetHeadroomPublic:
    """Every replica's headroom (the streams serving ``model``) and the fleet's: its
    tightest replica's, as traffic spread evenly grows on every replica alike."""
    targets = sorted(t for t, m in store.streams() if m == model)
    if not targets:
        raise HTTPException(404, f"no stream of model {model!r}")
    now = time.time()
    results = [
        stream_headroom(
            store.intervals,
            t,
            model,
            now=now,
            config=config,
            cache=cache,
            info=page_info(store, t, model),
        )
        for t in targets
    ]
    tightest = fleet_headroom(results)
    return FleetHeadroomPublic(
        model_name=model,
        headroom=None if tightest is None else HeadroomPublic(**tightest.to_dict()),
        replicas=[HeadroomPublic(**r.to_dict()) for r in results],
    )
