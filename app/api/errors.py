"""A 422 answer that can always be written, whatever the client sent.

Python's JSON parser, which FastAPI uses, accepts the non-standard tokens ``NaN``,
``Infinity`` and ``-Infinity`` (and ``1e999`` overflows to infinity), and a validation
error echoes the offending ``input``. FastAPI's default handler then fails to write its
422 — JSON has no NaN — and the client gets a 500. This handler writes a non-finite
number as its name (``"NaN"``, ``"Infinity"``, ``"-Infinity"``).
"""

from __future__ import annotations

import math
from typing import Any

from fastapi import FastAPI
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse

__all__ = ["document_message_details", "validation_error"]


async def validation_error(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's 422 body (``{"detail": [errors]}``), with non-finite numbers as strings."""
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    return JSONResponse({"detail": _finite(jsonable_encoder(errors))}, status_code=422)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, list):
        return [_finite(v) for v in value]
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    return value


def document_message_details(app: FastAPI) -> None:
    """Say in the OpenAPI schema what a 422 really carries.

    FastAPI documents every 422 as a validation error, ``{"detail": [errors]}``; a route
    that refuses a request for a reason of its own (an unknown time range, a window past
    the history kept) answers ``{"detail": "message"}``. Both are documented, so a client
    generated from the schema, and the schema fuzzing, accept either.
    """
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            props = (
                schema.get("components", {})
                .get("schemas", {})
                .get("HTTPValidationError", {})
                .get("properties", {})
            )
            if "detail" in props:
                props["detail"] = {
                    "title": "Detail",
                    "anyOf": [props["detail"], {"type": "string"}],
                }
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
