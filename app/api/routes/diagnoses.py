"""``GET /api/v1/diagnoses``: the diagnoses the evaluation job stored for a target.

A row is stored when a stream's class or sub-cause changes, and otherwise once a minute
(``app.store.diagnoses``); each is ``Diagnosis.to_dict()`` (class, sub_cause,
confidence, summary, evidence, hints…) for the window ``(start, end]``.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query

from app.api.deps import ServiceDep
from app.api.params import DEFAULT_LIMIT, Limit, UnixTime

router = APIRouter(tags=["diagnoses"])


@router.get("/diagnoses")
def list_diagnoses(
    service: ServiceDep,
    target: Annotated[str, Query(description="target name")],
    model: Annotated[str | None, Query(description="model_name; all models if omitted")] = None,
    start: Annotated[UnixTime | None, Query(description="Unix seconds; default end - 1 h")] = None,
    end: Annotated[UnixTime | None, Query(description="Unix seconds; default now")] = None,
    limit: Limit = DEFAULT_LIMIT,
) -> list[dict[str, Any]]:
    """Stored diagnoses with ``start < end <= end``, oldest first."""
    end_ts = time.time() if end is None else end
    start_ts = end_ts - 3600.0 if start is None else start
    if end_ts <= start_ts:
        raise HTTPException(422, "end must be after start")
    return service.alerting.engine.diagnoses.query(
        target, model_name=model, start=start_ts, end=end_ts, limit=limit
    )
