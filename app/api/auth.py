"""Bearer-token guard for the write endpoints (silences).

The token comes from ``api_token`` in the configuration (``PHASEWATCH_API_TOKEN``). With
no token configured the write endpoints are off: they answer 403 whatever is sent. A
missing or wrong token answers 401 with ``WWW-Authenticate: Bearer``. The comparison is
constant-time; the token is never logged.

FastAPI reads and validates a request body *before* it solves dependencies, so
``WriteAuthDep`` alone would have the service buffer and parse whatever an anonymous
client sends, and answer 422 before 401. A route of class :class:`TokenFirstRoute` that
declares ``WriteAuthDep`` checks the token first: without it the body is never read.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request, Response
from fastapi.routing import APIRoute

from app.api.deps import SettingsDep, get_service, get_settings


def require_token(request: Request, settings: SettingsDep) -> None:
    token = settings.api_token
    if not token:
        raise HTTPException(
            403, "write endpoints are off: configure api_token (PHASEWATCH_API_TOKEN)"
        )
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        given.strip().encode(), token.encode()
    ):
        raise HTTPException(
            401, "a valid bearer token is required", headers={"WWW-Authenticate": "Bearer"}
        )


WriteAuthDep = Annotated[None, Depends(require_token)]


class TokenFirstRoute(APIRoute):
    """An APIRoute that runs ``require_token`` before the body is read, when it needs it."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if not any(d.call is require_token for d in self.dependant.dependencies):
            return handler

        async def token_first(request: Request) -> Response:
            require_token(request, get_settings(get_service(request)))
            return await handler(request)

        return token_first
