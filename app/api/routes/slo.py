"""``GET /api/v1/slos``: SLO attainment, burn rates and error budgets per fleet."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query, Response
from pydantic import Field

from app.api.deps import (
    EvaluateSlosDep,
    ScrapeConfigDep,
    StoreDep,
    TargetLabelsDep,
    TrackerDep,
)
from app.api.params import HistoryKeptDep, PageDep, Seconds, Step, UnixTime
from app.api.schemas import Answer, SloCountsPublic

router = APIRouter(tags=["slos"])

MAX_POINTS = 1000


class WindowSpanPublic(Answer):
    window_s: float = Field(description="seconds of the latest window")


class SloLatestPublic(SloCountsPublic, WindowSpanPublic):
    """The counts of the latest window (``window.length``), its length first."""


class BudgetPublic(Answer):
    """The error budget over the SLO's period, or the part of it that has data."""

    remaining: float | None = Field(
        description="1 at the start, 0 spent, < 0 overspent; null while early or not judged"
    )
    objective: str | None = Field(description="the objective with the least left")
    per_objective: dict[str, float | None]
    covered_s: float = Field(description="replica-seconds of data it rests on")
    span_s: float = Field(description="seconds the data spans (its longest-covered replica's)")
    events: float = Field(description="the fewest events of an objective that has any")
    min_events: float = Field(description="events needed before the budget is judged")
    early: bool = Field(description="the data spans under a tenth of the period")
    burn_rate: float | None = Field(description="the burn rate of the period's data so far")
    projected_spent_in_s: float | None = Field(
        description="early: seconds until the period's budget is spent at that rate (0: spent)"
    )
    projected_left_at_end: float | None = Field(
        description="early: the share left at the period's end at that rate"
    )
    text: str = Field(description="the budget in words, as the UI and the alerts give it")
    from_: float = Field(alias="from", description="start of the data it covers, Unix seconds")


class SloStatusPublic(Answer):
    """One SLO on one fleet now: burn rates per window, the counts behind them, the latest
    window overall and per replica, the budget left."""

    slo: str
    fleet: str
    model_name: str
    labels: dict[str, str]
    target: float = Field(description="share of good events promised")
    period_s: float
    objectives: dict[str, float] = Field(description="latency bounds, seconds")
    replicas: list[str]
    end: float
    burn_rates: dict[str, float | None] = Field(description="per window (5m … 1d)")
    burn_objectives: dict[str, str | None] = Field(
        description="per window, the objective burning fastest"
    )
    latest: SloLatestPublic
    windows: dict[str, SloCountsPublic]
    budget: BudgetPublic
    per_replica: dict[str, SloCountsPublic]


class SloPointPublic(Answer):
    end: float
    attainment: dict[str, float | None]
    burn_rate: float | None
    objective: str | None
    error_share: float | None
    abort_share: float | None
    requests: float | None = Field(description="finished requests in the window")
    budget_remaining: float | None
    budget_burn_rate: float | None = Field(description="the period's data so far")
    budget_from: float


class SloHistoryPublic(Answer):
    """One SLO on one fleet over time, oldest point first."""

    slo: str
    fleet: str
    model_name: str
    target: float
    period_s: float
    objectives: dict[str, float]
    points: list[SloPointPublic]


@router.get("/slos", response_model=list[SloStatusPublic])
async def list_slos(
    evaluate_slos: EvaluateSlosDep, page: PageDep, response: Response
) -> list[dict[str, Any]]:
    """Every SLO on every fleet it selects, now: objectives, target, period, burn rates per
    window (5m … 1d), the counts behind them (attainment per objective, interpolated
    flags, error and abort shares), the latest window per replica, and the budget left;
    one page of them (``limit``, ``offset``; ``X-Total-Count``: all)."""
    statuses = await asyncio.to_thread(evaluate_slos, time.time())
    return [s.to_dict() for s in page.take(statuses, response)]


@router.get("/slos/{name}/history", response_model=SloHistoryPublic)
async def slo_history(
    tracker: TrackerDep,
    labels_of: TargetLabelsDep,
    store: StoreDep,
    scrape: ScrapeConfigDep,
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
    specs = [s for s in tracker.specs if s.name == name]
    if not specs:
        raise HTTPException(404, f"unknown SLO {name!r}")
    found = [
        (spec, key, members)
        for spec in specs
        for key, members in tracker.fleets(spec, store.streams(), labels_of).items()
        if fleet is None or key.name == fleet
    ]
    if not found:
        raise HTTPException(404, f"SLO {name!r} selects no fleet {fleet or ''}".rstrip())
    if len(found) > 1:
        names = ", ".join(k.name for _, k, _ in found)
        raise HTTPException(422, f"SLO {name!r} covers several fleets ({names}): give ?fleet=")
    spec, key, members = found[0]
    closed = end_ts - 2.0 * scrape.interval
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
