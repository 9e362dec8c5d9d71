"""``/api/v1/silences``: mute notifications of matching alerts until a time.

Writes need ``Authorization: Bearer <api_token>``; reads do not. The token is checked
before the body is read (``TokenFirstRoute``), and the body is capped at ``MAX_BODY``
bytes (``app.api.limits``), so an unauthenticated client gets 401 however large or
malformed its body.

Limits, all in the OpenAPI schema, answered 422: at most 64 matchers, names of 128 and
values of 1024 characters, ``createdBy`` 256 and ``comment`` 4096 characters; times are
finite Unix seconds or RFC 3339 with an offset, ``startsAt`` no more than a day back,
``endsAt`` after now and at most ten years ahead. Two are settings, as in Alertmanager:
a silence of more than ``alerts.max_silence_bytes`` (matchers, ``createdBy`` and comment)
is answered 422; one more silence when ``alerts.max_silences`` have not ended (active,
pending; expired ones do not count) is answered 400, "exceeded maximum number of
silences", as Alertmanager answers. The list is paged (``limit``, ``offset``,
``X-Total-Count``).
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query, Response
from pydantic import BaseModel, Field

from app.alerts.rules import parse_duration
from app.alerts.silences import (
    MAX_MATCHERS,
    MAX_NAME_CHARS,
    MAX_VALUE_CHARS,
    new_silence,
    parse_matcher,
)
from app.api.auth import TokenFirstRoute, WriteAuthDep
from app.api.deps import AlertsConfigDep, SilencesDep
from app.api.params import PageDep
from app.api.schemas import Answer

router = APIRouter(tags=["silences"], route_class=TokenFirstRoute)

# The largest silence the field limits allow is about 80 kB of plain JSON.
MAX_BODY = 128 * 1024


class MatcherIn(BaseModel):
    """One matcher in Alertmanager's shape."""

    name: str = Field(max_length=MAX_NAME_CHARS, description="a label name")
    value: str = Field(
        max_length=MAX_VALUE_CHARS,
        description="with isRegex an RE2 pattern (as in Alertmanager), anchored at both ends",
    )
    isRegex: bool = False
    isEqual: bool = True


MatcherText = Annotated[
    str,
    Field(
        max_length=MAX_NAME_CHARS + 2 * MAX_VALUE_CHARS + 16,
        description='name="value" (or !=, =~, !~)',
    ),
]
Time = Annotated[float, Field(allow_inf_nan=False)] | Annotated[str, Field(max_length=40)]


class SilenceCreate(BaseModel):
    """Alertmanager's silence shape; times as Unix seconds or RFC 3339."""

    matchers: list[MatcherIn | MatcherText] = Field(
        max_length=MAX_MATCHERS,
        description='[{"name": "alertname", "value": "X", "isRegex": false, "isEqual": true}] '
        'or ["alertname=\\"X\\""]',
    )
    startsAt: Time | None = Field(None, description="default now; at most a day back")
    endsAt: Time | None = Field(
        None, description="give endsAt or duration; after now, at most ten years ahead"
    )
    duration: str | None = Field(None, max_length=32, description='e.g. "2h", from startsAt')
    createdBy: str = Field("api", max_length=256)
    comment: str = Field("", max_length=4096)


class MatcherPublic(Answer):
    name: str
    value: str
    isRegex: bool
    isEqual: bool


class SilenceStatusPublic(Answer):
    state: Literal["pending", "active", "expired", "invalid"] = Field(
        description="invalid: a stored silence that cannot apply (see error); it silences "
        "nothing until it ends or is deleted"
    )


class SilencePublic(Answer):
    """A silence in Alertmanager's shape, with why it is invalid, if it is."""

    id: str
    matchers: list[MatcherPublic]
    startsAt: float
    endsAt: float
    createdBy: str
    comment: str
    status: SilenceStatusPublic
    error: str | None = Field(description="why a stored silence cannot apply; null if it can")


class SilenceIdPublic(Answer):
    silenceID: str


class SilenceExpiredPublic(Answer):
    silenceID: str
    status: Literal["expired"]


def _time(value: float | str, name: str) -> float:
    if isinstance(value, int | float):
        return float(value)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise HTTPException(422, f"{name}: not Unix seconds or an RFC 3339 time") from None
    if parsed.tzinfo is None:
        raise HTTPException(422, f"{name}: an RFC 3339 time needs an offset (Z or +hh:mm)")
    try:
        return parsed.timestamp()
    except (OverflowError, ValueError, OSError):
        raise HTTPException(422, f"{name}: time out of range") from None


@router.get("/silences", response_model=list[SilencePublic])
def list_silences(
    silences: SilencesDep,
    page: PageDep,
    response: Response,
    include_expired: Annotated[bool, Query()] = False,
) -> list[dict[str, Any]]:
    """Active, pending and invalid silences (newest first); expired ones too when asked;
    one page of them (``limit``, ``offset``; ``X-Total-Count``: all).

    An invalid silence (a stored regex RE2 refuses) silences nothing; its ``error`` says
    why, and DELETE removes it.
    """
    now = time.time()
    listed = silences.list(since=None if include_expired else now)
    return [s.to_dict(now) for s in page.take(listed, response)]


@router.post(
    "/silences",
    response_model=SilenceIdPublic,
    responses={400: {"description": "exceeded maximum number of silences"}},
)
def create_silence(
    body: SilenceCreate, silences: SilencesDep, cfg: AlertsConfigDep, _: WriteAuthDep
) -> dict[str, str]:
    """Create a silence; returns ``{"silenceID": …}`` as Alertmanager does. 400 when
    ``alerts.max_silences`` silences have not ended yet (expire one first)."""
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
    try:
        silence = new_silence(
            [parse_matcher(m if isinstance(m, str) else m.model_dump()) for m in body.matchers],
            starts_at=starts,
            ends_at=ends,
            created_by=body.createdBy,
            comment=body.comment,
            now=now,
            max_bytes=cfg.max_silence_bytes,
        )
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None
    if not silences.add(silence, now=now, max_kept=cfg.max_silences):
        raise HTTPException(
            400,
            f"exceeded maximum number of silences: {cfg.max_silences} not yet ended "
            "(alerts.max_silences); expire one first",
        )
    return {"silenceID": silence.id}


@router.delete("/silences/{silence_id}", response_model=SilenceExpiredPublic)
def delete_silence(silence_id: str, silences: SilencesDep, _: WriteAuthDep) -> dict[str, str]:
    """Expire a silence now (it stays listed with ``include_expired``)."""
    if not silences.expire(silence_id, time.time()):
        raise HTTPException(404, f"no active or pending silence {silence_id!r}")
    return {"silenceID": silence_id, "status": "expired"}
