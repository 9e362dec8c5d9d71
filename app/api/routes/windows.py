"""``GET /api/v1/windows``: windowed percentiles, rates and gauges per stream."""

from __future__ import annotations

import threading
import time
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request, Response

from app.api.deps import StoreDep, TargetsDep, WindowCacheDep, WindowConfigDep
from app.api.disconnect import run_while_connected
from app.api.params import MAX_ANSWER_BYTES, HistoryKeptDep, Seconds, Step, UnixTime, json_answer
from app.api.schemas import WindowPublic
from app.read.windows import QueryError, windows_body

router = APIRouter(tags=["windows"])


# The answer is written from windows kept encoded (``WindowCache``), never validated
# again: the model documents it (and the schema tests check it against real answers).
@router.get(
    "/windows",
    response_model=list[WindowPublic],
    response_description="one object per window and stream, oldest first",
)
async def get_windows(
    request: Request,
    targets: TargetsDep,
    store: StoreDep,
    cache: WindowCacheDep,
    defaults: WindowConfigDep,
    kept: HistoryKeptDep,
    target: Annotated[str, Query(description="target name")],
    model: Annotated[str | None, Query(description="model_name; all models if omitted")] = None,
    start: Annotated[UnixTime | None, Query(description="Unix seconds; default end - 1 h")] = None,
    end: Annotated[UnixTime | None, Query(description="Unix seconds; default now")] = None,
    window: Annotated[
        Seconds | None, Query(description="window length, seconds; at most the history kept")
    ] = None,
    step: Annotated[Step | None, Query(description="step between windows, seconds")] = None,
) -> Response:
    """Return one object per window and stream, oldest first.

    At most ``app.read.windows.MAX_WINDOWS`` windows over all streams per request, a
    window no longer than the history kept, and an answer that cannot be under 10 MB
    (long ``model_name``s: 422 beyond any, before any work). Windows
    that can no longer change are kept encoded (:class:`app.read.windows.WindowCache`), so
    asking for the same day again computes only the newest windows. A client that
    disconnects stops the work between streams.
    """
    if target not in targets and not store.streams(target):  # a gone target's history stays
        raise HTTPException(404, f"unknown target {target!r}")
    end_ts = time.time() if end is None else end
    start_ts = end_ts - 3600.0 if start is None else start
    length, step_s = window or defaults.length, step or defaults.step

    def work(cancel: threading.Event) -> bytes:
        models = [m for _, m in store.streams(target) if model is None or m == model]
        return windows_body(
            cache,
            store,
            target,
            models,
            start=start_ts,
            end=end_ts,
            length=length,
            step=step_s,
            now=time.time(),
            max_length=kept,
            max_bytes=MAX_ANSWER_BYTES,
            cancel=cancel,
        )

    try:
        body = await run_while_connected(request, work)
    except QueryError as exc:
        raise HTTPException(422, str(exc)) from exc
    return json_answer(body)
