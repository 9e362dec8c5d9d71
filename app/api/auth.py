"""Bearer-token guard for the write endpoints (silences).

The token comes from ``api_token`` in the configuration (``PHASEWATCH_API_TOKEN``). With
no token configured the write endpoints are off: they answer 403 whatever is sent. A
missing or wrong token answers 401 with ``WWW-Authenticate: Bearer``. The comparison is
constant-time; the token is never logged.
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, Request

from app.api.deps import ServiceDep


def require_token(request: Request, service: ServiceDep) -> None:
    token = service.settings.api_token
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
