"""``GET /api/v1/windows``: windowed percentiles, rates and gauges per stream."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query

from app.api.deps import ServiceDep
from app.queries import QueryError, stream_windows, window_to_dict

router = APIRouter(tags=["windows"])


@router.get("/windows")
def get_windows(
    service: ServiceDep,
    target: Annotated[str, Query(description="target name")],
    model: Annotated[str | None, Query(description="model_name; all models if omitted")] = None,
    start: Annotated[float | None, Query(description="Unix seconds; default end - 1 h")] = None,
    end: Annotated[float | None, Query(description="Unix seconds; default now")] = None,
    window: Annotated[float | None, Query(gt=0, description="window length, seconds")] = None,
    step: Annotated[float | None, Query(gt=0, description="step between windows, seconds")] = None,
) -> list[dict[str, Any]]:
    """Return one object per window and stream, oldest first."""
    if target not in service.collector.states:
        raise HTTPException(404, f"unknown target {target!r}")
    cfg = service.settings.window
    end_ts = time.time() if end is None else end
    start_ts = end_ts - 3600.0 if start is None else start
    streams = [m for t, m in service.store.streams(target) if model is None or m == model]
    out: list[dict[str, Any]] = []
    try:
        for model_name in streams:
            ws = stream_windows(
                service.store,
                target,
                model_name,
                start=start_ts,
                end=end_ts,
                length=window or cfg.length,
                step=step or cfg.step,
            )
            out.extend(window_to_dict(w) for w in ws)
    except QueryError as exc:
        raise HTTPException(422, str(exc)) from exc
    out.sort(key=lambda w: (w["end"], w["model_name"]))
    return out
