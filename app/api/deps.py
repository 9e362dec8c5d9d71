"""FastAPI dependencies: the service objects built in the lifespan, reached per request."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.service import Service


def get_service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


ServiceDep = Annotated[Service, Depends(get_service)]
