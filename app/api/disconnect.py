"""Work of a request that stops when its client goes away.

A long read (a day of windows over many streams) runs in a worker thread, off the event
loop; the route polls the connection meanwhile and, once the client has gone, sets the
worker's ``cancel`` event. The worker checks it between chunks (streams, runs of windows)
and stops with :class:`app.read.windows.Cancelled`; the route then answers 499 — Nginx'
"client closed request", which nobody reads — so no thread keeps working for nobody.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Protocol, TypeVar

from fastapi import HTTPException

from app.read.windows import Cancelled

T = TypeVar("T")

POLL_S = 0.1
CLIENT_CLOSED = 499


class Connection(Protocol):
    """What is asked of the request: Starlette's ``Request`` has it."""

    async def is_disconnected(self) -> bool: ...


async def run_while_connected(
    request: Connection, work: Callable[[threading.Event], T], *, poll: float = POLL_S
) -> T:
    """``work(cancel)`` in a worker thread; ``cancel`` is set when the client disconnects
    (or this coroutine is cancelled) before it ends.

    Returns what ``work`` returns, even if the client went away after it ended. Raises
    ``HTTPException(499)`` once the worker, told to stop, has stopped.
    """
    cancel = threading.Event()
    task = asyncio.ensure_future(asyncio.to_thread(work, cancel))
    try:
        while not task.done():
            await asyncio.wait({task}, timeout=poll)
            if not task.done() and await request.is_disconnected():
                cancel.set()
                break
        try:
            return await task
        except Cancelled:
            raise HTTPException(CLIENT_CLOSED, "client closed the request") from None
    finally:
        cancel.set()  # stops a worker left behind when this coroutine itself is cancelled
