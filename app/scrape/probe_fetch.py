"""Send one probe request and time its answer as a client sees it.

The request is one POST of a small JSON body; the answer is streamed and read as it
arrives (:mod:`app.scrape.probe_parse`). Times, from the moment the request starts
(``perf_counter``, so a clock step cannot bend them):

* ``connect`` — the TCP connection (and TLS handshake) alone; the probes' client keeps no
  connection alive, so every probe pays it as a new user does (None when the transport
  reports no connection, as a test transport does);
* ``ttfb`` — the request's first byte sent to the answer's status line and headers
  received (curl's ``time_starttransfer − time_pretransfer``); without a connection
  report, from the start;
* ``ttft`` — the client's time to first token: the start to the first output event,
  connection and all (what the user waits);
* ``gaps`` — between consecutive output events; ``total`` — the start to the end.

Nothing here raises for a bad server: every outcome is a :class:`ProbeResult` whose
``error_kind`` is one of the scrape's (``refused``, ``connect``, ``timeout``,
``http_status`` — a redirect too: none is followed —, ``too_large``, ``truncated``,
``other``) or the answer's (``stream_error``, ``no_tokens``, ``bad_stream``). The body
is capped like a scrape's. Messages are shown and stored: a URL's password never
appears in them, and neither does anything the request sent (headers, token).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from app.model import ErrorKind
from app.redact import redact_url
from app.scrape.client import _connect_kind
from app.scrape.probe_parse import Answer, AnswerReader, ServerTimings

__all__ = ["ProbeRequest", "ProbeResult", "build_request", "send_probe"]

_ERROR_BODY = 4096  # of an error answer, read for its message


@dataclass(frozen=True, slots=True)
class ProbeRequest:
    """What one probe sends: where, the JSON body, its headers, and the answer's format
    (``openai``/``ollama``; ``chat`` for chat deltas)."""

    url: str
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    wire: str = "openai"
    chat: bool = False


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """One probe's measurement (module docstring), seconds; ``started`` in Unix seconds.

    ``tokens`` are the output tokens (the server's count when it gave one, else the
    output events); ``server`` what the server reported of its own timings.
    """

    started: float
    total: float
    ok: bool = False
    error_kind: str | None = None
    error: str | None = None
    status: int | None = None
    nbytes: int = 0
    connect: float | None = None
    ttfb: float | None = None
    ttft: float | None = None
    gaps: tuple[float, ...] = ()
    tokens: int = 0
    prompt_tokens: int | None = None
    server: ServerTimings | None = None

    @property
    def decode_s(self) -> float | None:
        """First output event to last: the client's decode time (None with < 2 events)."""
        return sum(self.gaps) if self.gaps else None

    @property
    def decode_tokens_per_s(self) -> float | None:
        """Output tokens after the first over the client's decode time."""
        d = self.decode_s
        return (self.tokens - 1) / d if d and self.tokens > 1 else None

    @property
    def timed_out(self) -> bool:
        return self.error_kind == ErrorKind.TIMEOUT.value


def build_request(
    kind: str,
    url: str,
    model: str,
    prompt: str,
    *,
    max_tokens: int,
    ignore_eos: bool = False,
    headers: dict[str, str] | None = None,
) -> ProbeRequest:
    """The request of one probe kind: a streamed completion (``openai_completions``), chat
    completion (``openai_chat``) or Ollama generate (``ollama_generate``) of ``prompt``.

    OpenAI-compatible requests ask for the usage on the last chunk
    (``stream_options.include_usage``), which is where vLLM puts its per-request metrics;
    ``ignore_eos`` (vLLM's own field, which other servers may refuse) makes every answer
    ``max_tokens`` long. Ollama's length is ``options.num_predict``.
    """
    if kind == "ollama_generate":
        body: dict[str, Any] = {
            "model": model,
            "prompt": prompt,
            "stream": True,
            "options": {"num_predict": max_tokens},
        }
        return ProbeRequest(url, body, dict(headers or {}), wire="ollama")
    body = {
        "model": model,
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if ignore_eos:
        body["ignore_eos"] = True
    chat = kind == "openai_chat"
    if chat:
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return ProbeRequest(url, body, dict(headers or {}), wire="openai", chat=chat)


class _Clock:
    """The request's milestones (``perf_counter``), from httpx's trace events."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.connect_start: float | None = None
        self.connected: float | None = None
        self.sent: float | None = None
        self.headers: float | None = None

    async def trace(self, name: str, info: dict[str, Any]) -> None:
        now = time.perf_counter()
        if name == "connection.connect_tcp.started":
            self.connect_start = now
        elif name in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            self.connected = now
        elif name.endswith(".send_request_headers.started") and self.sent is None:
            self.sent = now
        elif name.endswith(".receive_response_headers.complete"):
            self.headers = now


async def send_probe(
    client: httpx.AsyncClient, req: ProbeRequest, *, timeout: float, max_bytes: int
) -> ProbeResult:
    """Send ``req`` and time the answer within ``timeout`` seconds for the whole of it.

    httpx's own timeout restarts with every read, so a server that trickles tokens would
    hold the probe past ``timeout``: the whole exchange is bounded here.
    """
    started = time.time()
    clock = _Clock()
    reader = AnswerReader(req.wire, chat=req.chat)
    state: dict[str, Any] = {"status": None, "nbytes": 0, "headers_at": None}

    def result(kind: str | None, error: str | None, answer: Answer | None = None) -> ProbeResult:
        now = time.perf_counter()
        headers_at = clock.headers if clock.headers is not None else state["headers_at"]
        sent = clock.sent if clock.sent is not None else clock.t0
        times = answer.token_times if answer is not None else ()
        connect = None
        if clock.connect_start is not None and clock.connected is not None:
            connect = clock.connected - clock.connect_start
        return ProbeResult(
            started=started,
            total=now - clock.t0,
            ok=kind is None,
            error_kind=kind,
            error=None if error is None else redact_url(error)[:300],
            status=state["status"],
            nbytes=state["nbytes"],
            connect=connect,
            ttfb=None if headers_at is None else headers_at - sent,
            ttft=times[0] - clock.t0 if times else None,
            gaps=tuple(b - a for a, b in zip(times, times[1:], strict=False)),
            tokens=0 if answer is None else answer.tokens,
            prompt_tokens=None if answer is None else answer.prompt_tokens,
            server=None if answer is None else answer.server,
        )

    try:
        async with asyncio.timeout(timeout):
            return await _exchange(client, req, clock, reader, state, timeout, max_bytes, result)
    except TimeoutError:
        return result(
            ErrorKind.TIMEOUT.value,
            f"no complete answer within {timeout:g} s",
            reader.close(time.perf_counter()),
        )


async def _exchange(
    client: httpx.AsyncClient,
    req: ProbeRequest,
    clock: _Clock,
    reader: AnswerReader,
    state: dict[str, Any],
    timeout: float,
    max_bytes: int,
    result: Callable[..., ProbeResult],
) -> ProbeResult:
    headers = {"Content-Type": "application/json", **req.headers}
    body = json.dumps(req.body).encode()
    try:
        async with client.stream(
            "POST",
            req.url,
            content=body,
            headers=headers,
            timeout=timeout,  # httpx's per-step bound; the whole is bounded above
            extensions={"trace": clock.trace},
        ) as resp:
            state["headers_at"] = time.perf_counter()
            state["status"] = resp.status_code
            if not 200 <= resp.status_code < 300:
                return result(ErrorKind.HTTP_STATUS.value, await _status_text(resp))
            try:
                async for chunk in resp.aiter_bytes():
                    now = time.perf_counter()
                    state["nbytes"] += len(chunk)
                    if state["nbytes"] > max_bytes:
                        return result(
                            ErrorKind.TOO_LARGE.value,
                            f"answer exceeds the {max_bytes}-byte cap",
                            reader.close(now),
                        )
                    reader.feed(now, chunk)
                    if reader.finished:
                        break  # the end marker came: a keep-alive tail is not the answer
            except httpx.RemoteProtocolError as exc:
                answer = reader.close(time.perf_counter())
                return result(ErrorKind.TRUNCATED.value, f"the answer ended early: {exc}", answer)
            answer = reader.close(time.perf_counter())
            return result(answer.error_kind, answer.error, answer)
    except httpx.TimeoutException:
        raise TimeoutError from None
    except httpx.ConnectError as exc:
        kind = _connect_kind(exc)
        msg = "connection refused" if kind is ErrorKind.REFUSED else f"cannot connect: {exc}"
        return result(kind.value, msg)
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        return result(ErrorKind.OTHER.value, f"{type(exc).__name__}: {exc}")


async def _status_text(resp: httpx.Response) -> str:
    """``HTTP 404: model 'x' not found``: the status and the server's own message, if it
    gave one in JSON (vLLM's ``message``, Ollama's ``error``) within its first 4 KiB."""
    text = f"HTTP {resp.status_code}"
    if 300 <= resp.status_code < 400:
        return text + " (a redirect: probes follow none)"
    data = b""
    try:
        async for chunk in resp.aiter_bytes():
            data += chunk
            if len(data) >= _ERROR_BODY:
                break
        obj = json.loads(data[:_ERROR_BODY])
    except (httpx.HTTPError, ValueError):
        return text
    message = obj.get("message") or obj.get("error") if isinstance(obj, dict) else None
    if isinstance(message, dict):
        message = message.get("message")
    return f"{text}: {message}"[:300] if isinstance(message, str) and message else text
