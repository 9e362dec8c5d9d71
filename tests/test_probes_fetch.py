"""One probe request, timed as a client sees it: what it sends, what it measures, and
every way a server can fail it, named — never a credential in what is shown."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from app.scrape.probe_fetch import build_request, send_probe
from app.sim.server import start_server
from tests.realbins import free_port

TOKEN = "probe-s3cret-token"


def _run(client: httpx.AsyncClient, req, timeout: float = 5.0, max_bytes: int = 1_000_000):  # type: ignore[no-untyped-def]
    async def go():  # type: ignore[no-untyped-def]
        async with client:
            return await send_probe(client, req, timeout=timeout, max_bytes=max_bytes)

    return asyncio.run(go())


def _req(kind: str = "openai_completions", url: str = "http://probe.test/v1/completions"):  # type: ignore[no-untyped-def]
    headers = {"Authorization": f"Bearer {TOKEN}"}
    return build_request(kind, url, "m", "hello there", max_tokens=4, headers=headers)


def _mock(handler) -> httpx.AsyncClient:  # type: ignore[no-untyped-def]
    return httpx.AsyncClient(transport=httpx.MockTransport(handler), follow_redirects=False)


def _events(*texts: str) -> bytes:
    chunks = [{"choices": [{"index": 0, "text": t}]} for t in texts]
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
    return body + b"data: [DONE]\n\n"


def test_requests_are_streamed_small_and_carry_the_token() -> None:
    seen: dict[str, object] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen["body"] = json.loads(request.content)
        seen["auth"] = request.headers.get("authorization")
        return httpx.Response(200, content=_events(" a", " b"))

    r = _run(_mock(handler), _req())
    assert r.ok and r.tokens == 2 and r.ttft is not None and len(r.gaps) == 1
    assert seen["auth"] == f"Bearer {TOKEN}"
    body = seen["body"]
    assert isinstance(body, dict)
    assert body["stream"] is True and body["max_tokens"] == 4
    assert body["stream_options"] == {"include_usage": True} and "ignore_eos" not in body
    chat = build_request("openai_chat", "u", "m", "p", max_tokens=2, ignore_eos=True)
    assert chat.body["messages"] == [{"role": "user", "content": "p"}] and chat.chat
    assert chat.body["ignore_eos"] is True
    ollama = build_request("ollama_generate", "u", "m", "p", max_tokens=3)
    assert ollama.wire == "ollama" and ollama.body["options"] == {"num_predict": 3}


def test_an_error_status_says_the_servers_own_message() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        msg = {"object": "error", "message": "The model `m` does not exist.", "code": 404}
        return httpx.Response(404, json=msg)

    r = _run(_mock(handler), _req())
    assert not r.ok and r.error_kind == "http_status" and r.status == 404
    assert r.error == "HTTP 404: The model `m` does not exist."
    assert TOKEN not in (r.error or "")


def test_a_redirect_is_not_followed() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(302, headers={"Location": "http://elsewhere.test/v1/completions"})

    r = _run(_mock(handler), _req())
    assert r.error_kind == "http_status" and "redirect" in (r.error or "")


def test_an_answer_over_the_cap_is_refused() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=_events(*([" word"] * 200)))

    r = _run(_mock(handler), _req(), max_bytes=500)
    assert r.error_kind == "too_large" and r.nbytes > 500


def test_a_trickling_answer_times_out_with_what_it_had() -> None:
    async def trickle() -> AsyncIterator[bytes]:
        yield _events(" first")[: -len(b"data: [DONE]\n\n")]
        await asyncio.sleep(30)  # far past the probe's timeout
        yield b"data: [DONE]\n\n"

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=trickle())

    r = _run(_mock(handler), _req(), timeout=0.3)
    assert r.error_kind == "timeout" and r.timed_out
    assert r.ttft is not None and r.total < 5  # the first token came; the rest did not


def test_nothing_listening_is_refused_and_a_password_never_shown() -> None:
    port = free_port()
    url = f"http://user:pw-{TOKEN}@127.0.0.1:{port}/v1/completions"
    r = _run(httpx.AsyncClient(), _req(url=url))
    assert r.error_kind == "refused" and not r.ok
    assert TOKEN not in (r.error or "")


@pytest.fixture
def sim() -> Iterator[tuple[str, str]]:
    server, _thread, url = start_server("healthy", port=0)
    model = server.fleet._slot(0).engine.model_label.decode().split('"')[1]
    yield url, model
    server.shutdown()
    server.server_close()


def test_a_real_connection_is_timed_in_its_phases(sim: tuple[str, str]) -> None:
    url, model = sim
    req = build_request("openai_completions", url + "/v1/completions", model, "hi", max_tokens=5)
    client = httpx.AsyncClient(limits=httpx.Limits(max_keepalive_connections=0))
    r = _run(client, req, timeout=30)
    assert r.ok and r.tokens == 5 and len(r.gaps) >= 1
    assert r.connect is not None and r.ttfb is not None and r.ttft is not None
    assert 0 < r.connect <= r.ttft <= r.total
    assert r.ttfb <= r.ttft
    assert r.server is not None and r.server.ttft is not None
    assert r.ttft >= r.server.ttft  # the client waits at least what the server reports


def test_the_probes_timeout_not_the_clients_default_bounds_the_answer() -> None:
    """A slow first token (an Ollama model loading) is waited for up to the probe's own
    timeout, whatever the client's default per-step timeout."""
    server, _thread, url = start_server(
        "healthy", port=0, overrides={"faults.frontend_delay_s": 0.3}
    )
    model = server.fleet._slot(0).engine.model_label.decode().split('"')[1]
    try:
        req = build_request("ollama_generate", url + "/api/generate", model, "hi", max_tokens=2)
        r = _run(httpx.AsyncClient(timeout=0.05), req, timeout=10)
    finally:
        server.shutdown()
        server.server_close()
    assert r.ok, r.error
    assert r.ttft is not None and r.ttft >= 0.3
