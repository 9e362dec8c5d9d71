"""``GET /api/v1/slos``: SLO attainment, burn rates and error budgets per fleet."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query, Response

from app.api.deps import ServiceDep
from app.api.params import HistoryKeptDep, PageDep, Seconds, Step, UnixTime

router = APIRouter(tags=["slos"])

MAX_POINTS = 1000


@router.get("/slos")
async def list_slos(service: ServiceDep, page: PageDep, response: Response) -> list[dict[str, Any]]:
    """Every SLO on every fleet it selects, now: objectives, target, period, burn rates per
    window (5m … 1d), the counts behind them (attainment per objective, interpolated
    flags, error and abort shares), the latest window per replica, and the budget left;
    one page of them (``limit``, ``offset``; ``X-Total-Count``: all)."""
    statuses = await asyncio.to_thread(service.evaluate_slos, time.time())
    return [s.to_dict() for s in page.take(statuses, response)]


@router.get("/slos/{name}/history")
async def slo_history(
    service: ServiceDep,
    kept: HistoryKeptDep,
    name: Annotated[str, Path(description="SLO name")],
    fleet: Annotated[
        str | None, Query(description="fleet name; the SLO's only one if omitted")
    ] = None,
    start: Annotated[UnixTime | None, Query(description="Unix seconds; default end - 24 h")] = None,
    end: Annotated[UnixTime | None, Query(description="Unix seconds; default now")] = None,
    step: Annotated[Step | None, Query(description="seconds between points")] = None,
    window: Annotated[
        Seconds | None, Query(description="attainment window, seconds; at most the history kept")
    ] = None,
) -> dict[str, Any]:
    """Attainment and burn rate over ``window`` (default ``step``) and budget left, every
    ``step`` (default: 200 points, at most ``MAX_POINTS``), oldest first."""
    end_ts = time.time() if end is None else end
    start_ts = end_ts - 86400.0 if start is None else start
    if end_ts <= start_ts:
        raise HTTPException(422, "end must be after start")
    step_s = step or max(60.0, (end_ts - start_ts) / 200)
    if (end_ts - start_ts) / step_s > MAX_POINTS:
        raise HTTPException(422, f"more than {MAX_POINTS:,} points: use a larger step")
    if window is not None and window > kept:
        raise HTTPException(
            422,
            f"window {window:g} s is longer than the {kept:g} s of history kept "
            "(storage.retention_days)",
        )
    tracker = service.evaluator.tracker
    labels_of = service.evaluator.target_labels()
    specs = [s for s in tracker.specs if s.name == name]
    if not specs:
        raise HTTPException(404, f"unknown SLO {name!r}")
    found = [
        (spec, key, members)
        for spec in specs
        for key, members in tracker.fleets(spec, service.store.streams(), labels_of).items()
        if fleet is None or key.name == fleet
    ]
    if not found:
        raise HTTPException(404, f"SLO {name!r} selects no fleet {fleet or ''}".rstrip())
    if len(found) > 1:
        names = ", ".join(k.name for _, k, _ in found)
        raise HTTPException(422, f"SLO {name!r} covers several fleets ({names}): give ?fleet=")
    spec, key, members = found[0]
    closed = end_ts - 2.0 * service.settings.scrape.interval
    points = await asyncio.to_thread(
        tracker.series,
        spec,
        key,
        members,
        start=start_ts,
        end=end_ts,
        step=step_s,
        window_s=window or step_s,
        closed_until=closed,
    )
    return {
        "slo": spec.name,
        "fleet": key.name,
        "model_name": key.model_name,
        "target": spec.target,
        "period_s": spec.period_s,
        "objectives": spec.bounds(),
        "points": points,
    }
