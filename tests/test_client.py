import asyncio
import gzip
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from app.model import ErrorKind
from app.scrape.client import fetch, read_file


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


async def fetch_with(handler, **kw):  # type: ignore[no-untyped-def]
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        return await fetch(
            client,
            "http://vllm.test/metrics",
            timeout=kw.get("timeout", 1.0),
            max_bytes=kw.get("max_bytes", 1000),
        )


def test_ok_page_returns_text() -> None:
    r = run(fetch_with(lambda req: httpx.Response(200, text="vllm:x 1\n")))
    assert r.ok and r.text == "vllm:x 1\n" and r.nbytes == 9


def test_non_2xx_is_http_status() -> None:
    r = run(fetch_with(lambda req: httpx.Response(503, text="down")))
    assert r.error_kind is ErrorKind.HTTP_STATUS and r.status == 503 and "503" in (r.error or "")


def test_body_over_cap_is_too_large() -> None:
    r = run(fetch_with(lambda req: httpx.Response(200, text="x" * 5000), max_bytes=1000))
    assert r.error_kind is ErrorKind.TOO_LARGE


def test_gzip_bomb_is_caught_after_decoding() -> None:
    body = gzip.compress(b"#" * 100_000)
    r = run(
        fetch_with(
            lambda req: httpx.Response(200, content=body, headers={"Content-Encoding": "gzip"}),
            max_bytes=10_000,
        )
    )
    assert len(body) < 10_000
    assert r.error_kind is ErrorKind.TOO_LARGE


def test_gzip_page_is_decoded() -> None:
    body = gzip.compress(b"vllm:x 1\n")
    r = run(
        fetch_with(
            lambda req: httpx.Response(200, content=body, headers={"Content-Encoding": "gzip"})
        )
    )
    assert r.text == "vllm:x 1\n"


def test_asks_for_text_format_and_gzip() -> None:
    seen: dict[str, str] = {}

    def handler(req: httpx.Request) -> httpx.Response:
        seen.update(req.headers)
        return httpx.Response(200, text="")

    run(fetch_with(handler))
    assert "version=0.0.4" in seen["accept"] and "gzip" in seen["accept-encoding"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_nothing_listening_is_refused() -> None:
    async def go():  # type: ignore[no-untyped-def]
        async with httpx.AsyncClient() as client:
            return await fetch(
                client, f"http://127.0.0.1:{free_port()}/metrics", timeout=2, max_bytes=1000
            )

    assert run(go()).error_kind is ErrorKind.REFUSED


@pytest.fixture
def slow_server() -> Iterator[str]:
    release = threading.Event()

    class Slow(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            release.wait(5)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *a: object) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/metrics"
    release.set()
    srv.shutdown()
    srv.server_close()


def test_slow_target_times_out(slow_server: str) -> None:
    async def go():  # type: ignore[no-untyped-def]
        async with httpx.AsyncClient() as client:
            return await fetch(client, slow_server, timeout=0.3, max_bytes=1000)

    r = run(go())
    assert r.error_kind is ErrorKind.TIMEOUT and r.duration < 2


def test_read_file_applies_cap(tmp_path) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "page.prom"
    p.write_text("vllm:x 1\n" * 100)
    assert read_file(p, max_bytes=10).error_kind is ErrorKind.TOO_LARGE
    assert read_file(p, max_bytes=10_000).text == "vllm:x 1\n" * 100
    assert read_file(tmp_path / "none", max_bytes=10).error_kind is ErrorKind.OTHER


def test_a_trickling_page_times_out_at_the_whole_fetch_deadline() -> None:
    """httpx's timeout restarts with every read; the fetch's deadline does not."""

    async def go() -> tuple[object, float]:
        async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
            try:
                for _ in range(100):  # one byte every 0.2 s: 20 s in all
                    writer.write(b"#")
                    await writer.drain()
                    await asyncio.sleep(0.2)
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                writer.close()

        server = await asyncio.start_server(trickle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server, httpx.AsyncClient() as client:
            t0 = asyncio.get_running_loop().time()
            r = await fetch(client, f"http://127.0.0.1:{port}/metrics", timeout=1.0, max_bytes=1000)
            took = asyncio.get_running_loop().time() - t0
            server.close()
        return r, took

    r, took = run(go())
    assert r.error_kind is ErrorKind.TIMEOUT  # type: ignore[attr-defined]
    assert took < 5.0, "the deadline bounds the fetch, not each read"
