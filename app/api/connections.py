"""The HTTP server's connections, bounded: how many, and how long a request head may take.

A client that opens a connection and sends part of a request head, then nothing (a
"slow loris"), holds a file descriptor for as long as it likes: uvicorn times out an idle
keep-alive connection, but not one whose head is still arriving. A thousand of them
exhaust the process's descriptors, and then every ``accept`` and every scrape fails
with ``EMFILE``. Two bounds, as a reverse proxy in front would set them
(``client_header_timeout``, ``worker_connections``):

* **Head timeout** (``server.request_head_timeout``): a connection must deliver a whole
  request head within that many seconds of connecting, or of its previous answer on a
  kept-alive connection; else it is closed.
* **Connection cap** (``server.max_connections``, and never more than the descriptors
  left once the scrapes' are kept aside: the soft ``RLIMIT_NOFILE`` less a fixed margin,
  the listen backlog and one per scraped target). Past it, the oldest connection still
  waiting for its head is closed to make room (an idle keep-alive one counts as
  waiting); when every connection is serving a request, the new one is closed instead.

Edge cases: a connection that has sent its head is never dropped for room, however long
its request runs; a pipelined second request re-arms the head timer only once the first
is answered; the counters are kept for ``/metrics``
(``phasewatch_http_connections_dropped_total{reason}``).
"""

from __future__ import annotations

import asyncio
import logging
import resource
from collections.abc import Callable, Iterator
from typing import Any

import h11
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry
from uvicorn.protocols.http.h11_impl import H11Protocol

from app.logs import Throttled

__all__ = ["BACKLOG", "FD_MARGIN", "ConnectionGuard", "descriptor_limit", "raise_descriptor_limit"]

log = logging.getLogger(__name__)

# Descriptors kept aside besides one per target: the store and its journal, the log,
# the listening socket, file_sd watches, threads' pipes.
FD_MARGIN = 64
# The listen backlog, which is also how many connections asyncio accepts in one go before
# any of them is seen by the guard: kept aside too, so that an accept never finds the
# descriptors gone (uvicorn's default of 2,048 would exceed a 1,024 limit by itself).
BACKLOG = 128


def descriptor_limit() -> int:
    """The process's soft limit on open file descriptors."""
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def raise_descriptor_limit() -> int:
    """Raise the soft descriptor limit to the hard one (as Go programs such as Prometheus
    do at start); return the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):  # a hard limit of "unlimited" the kernel caps lower
            return soft
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


class ConnectionGuard:
    """What every connection of one server shares: the bounds and who waits for a head.

    ``scraped``: how many targets are scraped now (a descriptor each is kept for them).
    """

    def __init__(
        self,
        *,
        max_connections: int,
        head_timeout: float,
        scraped: Callable[[], int] = lambda: 0,
    ) -> None:
        self.max_connections = max_connections
        self.head_timeout = head_timeout
        self.scraped = scraped
        self.open = 0
        self.dropped = {"head_timeout": 0, "cap": 0}
        # Connections still waiting for a request head, oldest first (dicts keep order).
        self._waiting: dict[_Guarded, asyncio.TimerHandle] = {}
        self._warn = Throttled(log)

    def cap(self) -> int:
        """How many connections may be open now (at least one)."""
        spare = descriptor_limit() - FD_MARGIN - BACKLOG - self.scraped()
        return max(1, min(self.max_connections, spare))

    def protocol(self) -> type[H11Protocol]:
        """uvicorn's h11 protocol bound to this guard (``uvicorn.run(http=...)``)."""
        guard = self

        class Guarded(_Guarded):
            _guard = guard

        return Guarded

    def collector(self) -> Collector:
        """The open connections and those dropped, for a registry (``/metrics``)."""
        return _GuardCollector(self)

    def register(self, registry: CollectorRegistry) -> None:
        registry.register(self.collector())

    # What a connection tells its guard.
    def opened(self, conn: _Guarded) -> bool:
        """Count ``conn`` in, making room if needed; False when it was refused."""
        self.open += 1
        if self.open > self.cap():
            oldest = next(iter(self._waiting), None)
            if oldest is None:
                self._drop(conn, "cap")
                return False
            self._drop(oldest, "cap")
        self.waiting(conn)
        return True

    def waiting(self, conn: _Guarded) -> None:
        """``conn`` waits for a request head from now on."""
        self.done_waiting(conn)
        loop = asyncio.get_running_loop()
        self._waiting[conn] = loop.call_later(self.head_timeout, self._timed_out, conn)

    def done_waiting(self, conn: _Guarded) -> None:
        timer = self._waiting.pop(conn, None)
        if timer is not None:
            timer.cancel()

    def closed(self, conn: _Guarded) -> None:
        self.done_waiting(conn)
        self.open -= 1

    def _timed_out(self, conn: _Guarded) -> None:
        if self._waiting.pop(conn, None) is not None:
            self._drop(conn, "head_timeout")

    def _drop(self, conn: _Guarded, reason: str) -> None:
        self.done_waiting(conn)
        self.dropped[reason] += 1
        if reason == "cap":
            self._warn.warning(
                "http: connection closed to stay within %d open connections "
                "(server.max_connections, and the file descriptors kept for scrapes)",
                self.cap(),
            )
        conn.transport.abort()


class _Guarded(H11Protocol):
    """uvicorn's h11 protocol, telling its guard when a head is awaited and received."""

    _guard: ConnectionGuard

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._guard.opened(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._guard.closed(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._guard.done_waiting(self)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._guard.waiting(self)


class _GuardCollector(Collector):
    def __init__(self, guard: ConnectionGuard) -> None:
        self.guard = guard

    def collect(self) -> Iterator[Any]:
        gauge = GaugeMetricFamily(
            "phasewatch_http_connections", "Connections open to the API and UI now."
        )
        gauge.add_metric([], self.guard.open)
        yield gauge
        dropped = CounterMetricFamily(
            "phasewatch_http_connections_dropped",
            "Connections closed by phasewatch: no whole request head within "
            "server.request_head_timeout (head_timeout), or to stay within the "
            "connection cap (cap).",
            labels=["reason"],
        )
        for reason, count in sorted(self.guard.dropped.items()):
            dropped.add_metric([reason], count)
        yield dropped
