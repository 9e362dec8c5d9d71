"""``/api/v1/silences``: mute notifications of matching alerts until a time.

Writes need ``Authorization: Bearer <api_token>``; reads do not.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query
from pydantic import BaseModel, Field

from app.alerts.rules import parse_duration
from app.alerts.silences import new_silence, parse_matcher
from app.api.auth import WriteAuthDep
from app.api.deps import ServiceDep

router = APIRouter(tags=["silences"])


class SilenceCreate(BaseModel):
    """Alertmanager's silence shape; times as Unix seconds or RFC 3339."""

    matchers: list[dict[str, Any] | str] = Field(
        description='[{"name": "alertname", "value": "X", "isRegex": false, "isEqual": true}] '
        'or ["alertname=\\"X\\""]'
    )
    startsAt: float | str | None = Field(None, description="default now")
    endsAt: float | str | None = Field(None, description="give endsAt or duration")
    duration: str | None = Field(None, description='e.g. "2h", from startsAt')
    createdBy: str = "api"
    comment: str = ""


def _time(value: float | str, name: str) -> float:
    if isinstance(value, int | float):
        return float(value)
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise HTTPException(422, f"{name}: not Unix seconds or an RFC 3339 time") from None


@router.get("/silences")
def list_silences(
    service: ServiceDep,
    include_expired: Annotated[bool, Query()] = False,
) -> list[dict[str, Any]]:
    """Active and pending silences (newest first); expired ones too when asked."""
    now = time.time()
    repo = service.alerting.engine.silences
    return [s.to_dict(now) for s in repo.list(since=None if include_expired else now)]


@router.post("/silences")
def create_silence(body: SilenceCreate, service: ServiceDep, _: WriteAuthDep) -> dict[str, str]:
    """Create a silence; returns ``{"silenceID": …}`` as Alertmanager does."""
    now = time.time()
    starts = now if body.startsAt is None else _time(body.startsAt, "startsAt")
    if body.endsAt is not None and body.duration is not None:
        raise HTTPException(422, "give endsAt or duration, not both")
    if body.endsAt is not None:
        ends = _time(body.endsAt, "endsAt")
    elif body.duration is not None:
        try:
            ends = starts + parse_duration(body.duration)
        except ValueError as exc:
            raise HTTPException(422, f"duration: {exc}") from None
    else:
        raise HTTPException(422, "give endsAt or duration")
    if ends <= now:
        raise HTTPException(422, "endsAt is in the past")
    try:
        silence = new_silence(
            [parse_matcher(m) for m in body.matchers],
            starts_at=starts,
            ends_at=ends,
            created_by=body.createdBy,
            comment=body.comment,
        )
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None
    service.alerting.engine.silences.add(silence)
    return {"silenceID": silence.id}


@router.delete("/silences/{silence_id}")
def delete_silence(silence_id: str, service: ServiceDep, _: WriteAuthDep) -> dict[str, str]:
    """Expire a silence now (it stays listed with ``include_expired``)."""
    if not service.alerting.engine.silences.expire(silence_id, time.time()):
        raise HTTPException(404, f"no active or pending silence {silence_id!r}")
    return {"silenceID": silence_id, "status": "expired"}
