"""``POST /-/reload``: read the configuration again, as Prometheus' ``/-/reload`` does.

Needs ``Authorization: Bearer <api_token>`` (checked before anything is read; no token
configured: 403). 200 when the configuration was applied; 422 when it was refused — it
does not load, its rule file does not, or it changes what only a restart can change
(``app.reload``) — and the running one is kept. Same as sending the process ``SIGHUP``.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import Field

from app.api.auth import TokenFirstRoute, WriteAuthDep
from app.api.schemas import Answer
from app.reload import ConfigReloader

router = APIRouter(tags=["health"], route_class=TokenFirstRoute)


def get_reloader(request: Request) -> ConfigReloader:
    reloader: ConfigReloader = request.app.state.reloader
    return reloader


ReloaderDep = Annotated[ConfigReloader, Depends(get_reloader)]


class ReloadPublic(Answer):
    """What a reload did."""

    status: str = Field(description="success, or refused (the running configuration kept)")
    message: str
    changed: list[str] = Field(description="top-level sections that changed")


@router.post(
    "/-/reload",
    response_model=ReloadPublic,
    responses={422: {"model": ReloadPublic, "description": "refused; nothing changed"}},
)
async def reload_config(_: WriteAuthDep, reloader: ReloaderDep) -> JSONResponse:
    """Read the configuration file again and apply it, or refuse it whole."""
    done = await reloader.reload("api")
    body = ReloadPublic(
        status="success" if done.ok else "refused",
        message=done.message,
        changed=list(done.changed),
    )
    return JSONResponse(body.model_dump(), status_code=200 if done.ok else 422)
