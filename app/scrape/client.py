"""Fetch a ``/metrics`` page with a timeout and a size cap, and name what went wrong.

Every outcome is a :class:`FetchResult`; nothing here raises for a bad target. Error
kinds: ``refused`` (nothing listens), ``connect`` (other connection failures, DNS),
``timeout``, ``http_status`` (non-2xx), ``too_large`` (body over the cap, counted after
gzip decoding so a compressed bomb is caught too), ``truncated`` (the connection closed
before the body was complete: shorter than its Content-Length, or a broken chunked
encoding), ``not_prometheus`` (decided by the caller after parsing), ``other``. An
error message is stored and shown: a URL's password never appears in it.

A :class:`ClientPool` scrapes with the lean HTTP/1.1 client (:mod:`app.scrape.http11`,
about a fifth of httpx's CPU a page), the request built once per target by httpx's own
rules (its URL parsing and percent-encoding, Host, the pool's headers, basic auth from the
URL's user and password), every outcome named as above. httpx does what the lean client
does not, and is never silently skipped: a pool given options beyond ``verify``,
``headers``, ``follow_redirects=False``, ``limits``, ``timeout`` and ``trust_env`` (a
transport, auth, proxy, cookies, HTTP/2, ...) makes httpx clients only; a target whose
scheme has a proxy in the environment (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``;
httpx's ``trust_env``, unless ``NO_PROXY=*``; httpx then applies ``NO_PROXY``), whose URL
httpx would not take, or not http(s), or whose headers hold a control character, is
fetched by httpx; so is an answer with two content encodings (asked again of httpx).
A given client (:meth:`ClientPool.of`, an ``httpx.AsyncClient`` passed to :func:`fetch`)
is always used as it is.
"""

from __future__ import annotations

import asyncio
import base64
import errno
import ssl
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

import httpx

from app.model import ErrorKind
from app.redact import redact_url
from app.scrape import http11

ACCEPT = "text/plain;version=0.0.4;q=1,*/*;q=0.1"
REQUEST_HEADERS = {"Accept": ACCEPT, "Accept-Encoding": "gzip"}
# httpx's own client headers, under the pool's (the lean request carries the same).
HTTPX_HEADERS = {
    "Accept": "*/*",
    "Accept-Encoding": "gzip, deflate",
    "Connection": "keep-alive",
    "User-Agent": f"python-httpx/{httpx.__version__}",
}
# The pool options the lean client takes (module docstring); any other: httpx only.
# ``limits`` and ``timeout`` mean nothing to it: one connection a client, fetch's deadline.
LEAN_OPTIONS = frozenset(
    {"verify", "headers", "follow_redirects", "limits", "timeout", "trust_env"}
)


@dataclass(frozen=True, slots=True)
class FetchResult:
    """Body text on success, else an error kind and a one-line message."""

    url: str
    started: float
    duration: float
    text: str | None = None
    nbytes: int = 0
    error_kind: ErrorKind | None = None
    error: str | None = None
    status: int | None = None

    @property
    def ok(self) -> bool:
        return self.error_kind is None


# The error of a fetch that failed for want of a file descriptor in phasewatch itself,
# not for anything the target did: the service counts such a round as missed.
OUT_OF_DESCRIPTORS = "phasewatch is out of file descriptors (EMFILE/ENFILE): not tried"


def _out_of_descriptors(exc: BaseException) -> bool:
    """Whether an ``EMFILE`` or ``ENFILE`` is in the chain (an exception group's too)."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, OSError) and cause.errno in (errno.EMFILE, errno.ENFILE):
            return True
        if isinstance(cause, BaseExceptionGroup):
            return any(_out_of_descriptors(e) for e in cause.exceptions)
        cause = cause.__cause__ or cause.__context__
    return False


def _connect_error(exc: BaseException) -> tuple[ErrorKind, str]:
    """The kind and text of a failed connection (``refused``, ``connect``)."""
    kind = _connect_kind(exc)
    if kind is ErrorKind.REFUSED:
        return kind, "connection refused"
    if _out_of_descriptors(exc):
        return kind, OUT_OF_DESCRIPTORS
    return kind, f"cannot connect: {exc}"


def _connect_kind(exc: BaseException) -> ErrorKind:
    """``refused`` when an ``ECONNREFUSED`` ``OSError`` is in the exception's chain (the
    error's type and errno, never its text), else ``connect``."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError) or (
            isinstance(cause, OSError) and cause.errno == errno.ECONNREFUSED
        ):
            return ErrorKind.REFUSED
        cause = cause.__cause__ or cause.__context__
    return ErrorKind.CONNECT


@dataclass(frozen=True, slots=True)
class LeanSettings:
    """What every lean request of a pool shares: headers, TLS context, proxied schemes."""

    headers: httpx.Headers
    ssl: ssl.SSLContext
    proxied: frozenset[str]  # schemes httpx would send through a proxy from the environment

    @classmethod
    def of(cls, kwargs: dict[str, object]) -> LeanSettings | None:
        """The settings for a pool's options, None if any needs httpx."""
        if set(kwargs) - LEAN_OPTIONS or kwargs.get("follow_redirects", False) is not False:
            return None
        verify, trust_env = kwargs.get("verify", True), kwargs.get("trust_env", True)
        if not isinstance(verify, ssl.SSLContext | bool) or not isinstance(trust_env, bool):
            return None
        headers = httpx.Headers(HTTPX_HEADERS)
        headers.update(httpx.Headers(kwargs.get("headers")))  # type: ignore[arg-type]
        headers.update(REQUEST_HEADERS)
        context = httpx.create_ssl_context(verify=verify, trust_env=trust_env)
        return cls(headers, context, _env_proxied() if trust_env else frozenset())

    def request(self, url: str) -> http11.Request | None:
        """The lean request for ``url``, None where httpx must fetch it."""
        try:
            u = httpx.URL(url)
            req = httpx.Request("GET", u, headers=self.headers)
            host = u.raw_host.decode("ascii")
        except (httpx.InvalidURL, UnicodeError, TypeError, ValueError):
            return None  # httpx names it
        if u.scheme not in ("http", "https") or u.scheme in self.proxied or not host:
            return None
        fields = list(req.headers.raw)
        if u.username or u.password:  # httpx's basic auth from the URL, over any other
            token = base64.b64encode(f"{u.username}:{u.password}".encode()).decode()
            auth = (b"Authorization", f"Basic {token}".encode())
            given = [i for i, (k, _) in enumerate(fields) if k.lower() == b"authorization"]
            fields = [f for f in fields if f[0].lower() != b"authorization"]
            fields.insert(given[0] if given else len(fields), auth)  # where httpx puts it
        if any(c in f for k, v in fields for f in (k, v) for c in (b"\r", b"\n", b"\0")):
            return None  # a control character in a header: httpx (h11) refuses it
        lines = [b"GET " + u.raw_path + b" HTTP/1.1", *(k + b": " + v for k, v in fields)]
        head = b"\r\n".join(lines) + b"\r\n\r\n"
        tls = u.scheme == "https"
        return http11.Request(host, u.port or (443 if tls else 80), self.ssl if tls else None, head)


def _env_proxied() -> frozenset[str]:
    """The schemes httpx (``trust_env``) would proxy by the environment's settings."""
    found = urllib.request.getproxies()
    if any(h.strip() == "*" for h in found.get("no", "").split(",")):
        return frozenset()
    return frozenset(s for s in ("http", "https") if found.get(s) or found.get("all"))


class ScrapeClient:
    """One target's scrape client: the lean HTTP/1.1 client, and httpx (made when first
    needed) for what the lean one does not do (module docstring)."""

    __slots__ = ("_make_httpx", "_request", "_url", "fallback", "lean", "settings")

    def __init__(self, settings: LeanSettings, make_httpx: Callable[[], httpx.AsyncClient]) -> None:
        self.settings = settings
        self.lean = http11.Http11Client()
        self.fallback: httpx.AsyncClient | None = None
        self._make_httpx = make_httpx
        self._url: str | None = None
        self._request: http11.Request | None = None

    def request_for(self, url: str) -> http11.Request | None:
        """The lean request for ``url`` (built once per URL), None: httpx fetches it."""
        if url != self._url:
            self._request = self.settings.request(url)
            self._url = url
        return self._request

    def httpx_client(self) -> httpx.AsyncClient:
        if self.fallback is None:
            self.fallback = self._make_httpx()
        return self.fallback

    async def aclose(self) -> None:
        await self.lean.aclose()
        if self.fallback is not None:
            await self.fallback.aclose()


TargetClient: TypeAlias = httpx.AsyncClient | ScrapeClient


class ClientPool:
    """One scrape client per target, made on first use, as Prometheus keeps one
    connection per target: a :class:`ScrapeClient` (the lean HTTP/1.1 client), or an
    ``httpx.AsyncClient`` when the pool's options need httpx (module docstring).

    One ``httpx.AsyncClient`` whose pool holds many connections scans all of them for
    every request it sends and every connection it releases: at 1,000 targets and 64
    connections that scan cost more than the rest of a fetch (about 4 ms of CPU a page,
    against 0.7 ms with a client per target). The clients share one TLS context, so a
    client costs no certificate loading; how many fetches run at once is the caller's
    limit (the collector's semaphore).
    """

    def __init__(self, **kwargs: object) -> None:
        kwargs.setdefault("verify", ssl.create_default_context())
        kwargs.setdefault("limits", httpx.Limits(max_connections=1, max_keepalive_connections=1))
        self.kwargs = kwargs
        self.clients: dict[str, TargetClient] = {}
        self.shared: httpx.AsyncClient | None = None
        self.lean = LeanSettings.of(kwargs)  # None: httpx for every target

    @classmethod
    def of(cls, client: httpx.AsyncClient) -> ClientPool:
        """A pool that hands out one given client for every target."""
        pool = cls()
        pool.shared = client
        return pool

    def for_target(self, name: str) -> TargetClient:
        if self.shared is not None:
            return self.shared
        client = self.clients.get(name)
        if client is None:
            if self.lean is not None:
                client = ScrapeClient(self.lean, self._httpx)
            else:
                client = self._httpx()
            self.clients[name] = client
        return client

    def _httpx(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(**self.kwargs)  # type: ignore[arg-type]

    def release(self, name: str) -> TargetClient | None:
        """Take a target's client out of the pool (the target is gone); the caller
        closes it. None: it had none of its own."""
        return self.clients.pop(name, None)

    async def aclose(self) -> None:
        """Close the clients this pool made (a given shared client stays its owner's)."""
        for c in self.clients.values():
            await c.aclose()
        self.clients.clear()


async def fetch(client: TargetClient, url: str, *, timeout: float, max_bytes: int) -> FetchResult:
    """GET ``url`` and return its text, or the reason it could not be had.

    ``timeout`` bounds the whole fetch, not each step: httpx's own timeout restarts
    with every read, so a target that trickles its page would hold the round.
    """
    started = time.time()
    t0 = time.perf_counter()

    def done(**kw: object) -> FetchResult:
        if isinstance(kw.get("error"), str):  # stored and shown: no password in it
            kw["error"] = redact_url(str(kw["error"]))
        return FetchResult(url=url, started=started, duration=time.perf_counter() - t0, **kw)  # type: ignore[arg-type]

    try:
        async with asyncio.timeout(timeout):
            if isinstance(client, ScrapeClient):
                req = client.request_for(url)
                if req is not None:
                    try:
                        return await _get_lean(client.lean, req, max_bytes, done)
                    except http11.Unsupported:
                        pass  # asked again of httpx
                client = client.httpx_client()
            return await _get(client, url, timeout, max_bytes, done)
    except TimeoutError:
        return done(error_kind=ErrorKind.TIMEOUT, error=f"no complete answer within {timeout:g} s")


async def _get(
    client: httpx.AsyncClient,
    url: str,
    timeout: float,
    max_bytes: int,
    done: Callable[..., FetchResult],
) -> FetchResult:
    try:
        async with client.stream(
            "GET", url, timeout=timeout, headers={"Accept": ACCEPT, "Accept-Encoding": "gzip"}
        ) as resp:
            if not 200 <= resp.status_code < 300:
                return done(
                    error_kind=ErrorKind.HTTP_STATUS,
                    error=f"HTTP {resp.status_code}",
                    status=resp.status_code,
                )
            declared = resp.headers.get("content-length", "")
            plain = "gzip" not in resp.headers.get("content-encoding", "")
            if plain and declared.isdigit() and int(declared) > max_bytes:
                return done(
                    error_kind=ErrorKind.TOO_LARGE,
                    error=f"page of {declared} bytes exceeds the {max_bytes}-byte cap",
                    status=resp.status_code,
                )
            chunks: list[bytes] = []
            size = 0
            try:
                async for chunk in resp.aiter_bytes():
                    size += len(chunk)
                    if size > max_bytes:
                        return done(
                            error_kind=ErrorKind.TOO_LARGE,
                            error=f"page exceeds the {max_bytes}-byte cap",
                            status=resp.status_code,
                        )
                    chunks.append(chunk)
            except httpx.RemoteProtocolError as exc:
                # The headers came, the body did not all come: a cut page, not a bad target.
                return done(
                    error_kind=ErrorKind.TRUNCATED,
                    error=f"the body ended early: {exc}"[:300],
                    status=resp.status_code,
                )
            body = b"".join(chunks)
            return done(
                text=body.decode("utf-8", errors="replace"), nbytes=size, status=resp.status_code
            )
    except httpx.TimeoutException:
        return done(error_kind=ErrorKind.TIMEOUT, error=f"no complete answer within {timeout:g} s")
    except httpx.ConnectError as exc:
        kind, msg = _connect_error(exc)
        return done(error_kind=kind, error=msg)
    except (httpx.HTTPError, httpx.InvalidURL) as exc:  # InvalidURL is no HTTPError
        return done(error_kind=ErrorKind.OTHER, error=f"{type(exc).__name__}: {exc}"[:300])


async def _get_lean(
    lean: http11.Http11Client,
    req: http11.Request,
    max_bytes: int,
    done: Callable[..., FetchResult],
) -> FetchResult:
    """:func:`_get` on the lean client: the same outcomes, named the same way."""
    try:
        answer = await lean.get(req, max_bytes)
    except http11.TooLarge as exc:
        cap = f"{max_bytes}-byte cap"
        msg = f"page of {exc.declared} bytes exceeds the {cap}" if exc.declared else ""
        return done(
            error_kind=ErrorKind.TOO_LARGE,
            error=msg or f"page exceeds the {cap}",
            status=exc.status,
        )
    except http11.BodyTruncated as exc:
        return done(
            error_kind=ErrorKind.TRUNCATED,
            error=f"the body ended early: {exc}"[:300],
            status=exc.status,
        )
    except http11.ConnectFailed as exc:
        kind, msg = _connect_error(exc)
        return done(error_kind=kind, error=msg)
    except http11.RemoteProtocolError as exc:  # as httpx names it (its subclasses too)
        return done(error_kind=ErrorKind.OTHER, error=f"RemoteProtocolError: {exc}"[:300])
    except (http11.ReadError, http11.DecodingError) as exc:
        return done(error_kind=ErrorKind.OTHER, error=f"{type(exc).__name__}: {exc}"[:300])
    status = answer.status
    if not 200 <= status < 300 or answer.body is None:
        return done(error_kind=ErrorKind.HTTP_STATUS, error=f"HTTP {status}", status=status)
    body = answer.body
    return done(text=body.decode("utf-8", errors="replace"), nbytes=len(body), status=status)


def read_file(path: str | Path, *, max_bytes: int) -> FetchResult:
    """Read a saved page from disk with the same cap and result shape as :func:`fetch`."""
    started = time.time()
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > max_bytes:
            return FetchResult(
                str(p),
                started,
                0.0,
                error_kind=ErrorKind.TOO_LARGE,
                error=f"file of {size} bytes exceeds the {max_bytes}-byte cap",
            )
        data = p.read_bytes()
    except OSError as exc:
        return FetchResult(str(p), started, 0.0, error_kind=ErrorKind.OTHER, error=str(exc))
    return FetchResult(
        str(p), started, 0.0, text=data.decode("utf-8", errors="replace"), nbytes=len(data)
    )
