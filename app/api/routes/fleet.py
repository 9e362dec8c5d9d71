"""``GET /api/v1/fleets``: replicas of one model summed, their imbalance and SLO figures."""

from __future__ import annotations

import json
import threading
import time
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query, Request, Response

from app.api.deps import ServiceDep
from app.api.disconnect import run_while_connected
from app.api.params import HistoryKeptDep, PageDep, Seconds, Step, UnixTime, json_answer
from app.diagnose import DiagnosisConfig
from app.fleet.aggregate import FleetKey
from app.fleet.slo import SloSpec
from app.fleet.specs import imbalance_thresholds, slo_specs
from app.fleet.tracker import matches
from app.fleet.view import fleet_view
from app.read.fleet import find_fleet, fleet_views, fleets
from app.read.windows import QueryError
from app.service import Service

router = APIRouter(tags=["fleets"])
_SHAPE: dict[str, Any] = {
    "description": "one object per fleet window (fields: ``FleetView.to_dict``)",
    "content": {"application/json": {"schema": {"type": "array", "items": {"type": "object"}}}},
}


def _groups(service: Service) -> dict[FleetKey, list[str]]:
    labels_of = {t.name: dict(t.labels) for t in service.settings.targets}
    return fleets(service.store.streams(), labels_of, service.settings.fleet.group_by)


def _config(service: Service) -> DiagnosisConfig:
    return service.diagnosis_config


def _slos(service: Service, key: FleetKey, members: list[str]) -> list[SloSpec]:
    """The SLOs that select any of the fleet's replicas."""
    labels_of = {t.name: dict(t.labels) for t in service.settings.targets}
    return [
        spec
        for spec in slo_specs(service.settings)
        if key.model_name not in spec.exclude_models
        and any(matches(spec.selector, key.model_name, labels_of.get(t, {})) for t in members)
    ]


@router.get("/fleets")
def list_fleets(service: ServiceDep, page: PageDep, response: Response) -> list[dict[str, Any]]:
    """Every fleet (model, and ``fleet.group_by`` labels) with its replicas and its latest
    window: summed percentiles, imbalance, diagnosis and SLO attainment; one page of
    them by name (``limit``, ``offset``; ``X-Total-Count``: all), and only its fleets
    computed."""
    end = time.time()
    length = service.settings.window.length
    out = []
    groups = sorted(_groups(service).items(), key=lambda kv: kv[0].name)
    for key, members in page.take(groups, response):
        view = fleet_view(
            service.store,
            key,
            members,
            start=end - length,
            end=end,
            config=_config(service),
            thresholds=imbalance_thresholds(service.settings.fleet.imbalance),
            diagnose_replicas=True,
        )
        out.append(
            {
                **key.to_dict(),
                "members": members,
                "latest": view.to_dict(_slos(service, key, members)),
            }
        )
    return out


@router.get("/fleets/{name:path}/windows", response_class=Response, responses={200: _SHAPE})
async def fleet_windows(
    request: Request,
    service: ServiceDep,
    kept: HistoryKeptDep,
    name: Annotated[str, Path(description="fleet name: the model_name, or model{label=value}")],
    start: Annotated[UnixTime | None, Query(description="Unix seconds; default end - 1 h")] = None,
    end: Annotated[UnixTime | None, Query(description="Unix seconds; default now")] = None,
    window: Annotated[
        Seconds | None, Query(description="window length, seconds; at most the history kept")
    ] = None,
    step: Annotated[Step | None, Query(description="step between windows, seconds")] = None,
) -> Response:
    """One object per window, oldest first: the fleet's fields (as ``/windows``), its
    diagnosis, imbalance, SLO attainment and goodput, and every replica's window with its
    own diagnosis. At most ``app.read.windows.MAX_WINDOWS`` replica windows (windows ×
    replicas) per request (422 beyond, before any work); a client that disconnects stops
    the work between replicas and windows."""
    cfg = service.settings.window
    end_ts = time.time() if end is None else end
    start_ts = end_ts - 3600.0 if start is None else start

    def work(cancel: threading.Event) -> bytes:
        try:
            key, members = find_fleet(_groups(service), name)
        except KeyError:
            raise HTTPException(404, f"unknown fleet {name!r}") from None
        views = fleet_views(
            service.store,
            key,
            members,
            start=start_ts,
            end=end_ts,
            length=window or cfg.length,
            step=step or cfg.step,
            config=_config(service),
            thresholds=imbalance_thresholds(service.settings.fleet.imbalance),
            diagnose_replicas=True,
            max_length=kept,
            cancel=cancel,
        )
        slos = _slos(service, key, members)
        out = [v.to_dict(slos) for v in views]
        return json.dumps(out, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()

    try:
        body = await run_while_connected(request, work)
    except QueryError as exc:
        raise HTTPException(422, str(exc)) from exc
    return json_answer(body)
