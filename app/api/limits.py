"""Request body caps: a body over its path's cap is answered 413 and never buffered.

One ASGI middleware for the whole app (API and UI), with a cap per path prefix. The cap
is enforced where the app *reads* the body, not when the request arrives, so a route
that answers first — a write route's token check (``auth.TokenFirstRoute``) — answers 401
without reading a byte. When the app reads: a declared ``Content-Length`` over the cap
fails before anything is read; a chunked body is counted as it streams and fails as soon
as the count passes the cap, so at most the cap plus one chunk is held.

The app sees the failure as :class:`BodyTooLarge`, an ``HTTPException(413)`` that FastAPI
answers itself. Whatever another app answers once it has tripped (the WSGI UI turns the
exception into a 500) is replaced by the 413, and so is an exception that escapes.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["DEFAULT_MAX_BODY", "BodyLimit", "BodyTooLarge"]

DEFAULT_MAX_BODY = 1024 * 1024  # 1 MiB: any write route or UI callback; no upload route exists


class BodyTooLarge(HTTPException):
    def __init__(self, cap: int) -> None:
        super().__init__(413, f"request body larger than {cap} bytes")


class BodyLimit:
    """Cap request bodies at ``default`` bytes, or ``caps[prefix]`` under a path prefix."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        default: int = DEFAULT_MAX_BODY,
        caps: Mapping[str, int] | None = None,
    ) -> None:
        self.app = app
        self.default = default
        # Longest prefix first, so /api/v1/x/y can override /api/v1/x.
        self.caps = sorted((caps or {}).items(), key=lambda kv: -len(kv[0]))

    def cap(self, path: str) -> int:
        for prefix, cap in self.caps:
            if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
                return cap
        return self.default

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cap = self.cap(scope["path"])
        declared = _content_length(scope)
        seen = 0
        tripped: BodyTooLarge | None = None
        started = replaced = False

        async def capped_receive() -> Message:
            nonlocal seen, tripped
            if tripped is None and declared is not None and declared > cap:
                tripped = BodyTooLarge(cap)
            if tripped is not None:
                raise tripped
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > cap:
                    tripped = BodyTooLarge(cap)
                    raise tripped
            return message

        async def checked_send(message: Message) -> None:
            nonlocal started, replaced
            if replaced:
                return
            if message["type"] == "http.response.start":
                started = True
                if tripped is not None and message["status"] != 413:
                    replaced = True
                    await _too_large(tripped, scope, receive, send)
                    return
            await send(message)

        try:
            await self.app(scope, capped_receive, checked_send)
        except Exception:
            if tripped is None or started:
                raise
            await _too_large(tripped, scope, receive, send)


async def _too_large(exc: BodyTooLarge, scope: Scope, receive: Receive, send: Send) -> None:
    response = JSONResponse({"detail": exc.detail}, status_code=413)
    await response(scope, receive, send)


def _content_length(scope: Scope) -> int | None:
    for key, value in scope.get("headers", ()):
        if key == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
