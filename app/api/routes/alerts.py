"""``/api/v1/alerts``: active alerts, their history, rule health and the outbox."""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Response
from pydantic import Field

from app.api.deps import AlertEngineDep, AlertHistoryDep, OutboxDep
from app.api.params import DEFAULT_LIMIT, Limit, PageDep, UnixTime
from app.api.schemas import Answer, Number

router = APIRouter(tags=["alerts"])

_ORDER = {"firing": 0, "pending": 1, "inactive": 2}

AlertValue = Number | bool | str | list[Any] | None
"""What a rule's ``value`` expression gave (a number, a flag, a name…), null for none."""


class AlertPublic(Answer):
    """One alert (a rule on one label set): Prometheus' ``/api/v1/alerts`` names plus the
    timestamps of its episode; ``inactive`` ones are resolved, kept for receivers."""

    fingerprint: str
    alertname: str
    state: Literal["inactive", "pending", "firing"]
    labels: dict[str, str]
    annotations: dict[str, str]
    activeAt: float
    firedAt: float | None
    resolvedAt: float | None
    keepFiringSince: float | None
    lastEvaluation: float
    value: AlertValue
    silencedBy: str | None = Field(description="the active silence muting a firing alert")


class AlertTransitionPublic(Answer):
    """One state change of an alert."""

    alertname: str
    state: Literal["pending", "firing", "resolved"]
    at: float
    previous: str | None = Field(description="the state it left")
    fingerprint: str
    labels: dict[str, str]
    annotations: dict[str, str]


class RuleInstancePublic(Answer):
    """How a rule fared on one instance (a target, a stream, an SLO on a fleet)."""

    labels: dict[str, str]
    holds: bool
    health: Literal["ok", "cannot_evaluate"]
    missing: list[str] = Field(description="fields the instance lacked")
    problems: list[str]


class RulePublic(Answer):
    """One loaded rule and its instances' last results."""

    name: str
    expr: str
    for_: float = Field(alias="for", description="seconds pending before firing")
    keep_firing_for: float
    severity: str
    scope: str = Field(description="what it is evaluated on: target, stream or slo")
    labels: dict[str, str]
    health: Literal["ok", "cannot_evaluate", "unknown"]
    instances: list[RuleInstancePublic]


class RulesPublic(Answer):
    lastEvaluation: float | None
    rules: list[RulePublic]


class ReceiverPublic(Answer):
    """A receiver by id (its URL is a secret)."""

    id: str
    kind: str


class OutboxPublic(Answer):
    receivers: list[ReceiverPublic]
    rows: dict[str, dict[str, int]] = Field(
        description="rows per receiver id and outcome (pending, sent, rejected, superseded, "
        "expired)"
    )


@router.get("/alerts", response_model=list[AlertPublic])
def list_alerts(
    engine: AlertEngineDep,
    page: PageDep,
    response: Response,
    state: Annotated[str | None, Query(pattern="^(pending|firing)$")] = None,
    include_resolved: Annotated[
        bool, Query(description="also resolved alerts still kept for receivers")
    ] = False,
) -> list[dict[str, Any]]:
    """Pending and firing alerts (firing first), with the silence that mutes each, if any;
    one page of them (``limit``, ``offset``; ``X-Total-Count``: all)."""
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


@router.get("/alerts/history", response_model=list[AlertTransitionPublic])
def alert_history(
    history: AlertHistoryDep,
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
    return history.history(
        start=start_ts, end=end_ts, alertname=alertname, target=target, state=state, limit=limit
    )


@router.get("/alerts/rules", response_model=RulesPublic)
def alert_rules(engine: AlertEngineDep) -> dict[str, Any]:
    """The loaded rules and how each fared at the last evaluation (``cannot_evaluate``
    lists the fields that were missing — never reported as ok)."""
    return {"lastEvaluation": engine.last_evaluation, "rules": engine.rule_health()}


@router.get("/alerts/outbox", response_model=OutboxPublic)
def outbox_status(engine: AlertEngineDep, outbox: OutboxDep) -> dict[str, Any]:
    """Notification rows per receiver and outcome (receivers by id; URLs are secret)."""
    return {
        "receivers": [{"id": r.id, "kind": r.kind} for r in engine.receivers],
        "rows": outbox.counts(),
    }
