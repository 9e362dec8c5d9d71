"""The lean HTTP/1.1 scrape client (``app.scrape.http11``) against real loopback servers:
kept-alive connections, a stale one retried once, chunked and gzip bodies, a gzip bomb,
cut bodies, a trickle held to the whole-fetch deadline, TLS; every outcome named as
httpx names it (``fetch`` through a :class:`ClientPool` against the same faults)."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import importlib.util
import os
import socket
import ssl
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from app.model import ErrorKind
from app.scrape.client import ClientPool, FetchResult, ScrapeClient, fetch
from app.scrape.http11_answer import AnswerReader
from tests.faults import FaultServer, gzip_bomb

PAGE = b"".join(
    b'vllm:num_requests_running{model_name="m",engine="%d"} 1\n' % i for i in range(400)
)
PASSWORD = "s3cret-pass"

Handler = Callable[["Conn"], Awaitable[None]]


@dataclass
class Conn:
    """One accepted connection, as a handler sees it."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    server: Server

    async def request(self) -> bytes | None:
        """The next request head, None when the client closed."""
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
        self.server.requests.append(head)
        return head

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()


@dataclass
class Server:
    """A loopback server whose every connection runs ``handler``; counts connections."""

    handler: Handler
    host: str = "127.0.0.1"
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)
    _srv: asyncio.Server | None = None

    async def __aenter__(self) -> Server:
        self._srv = await asyncio.start_server(self._accept, self.host, 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._srv is not None
        self._srv.close()

    @property
    def port(self) -> int:
        assert self._srv is not None
        return int(self._srv.sockets[0].getsockname()[1])

    def url(self, path: str = "/metrics", scheme: str = "http") -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{host}:{self.port}{path}"

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await self.handler(Conn(reader, writer, self))
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()


def answer(body: bytes, *, status: str = "200 OK", headers: str = "") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n{headers}\r\n"
    return head.encode() + body


def keep_serving(make: Callable[[int], bytes]) -> Handler:
    """Answer every request of a connection with ``make(n)``, n counting all requests."""

    async def handler(conn: Conn) -> None:
        while await conn.request() is not None:
            await conn.send(make(len(conn.server.requests)))

    return handler


def chunked(*pieces: bytes, ext: bytes = b"", trailer: bytes = b"") -> bytes:
    body = b"".join(b"%x%s\r\n%s\r\n" % (len(p), ext, p) for p in pieces)
    return body + b"0\r\n" + trailer + b"\r\n"


async def lean_fetch(
    url: str, *, timeout: float = 5.0, max_bytes: int = 1_000_000, pool: ClientPool | None = None
) -> FetchResult:
    own = pool is None
    pool = pool or ClientPool()
    client = pool.for_target("t")
    assert isinstance(client, ScrapeClient)
    try:
        return await fetch(client, url, timeout=timeout, max_bytes=max_bytes)
    finally:
        if own:
            await pool.aclose()


def test_one_connection_is_kept_alive_for_every_page() -> None:
    async def go() -> None:
        async with Server(keep_serving(lambda n: answer(PAGE))) as srv:
            pool = ClientPool()
            got = [await lean_fetch(srv.url(), pool=pool) for _ in range(3)]
            await pool.aclose()
        assert [r.text for r in got] == [PAGE.decode()] * 3
        assert all(r.nbytes == len(PAGE) and r.status == 200 for r in got)
        assert srv.connections == 1 and len(srv.requests) == 3

    asyncio.run(go())


@pytest.mark.parametrize(
    "headers",
    [
        {"User-Agent": "phasewatch"},
        {"Authorization": "Bearer t0k", "X-Scope-OrgID": "team", "Accept": "*/*"},
    ],
    ids=["service", "extra-and-auth"],
)
def test_request_head_is_the_one_httpx_sends(headers: dict[str, str]) -> None:
    """Same request line, Host, Accept, gzip, User-Agent, extra headers and basic auth
    from the URL's user and password (an IPv4 host, a query string, a port)."""

    async def go() -> None:
        async with Server(keep_serving(lambda n: answer(b"x 1\n"))) as srv:
            url = srv.url("/metrics?a=1&b=%20x").replace("://", f"://user:{PASSWORD}@")
            kwargs = {"follow_redirects": False, "headers": headers}
            pool = ClientPool(**kwargs, trust_env=False)
            assert (await lean_fetch(url, pool=pool)).ok
            await pool.aclose()
            async with httpx.AsyncClient(**kwargs) as client:  # type: ignore[arg-type]
                assert (await fetch(client, url, timeout=5, max_bytes=1000)).ok
        lean, by_httpx = srv.requests
        assert lean == by_httpx
        assert b"Authorization: Basic " in lean and b"GET /metrics?a=1&b=%20x HTTP/1.1" in lean

    asyncio.run(go())


def test_a_stale_kept_alive_connection_is_retried_once_on_a_new_one() -> None:
    """The server answers once per connection, then closes the next request unanswered
    (it closed its idle connection as the request came)."""

    async def once_per_connection(conn: Conn) -> None:
        if await conn.request() is not None:
            await conn.send(answer(PAGE))
        await conn.request()  # then close without a byte

    async def go() -> None:
        async with Server(once_per_connection) as srv:
            pool = ClientPool()
            got = [await lean_fetch(srv.url(), pool=pool) for _ in range(3)]
            await pool.aclose()
        assert all(r.ok for r in got), [r.error for r in got]
        assert srv.connections == 3  # one retry a fetch after the first

    asyncio.run(go())


def test_a_fresh_connection_closed_unanswered_is_other_and_not_retried() -> None:
    async def unanswered(conn: Conn) -> None:
        await conn.request()

    async def go() -> None:
        async with Server(unanswered) as srv:
            r = await lean_fetch(srv.url())
        assert r.error_kind is ErrorKind.OTHER
        assert r.error == "RemoteProtocolError: Server disconnected without sending a response."
        assert srv.connections == 1

    asyncio.run(go())


def test_an_idle_connection_the_server_closed_is_replaced() -> None:
    async def answer_then_close(conn: Conn) -> None:
        if await conn.request() is not None:
            await conn.send(answer(PAGE))

    async def go() -> None:
        async with Server(answer_then_close) as srv:
            pool = ClientPool()
            first = await lean_fetch(srv.url(), pool=pool)
            client = pool.for_target("t")
            assert isinstance(client, ScrapeClient)
            async with asyncio.timeout(10):
                while client.lean._conn is not None and client.lean._conn.idle:
                    await asyncio.sleep(0)  # a turn of the loop: until the FIN is read
            second = await lean_fetch(srv.url(), pool=pool)
            await pool.aclose()
        assert first.ok and second.ok and srv.connections == 2 and len(srv.requests) == 2

    asyncio.run(go())


def test_chunked_body_with_extensions_and_trailers_keeps_the_connection() -> None:
    body = chunked(PAGE[:1000], PAGE[1000:], ext=b";name=v", trailer=b"X-Trailer: 1\r\n")
    headers = "Transfer-Encoding: chunked\r\n"

    async def go() -> None:
        head = f"HTTP/1.1 200 OK\r\n{headers}\r\n".encode()
        async with Server(keep_serving(lambda n: head + body)) as srv:
            pool = ClientPool()
            got = [await lean_fetch(srv.url(), pool=pool) for _ in range(2)]
            await pool.aclose()
        assert [r.text for r in got] == [PAGE.decode()] * 2 and srv.connections == 1

    asyncio.run(go())


def test_gzip_page_is_decoded_and_counted_decoded() -> None:
    async def go() -> None:
        page = answer(gzip.compress(PAGE), headers="Content-Encoding: gzip\r\n")
        async with Server(keep_serving(lambda n: page)) as srv:
            r = await lean_fetch(srv.url())
            small = await lean_fetch(srv.url(), max_bytes=len(PAGE) - 1)
        assert r.text == PAGE.decode() and r.nbytes == len(PAGE)
        assert small.error_kind is ErrorKind.TOO_LARGE  # the cap counts decoded bytes

    asyncio.run(go())


def test_gzip_bomb_is_refused_without_inflating_it() -> None:
    bomb = gzip.compress(b"\0" * 200_000_000, compresslevel=9)  # ~200 kB on the wire
    cap = 1_000_000

    async def go() -> FetchResult:
        page = answer(bomb, headers="Content-Encoding: gzip\r\n")
        async with Server(keep_serving(lambda n: page)) as srv:
            tracemalloc.start()
            try:
                r = await lean_fetch(srv.url(), max_bytes=cap)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
        assert peak < 10 * cap, f"{peak} bytes held while reading a bomb"
        return r

    r = asyncio.run(go())
    assert len(bomb) < cap and r.error_kind is ErrorKind.TOO_LARGE and r.status == 200


def test_body_shorter_than_its_content_length_is_truncated() -> None:
    async def cut(conn: Conn) -> None:
        if await conn.request() is not None:
            await conn.send(answer(PAGE)[: -len(PAGE) // 2])

    async def go() -> FetchResult:
        async with Server(cut) as srv:
            return await lean_fetch(srv.url().replace("://", f"://u:{PASSWORD}@"))

    r = asyncio.run(go())
    assert r.error_kind is ErrorKind.TRUNCATED and r.status == 200
    assert r.error is not None and "expected" in r.error and PASSWORD not in r.error


@pytest.mark.parametrize(
    "body",
    [
        chunked(PAGE)[:-5],  # cut before its last chunk
        b"5\r\nabcde\r\nzz\r\n",  # not a chunk size
        b"5\r\nabcdeXX",  # no CRLF after a chunk's data
    ],
    ids=["cut", "bad-size", "no-crlf"],
)
def test_broken_chunked_body_is_truncated(body: bytes) -> None:
    async def broken(conn: Conn) -> None:
        if await conn.request() is not None:
            await conn.send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body)

    async def go() -> FetchResult:
        async with Server(broken) as srv:
            return await lean_fetch(srv.url())

    r = asyncio.run(go())
    assert r.error_kind is ErrorKind.TRUNCATED and r.status == 200, r.error


def test_declared_oversize_plain_page_is_refused_before_its_body() -> None:
    async def head_only(conn: Conn) -> None:
        if await conn.request() is not None:
            await conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 50000000\r\n\r\n")
            await conn.request()  # the body never comes: reading it would time out

    async def go() -> FetchResult:
        async with Server(head_only) as srv:
            return await lean_fetch(srv.url(), timeout=30, max_bytes=1000)

    r = asyncio.run(go())
    assert r.error_kind is ErrorKind.TOO_LARGE and r.duration < 10
    assert r.error == "page of 50000000 bytes exceeds the 1000-byte cap"


def test_close_delimited_page_over_the_cap_is_too_large() -> None:
    async def endless(conn: Conn) -> None:
        if await conn.request() is not None:
            await conn.send(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
            while True:
                await conn.send(b"#" * 65536)

    async def go() -> FetchResult:
        async with Server(endless) as srv:
            return await lean_fetch(srv.url(), max_bytes=1_000_000)

    r = asyncio.run(go())
    assert r.error_kind is ErrorKind.TOO_LARGE and r.error == "page exceeds the 1000000-byte cap"


def test_close_delimited_page_is_read_to_the_close() -> None:
    async def to_close(conn: Conn) -> None:
        if await conn.request() is not None:
            await conn.send(b"HTTP/1.0 200 OK\r\n\r\n" + PAGE)

    async def go() -> FetchResult:
        async with Server(to_close) as srv:
            return await lean_fetch(srv.url())

    assert asyncio.run(go()).text == PAGE.decode()


def test_a_trickling_page_times_out_at_the_whole_fetch_deadline() -> None:
    async def trickle(conn: Conn) -> None:
        if await conn.request() is None:
            return
        await conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
        gone = asyncio.Event()  # never set: its timeout paces the trickle
        for _ in range(1000):
            await conn.send(b"#")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(gone.wait(), 0.05)

    async def go() -> FetchResult:
        async with Server(trickle) as srv:
            return await lean_fetch(srv.url(), timeout=0.5)

    r = asyncio.run(go())
    assert r.error_kind is ErrorKind.TIMEOUT and r.duration < 3


def test_non_2xx_and_redirects_are_http_status_and_not_followed() -> None:
    redirect = answer(b"", status="302 Found", headers="Location: /elsewhere\r\n")
    pages = {1: answer(b"down", status="503 Service Unavailable"), 2: redirect}

    async def go() -> list[FetchResult]:
        async with Server(keep_serving(lambda n: pages.get(n, answer(PAGE)))) as srv:
            pool = ClientPool(follow_redirects=False)
            got = [await lean_fetch(srv.url(), pool=pool) for _ in range(3)]
            await pool.aclose()
            assert len(srv.requests) == 3 and all(b"/elsewhere" not in r for r in srv.requests)
        return got

    e503, e302, ok = asyncio.run(go())
    assert (e503.error_kind, e503.status, e503.error) == (ErrorKind.HTTP_STATUS, 503, "HTTP 503")
    assert (e302.error_kind, e302.status) == (ErrorKind.HTTP_STATUS, 302)
    assert ok.ok


def test_nothing_listening_is_refused() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = asyncio.run(lean_fetch(f"http://127.0.0.1:{port}/metrics"))
    assert r.error_kind is ErrorKind.REFUSED and r.error == "connection refused"


def _ipv6() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _ipv6(), reason="no IPv6 loopback here")
def test_ipv6_literal_host() -> None:
    async def go() -> FetchResult:
        async with Server(keep_serving(lambda n: answer(PAGE)), host="::1") as srv:
            r = await lean_fetch(srv.url("/metrics?x=1"))
            assert srv.requests[0].split(b"\r\n")[1] == f"Host: [::1]:{srv.port}".encode()
            return r

    assert asyncio.run(go()).text == PAGE.decode()


def test_stacked_encodings_are_asked_again_of_httpx() -> None:
    twice = gzip.compress(gzip.compress(PAGE))
    page = answer(twice, headers="Content-Encoding: gzip, gzip\r\n")

    async def go() -> FetchResult:
        async with Server(keep_serving(lambda n: page)) as srv:
            r = await lean_fetch(srv.url())
            assert len(srv.requests) == 2  # the lean client's, then httpx's
            return r

    assert asyncio.run(go()).text == PAGE.decode()


def test_a_proxy_from_the_environment_sends_the_scrape_through_httpx(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """httpx honours HTTP_PROXY (trust_env); the lean client does not, so it steps aside."""

    async def proxy(conn: Conn) -> None:  # answers absolute-form requests itself
        while await conn.request() is not None:
            await conn.send(answer(b"via proxy\n"))

    async def go() -> FetchResult:
        async with Server(proxy) as px:
            monkeypatch.setenv("HTTP_PROXY", px.url(""))
            monkeypatch.delenv("NO_PROXY", raising=False)
            monkeypatch.delenv("no_proxy", raising=False)
            r = await lean_fetch("http://vllm.example:8000/metrics")
            assert px.requests[0].startswith(b"GET http://vllm.example:8000/metrics HTTP/1.1")
            return r

    assert asyncio.run(go()).text == "via proxy\n"


def test_answer_reader_reads_any_split_of_the_bytes_alike() -> None:
    """Fed one byte at a time: LF-only heads, a 100 Continue, chunked gzip."""
    z = gzip.compress(PAGE)
    wire = (
        b"HTTP/1.1 100 Continue\r\n\r\n"
        b"HTTP/1.1 200 OK\nTransfer-Encoding: chunked\nContent-Encoding: gzip\n\n"
        + chunked(z[:100], z[100:])
    )
    reader = AnswerReader(max_bytes=10**6)
    done = [reader.feed(wire[i : i + 1]) for i in range(len(wire))]
    assert done[-1] and not any(done[:-1]) and reader.keep_alive
    assert reader.answer is not None and reader.answer.body == PAGE


# --- the same faults, named alike by httpx and by the lean client ------------------------


@pytest.mark.parametrize(
    ("mode", "params"),
    [
        ("ok", {}),
        ("status", {"status": 500}),
        ("html", {}),
        ("truncated", {}),
        ("huge", {}),
        ("huge_stream", {}),
        ("gzip_bomb", {}),
    ],
)
def test_every_fault_is_named_as_httpx_names_it(mode: str, params: dict[str, int]) -> None:
    gzip_bomb()  # built once, outside the fetches' timeouts

    async def both(url: str) -> tuple[FetchResult, FetchResult]:
        async with httpx.AsyncClient() as client:
            by_httpx = await fetch(client, url, timeout=10, max_bytes=10_000_000)
        return by_httpx, await lean_fetch(url, timeout=10, max_bytes=10_000_000)

    with FaultServer() as srv:
        srv.set("/a", mode, **params)
        by_httpx, lean = asyncio.run(both(srv.url("/a")))
    assert (lean.error_kind, lean.status) == (by_httpx.error_kind, by_httpx.status)
    if mode == "ok":  # the next page of the counter: as long, give or take a digit
        assert lean.ok and abs(lean.nbytes - by_httpx.nbytes) < 100


# --- TLS -----------------------------------------------------------------------------------

# ``cryptography`` is a dev dependency (pyproject.toml): under CI its absence is a failure.
_HAVE_TLS_TOOLS = (
    importlib.util.find_spec("cryptography") is not None or os.environ.get("CI") == "true"
)


def _self_signed(tmp: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1, with ``cryptography``."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp / "cert.pem", tmp / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@pytest.mark.skipif(
    not _HAVE_TLS_TOOLS, reason="cryptography is not installed in .venv (make test installs it)"
)
def test_https_with_the_shared_context_and_an_untrusted_certificate(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    trusting = ssl.create_default_context(cafile=str(cert))

    async def go() -> tuple[list[FetchResult], FetchResult]:
        srv = Server(keep_serving(lambda n: answer(PAGE)))
        srv._srv = await asyncio.start_server(srv._accept, "127.0.0.1", 0, ssl=server_ctx)
        try:
            pool = ClientPool(verify=trusting)
            got = [await lean_fetch(srv.url(scheme="https"), pool=pool) for _ in range(2)]
            await pool.aclose()
            untrusted = await lean_fetch(srv.url(scheme="https"))  # the default context
        finally:
            await srv.__aexit__()
        # One connection kept alive for both pages; the refused certificate's handshake
        # fails before the server's handler sees a connection.
        assert srv.connections == 1
        return got, untrusted

    got, untrusted = asyncio.run(go())
    assert [r.text for r in got] == [PAGE.decode()] * 2
    assert untrusted.error_kind is ErrorKind.CONNECT and "CERTIFICATE_VERIFY_FAILED" in (
        untrusted.error or ""
    )
