"""``GET /api/v1/windows``: windowed percentiles, rates and gauges per stream."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Response

from app.api.deps import ServiceDep
from app.queries import QueryError

router = APIRouter(tags=["windows"])
_SHAPE: dict[str, Any] = {
    "description": "one object per window and stream (fields: ``app.queries.window_to_dict``)",
    "content": {"application/json": {"schema": {"type": "array", "items": {"type": "object"}}}},
}


@router.get("/windows", response_class=Response, responses={200: _SHAPE})
def get_windows(
    service: ServiceDep,
    target: Annotated[str, Query(description="target name")],
    model: Annotated[str | None, Query(description="model_name; all models if omitted")] = None,
    start: Annotated[float | None, Query(description="Unix seconds; default end - 1 h")] = None,
    end: Annotated[float | None, Query(description="Unix seconds; default now")] = None,
    window: Annotated[float | None, Query(gt=0, description="window length, seconds")] = None,
    step: Annotated[float | None, Query(gt=0, description="step between windows, seconds")] = None,
) -> Response:
    """Return one object per window and stream, oldest first.

    Windows that can no longer change are kept encoded (:class:`app.queries.WindowCache`),
    so asking for the same day again computes only the newest windows.
    """
    if target not in service.collector.states:
        raise HTTPException(404, f"unknown target {target!r}")
    cfg = service.settings.window
    end_ts = time.time() if end is None else end
    start_ts = end_ts - 3600.0 if start is None else start
    streams = [m for t, m in service.store.streams(target) if model is None or m == model]
    out: list[tuple[float, str, bytes]] = []
    try:
        for model_name in streams:
            ws = service.window_cache.windows(
                service.store,
                target,
                model_name,
                start=start_ts,
                end=end_ts,
                length=window or cfg.length,
                step=step or cfg.step,
                now=time.time(),
            )
            out.extend((e, model_name, body) for e, body in ws)
    except QueryError as exc:
        raise HTTPException(422, str(exc)) from exc
    out.sort(key=lambda w: (w[0], w[1]))
    body = b"[" + b",".join(b for _, _, b in out) + b"]"
    return Response(body, media_type="application/json")
