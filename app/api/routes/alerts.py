"""``/api/v1/alerts``: active alerts, their history, rule health and the outbox."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from app.api.deps import ServiceDep
from app.api.params import DEFAULT_LIMIT, Limit, PageDep, UnixTime

router = APIRouter(tags=["alerts"])

_ORDER = {"firing": 0, "pending": 1, "inactive": 2}


@router.get("/alerts")
def list_alerts(
    service: ServiceDep,
    page: PageDep,
    response: Response,
    state: Annotated[str | None, Query(pattern="^(pending|firing)$")] = None,
    include_resolved: Annotated[
        bool, Query(description="also resolved alerts still kept for receivers")
    ] = False,
) -> list[dict[str, Any]]:
    """Pending and firing alerts (firing first), with the silence that mutes each, if any;
    one page of them (``limit``, ``offset``; ``X-Total-Count``: all)."""
    engine = service.alerting.engine
    silenced = engine.silenced_lookup(time.time())
    out = []
    for alert in engine.alerts.values():
        if alert.state == "inactive" and not include_resolved:
            continue
        if state is not None and alert.state != state:
            continue
        item = alert.public()
        item["silencedBy"] = silenced(alert.labels) if alert.state == "firing" else None
        out.append(item)
    out.sort(key=lambda a: (_ORDER[a["state"]], a["activeAt"], a["alertname"]))
    return page.take(out, response)


@router.get("/alerts/history")
def alert_history(
    service: ServiceDep,
    start: Annotated[UnixTime | None, Query(description="Unix seconds; default end - 24 h")] = None,
    end: Annotated[UnixTime | None, Query(description="Unix seconds; default now")] = None,
    alertname: str | None = None,
    target: str | None = None,
    state: Annotated[str | None, Query(pattern="^(pending|firing|resolved)$")] = None,
    limit: Limit = DEFAULT_LIMIT,
) -> list[dict[str, Any]]:
    """State transitions (pending, firing, resolved), newest first."""
    end_ts = time.time() if end is None else end
    start_ts = end_ts - 86400.0 if start is None else start
    return service.alerting.engine.repo.history(
        start=start_ts, end=end_ts, alertname=alertname, target=target, state=state, limit=limit
    )


@router.get("/alerts/rules")
def alert_rules(service: ServiceDep) -> dict[str, Any]:
    """The loaded rules and how each fared at the last evaluation (``cannot_evaluate``
    lists the fields that were missing — never reported as ok)."""
    engine = service.alerting.engine
    return {"lastEvaluation": engine.last_evaluation, "rules": engine.rule_health()}


@router.get("/alerts/outbox")
def outbox_status(service: ServiceDep) -> dict[str, Any]:
    """Notification rows per receiver and outcome (receivers by id; URLs are secret)."""
    engine = service.alerting.engine
    return {
        "receivers": [{"id": r.id, "kind": r.kind} for r in engine.receivers],
        "rows": service.alerting.outbox.counts(),
    }
