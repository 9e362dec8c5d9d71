"""A lean HTTP/1.1 client for scrapes: one kept-alive connection, one GET at a time.

httpx's request machinery costs about 1 ms of CPU a page (py-spy at 1,000 targets: 30 %
of the service's CPU); a scrape needs a small part of it. This client sends a request
head built once per target (:class:`Request`, built by :mod:`app.scrape.client` by
httpx's own URL and header rules) and reads the answer in an :class:`asyncio.Protocol`
(:class:`~app.scrape.http11_answer.AnswerReader`: what is read and how each edge is
named), without a task or a stream per step.

- **Connection.** One per client, kept alive between answers and not expired by time
  (a server's idle timeout closes it: its EOF is seen and the next GET reconnects).
  A GET on a reused connection that the server closes or resets before any byte of the
  answer is sent once more on a new connection (a stale kept-alive connection). A host
  name is resolved and its addresses tried in order; all failing raise
  :class:`ConnectFailed` from the one error, or from an ``ExceptionGroup`` of them, as
  anyio does, so ``refused`` vs ``connect`` is decided the same way as with httpx. TLS
  runs on asyncio's ssl support with the caller's context and the host as server name;
  a failed handshake is a :class:`ConnectFailed` too.
- **After the answer began**, a reset is a :class:`ReadError`. A non-2xx answer, a
  cut, an error or a cancellation closes the connection; the next GET makes a new one.
- **No timeout of its own**: the caller's deadline cancels the GET.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from dataclasses import dataclass

from app.scrape.http11_answer import (
    Answer,
    AnswerReader,
    BodyTruncated,
    ConnectFailed,
    DecodingError,
    ReadError,
    RemoteProtocolError,
    ServerDisconnected,
    TooLarge,
    Unsupported,
)

__all__ = [
    "Answer",
    "BodyTruncated",
    "ConnectFailed",
    "DecodingError",
    "Http11Client",
    "ReadError",
    "RemoteProtocolError",
    "Request",
    "ServerDisconnected",
    "TooLarge",
    "Unsupported",
]


@dataclass(frozen=True, slots=True)
class Request:
    """Where to connect and the request head to send (request line, headers, blank line)."""

    host: str  # a name or an IP literal, no brackets
    port: int
    ssl: ssl.SSLContext | None
    head: bytes


class Http11Client:
    """One target's connection: GETs one at a time, kept alive between them."""

    def __init__(self) -> None:
        self._conn: _Connection | None = None
        self._origin: tuple[str, int, ssl.SSLContext | None] | None = None

    async def get(self, req: Request, max_bytes: int) -> Answer:
        conn = self._conn
        origin = (req.host, req.port, req.ssl)
        if conn is not None and (not conn.idle or self._origin != origin):
            conn.close()
            conn = self._conn = None
        if conn is not None:
            try:
                return await self._exchange(conn, req, max_bytes)
            except ServerDisconnected:
                pass  # stale: once more on a new connection
        conn = self._conn = await _connect(req)
        self._origin = origin
        return await self._exchange(conn, req, max_bytes)

    async def _exchange(self, conn: _Connection, req: Request, max_bytes: int) -> Answer:
        try:
            return await conn.exchange(req.head, max_bytes)
        finally:
            if not conn.idle:  # failed, cancelled, or not to be reused
                conn.close()
                if self._conn is conn:
                    self._conn = None

    async def aclose(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


async def _connect(req: Request) -> _Connection:
    loop = asyncio.get_running_loop()
    sock = await _open_socket(loop, req.host, req.port)
    try:
        _, conn = await loop.create_connection(
            _Connection, sock=sock, ssl=req.ssl, server_hostname=req.host if req.ssl else None
        )
    except OSError as exc:  # the TLS handshake (ssl.SSLError is an OSError)
        sock.close()
        raise ConnectFailed(str(exc)) from exc
    except BaseException:
        sock.close()
        raise
    return conn


def _addresses(host: str, port: int) -> list[tuple[int, tuple[object, ...]]] | None:
    """An IP literal's address without a resolver round trip; None for a name."""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
        except OSError:
            continue
        return [(family, (host, port) if family == socket.AF_INET else (host, port, 0, 0))]
    return None


async def _open_socket(loop: asyncio.AbstractEventLoop, host: str, port: int) -> socket.socket:
    addresses = _addresses(host, port)
    if addresses is None:
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:  # socket.gaierror: the name does not resolve
            raise ConnectFailed(str(exc)) from exc
        addresses = [(family, addr) for family, _, _, _, addr in infos]
    errors: list[OSError] = []
    for family, addr in addresses:
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            await loop.sock_connect(sock, addr)
        except OSError as exc:
            sock.close()
            errors.append(exc)
            continue
        except BaseException:
            sock.close()
            raise
        return sock
    if not errors:
        raise ConnectFailed(f"no address for {host}")
    cause: BaseException = (
        errors[0]
        if len(errors) == 1
        else ExceptionGroup("multiple connection attempts failed", errors)
    )
    raise ConnectFailed("All connection attempts failed") from cause


class _Connection(asyncio.Protocol):
    """The protocol of one connection; reads one answer at a time into its waiter."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.idle = False  # connected, between answers, fit to be reused
        self._reader: AnswerReader | None = None
        self._waiter: asyncio.Future[Answer] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.idle = True

    def exchange(self, head: bytes, max_bytes: int) -> asyncio.Future[Answer]:
        assert self.transport is not None and self.idle
        self.idle = False
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        self._reader = AnswerReader(max_bytes)
        self.transport.write(head)
        return waiter

    def data_received(self, data: bytes) -> None:
        reader = self._reader
        if reader is None:  # bytes nobody asked for: the connection is not fit for reuse
            self.close()
            return
        try:
            done = reader.feed(data)
        except Exception as exc:
            self._fail(exc)
            return
        if done:
            self._finish(reader)

    def eof_received(self) -> bool | None:
        reader = self._reader
        self.idle = False
        if reader is not None:
            try:
                reader.eof()
            except Exception as exc:
                self._fail(exc)
            else:
                self._finish(reader)
        return None  # the transport closes

    def connection_lost(self, exc: Exception | None) -> None:
        self.idle = False
        reader = self._reader
        if reader is None:
            return
        if exc is None:
            self.eof_received()
        elif not reader.started:
            self._fail(ServerDisconnected("Server disconnected without sending a response."))
        else:
            self._fail(ReadError(str(exc) or type(exc).__name__))

    def close(self) -> None:
        self.idle = False
        self._reader = None
        if self.transport is not None:
            self.transport.abort()

    def _finish(self, reader: AnswerReader) -> None:
        self._reader = None
        waiter = self._waiter
        answer = reader.answer
        assert waiter is not None and answer is not None
        if reader.keep_alive and self.transport is not None and not self.transport.is_closing():
            self.idle = True
        else:
            self.close()
        if not waiter.done():
            waiter.set_result(answer)

    def _fail(self, exc: Exception) -> None:
        waiter = self._waiter
        self.close()
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
