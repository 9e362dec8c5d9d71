"""Answer streaming completions as vLLM's and Ollama's API servers do, timed by the engine.

Routes (``/replica/{i}/…`` for replica i; the bare paths with one replica)::

    POST /v1/completions        vLLM's OpenAI-compatible completions, server-sent events
    POST /v1/chat/completions   the same for chat: a role chunk, then content deltas
    POST /api/generate          Ollama's generate: newline-delimited JSON

A request is submitted to the replica's engine (``Replica.submit``) and its tokens are
streamed as the engine produces them: the answer polls the engine when its next step
ends, so the gaps a client measures are the engine's step times. The prompt is counted
as 4/3 tokens a word (a chat message adds 4 for its template); the answer has exactly
``max_tokens`` tokens (default 16), capped by ``max_model_len``.

What the answer reports of the engine's own timings (wall seconds: sim seconds /
``speed``):

* vLLM's per-request ``metrics`` (``--enable-per-request-metrics``) on the usage chunk
  (sent when ``stream_options.include_usage`` is true): ``queue_time_ms`` (arrival at
  the engine to scheduling), ``time_to_first_token_ms`` (scheduling to first token, as
  vLLM counts it), ``generation_time_ms`` (first to last token), ``mean_itl_ms``,
  ``tokens_per_second``; off with ``Fleet(per_request_metrics=False)``;
* Ollama's last object: ``total_duration`` (arrival at the engine to the last token),
  ``load_duration`` (arrival to scheduling: the simulator loads no model, it queues),
  ``prompt_eval_count``/``prompt_eval_duration`` (scheduling to first token),
  ``eval_count`` (the tokens) and ``eval_duration`` (first to last token), nanoseconds.

``faults.frontend_delay_s`` (of the scenario's current phase) holds every request that
long (sim seconds) before its answer starts and before it reaches the engine, as a slow
proxy, network or tokeniser would: clients see it, the engine's timings and ``/metrics``
do not. A request for another model is answered 404 as each server does; a body that is
not JSON, or over 1 MiB, 400 or 413.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any, Protocol

from app.sim.engine import Replica
from app.sim.scheduler import Request

__all__ = ["ROUTES", "answer"]

ROUTES = {
    "/v1/completions": "completions",
    "/v1/chat/completions": "chat",
    "/api/generate": "ollama",
}
MAX_BODY = 1 << 20
MAX_ANSWER_S = 900.0  # a request still unanswered then is dropped (a hung engine)
KEEP_ALIVE_S = 2.0  # with no token for this long, a keep-alive line finds a gone client
DEFAULT_MAX_TOKENS = 16
_WORDS = ("the", "sky", "is", "blue", "because", "light", "scatters", "in", "air", "and")


class Engine(Protocol):
    """What an answer needs of a served engine (``app.sim.server``'s ``_Engine``)."""

    replica: Replica

    @property
    def lock(self) -> Any: ...


class Clock(Protocol):
    """The fleet's clock: sim time now, its start in Unix seconds, sim seconds a second."""

    start_unix: float
    speed: float
    per_request_metrics: bool

    def sim_time(self) -> float: ...


class Writer(Protocol):
    """The handler's side of the connection."""

    def send_response(self, code: int, message: str | None = None) -> None: ...
    def send_header(self, keyword: str, value: str) -> None: ...
    def end_headers(self) -> None: ...

    @property
    def wfile(self) -> Any: ...

    @property
    def rfile(self) -> Any: ...

    @property
    def headers(self) -> Any: ...


def _tokens(text: str) -> int:
    return max(1, round(len(text.split()) * 4 / 3))


def _prompt_len(kind: str, body: dict[str, Any]) -> int | None:
    if kind == "chat":
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return None
        return sum(
            4 + _tokens(str(m.get("content") or "")) for m in messages if isinstance(m, dict)
        )
    prompt = body.get("prompt")
    return _tokens(prompt) if isinstance(prompt, str) and prompt else None


def _error(h: Writer, code: int, kind: str, message: str) -> None:
    if kind == "ollama":
        obj: dict[str, Any] = {"error": message}
    else:
        obj = {"object": "error", "message": message, "type": "BadRequestError", "code": code}
    data = json.dumps(obj).encode()
    h.send_response(code)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(data)))
    h.end_headers()
    h.wfile.write(data)


def _read_body(h: Writer, kind: str) -> dict[str, Any] | None:
    """The request's JSON object, or None after answering 4xx."""
    try:
        size = int(h.headers.get("Content-Length") or "-1")
    except ValueError:
        size = -1
    if size < 0 or size > MAX_BODY:
        _error(h, 413 if size > MAX_BODY else 411, kind, "a body of at most 1 MiB is needed")
        return None
    try:
        body = json.loads(h.rfile.read(size))
    except ValueError:
        body = None
    if not isinstance(body, dict):
        _error(h, 400, kind, "the body is not a JSON object")
        return None
    return body


def answer(h: Writer, engine: Engine, clock: Clock, kind: str, model_name: str) -> None:
    """Answer one request for route ``kind`` (``ROUTES``) on ``engine`` (module docstring)."""
    body = _read_body(h, kind)
    if body is None:
        return
    if body.get("model") != model_name:
        what = f"model '{body.get('model')}' not found"
        if kind != "ollama":
            what = f"The model `{body.get('model')}` does not exist."
        return _error(h, 404, kind, what)
    prompt = _prompt_len(kind, body)
    if prompt is None:
        return _error(h, 400, kind, "a prompt (or chat messages) is needed")
    opts = body.get("options")
    if kind == "ollama":
        asked = opts.get("num_predict") if isinstance(opts, dict) else None
    else:
        asked = body.get("max_tokens")
    max_tokens = asked if isinstance(asked, int) and asked > 0 else DEFAULT_MAX_TOKENS
    with engine.lock:
        replica = engine.replica
        replica.advance_to(clock.sim_time())
        delay = replica.cfg.faults.frontend_delay_s
        max_len = replica.cfg.engine.max_model_len
    prompt = min(prompt, max_len - 1)
    out = max(1, min(max_tokens, max_len - prompt))
    if delay > 0:
        time.sleep(delay / clock.speed)  # in front of the engine: a proxy, a tokeniser
    h.send_response(200)
    ctype = "application/x-ndjson" if kind == "ollama" else "text/event-stream"
    h.send_header("Content-Type", ctype)
    h.send_header("Transfer-Encoding", "chunked")
    h.end_headers()
    with engine.lock:
        now = clock.sim_time()
        replica.advance_to(now)
        req = replica.submit(prompt, out, out, at=now)
    stream = _Stream(h, kind, model_name, body)
    try:
        _stream_tokens(stream, engine, clock, req)
        stream.finish(req, prompt, clock)
    except (BrokenPipeError, ConnectionResetError):
        return  # the client went away (a probe that timed out)


def _stream_tokens(stream: _Stream, engine: Engine, clock: Clock, req: Request) -> None:
    """Write each token as the engine produces it, until the request is done."""
    sent = 0
    deadline = time.monotonic() + MAX_ANSWER_S
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        with engine.lock:
            engine.replica.advance_to(clock.sim_time())
            produced, done, step_end = req.nout, req.done, engine.replica.pending_end
        if produced > sent:
            stream.tokens(sent, produced - sent)
            sent = produced
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since > KEEP_ALIVE_S:
            stream.keep_alive()
            quiet_since = time.monotonic()
        if done:
            return
        wait = 0.005
        if step_end >= 0:  # sleep until the engine's step in flight ends
            wait = clock.start_unix + step_end / clock.speed - time.time()
        time.sleep(min(0.05, max(0.0005, wait)))


class _Stream:
    """The answer's wire format: vLLM's server-sent events or Ollama's JSON lines, each
    write one HTTP chunk."""

    def __init__(self, h: Writer, kind: str, model: str, body: dict[str, Any]) -> None:
        self.h = h
        self.kind = kind
        self.model = model
        self.created = int(time.time())
        self.id = f"cmpl-sim{time.monotonic_ns():x}"
        options = body.get("stream_options")
        self.usage = isinstance(options, dict) and options.get("include_usage") is True

    def _write(self, data: bytes) -> None:
        self.h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.h.wfile.flush()

    def _event(self, obj: dict[str, Any]) -> None:
        if self.kind == "ollama":
            self._write(json.dumps(obj).encode() + b"\n")
        else:
            self._write(b"data: " + json.dumps(obj).encode() + b"\n\n")

    def _chunk(self, choice: dict[str, Any]) -> dict[str, Any]:
        obj = "chat.completion.chunk" if self.kind == "chat" else "text_completion"
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model,
                "choices": [{"index": 0, **choice}]}  # fmt: skip

    def _ollama(self, **fields: Any) -> dict[str, Any]:
        now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        return {"model": self.model, "created_at": now, **fields}

    def tokens(self, first: int, n: int) -> None:
        """Tokens ``first`` … ``first + n − 1`` as one output event (several when a step
        yields several, as with speculative decoding)."""
        text = "".join(" " + _WORDS[(first + i) % len(_WORDS)] for i in range(n))
        if self.kind == "ollama":
            return self._event(self._ollama(response=text, done=False))
        if self.kind == "chat":
            if first == 0:
                role = {"role": "assistant", "content": ""}
                self._event(self._chunk({"delta": role, "logprobs": None, "finish_reason": None}))
            choice: dict[str, Any] = {"delta": {"content": text}}
        else:
            choice = {"text": text}
        self._event(self._chunk({**choice, "logprobs": None, "finish_reason": None}))

    def keep_alive(self) -> None:
        self._write(b"\n" if self.kind == "ollama" else b": keep-alive\n\n")

    def finish(self, req: Request, prompt: int, clock: Clock) -> None:
        """The last events (finish reason, usage and timings) and the end of the body."""
        s = 1.0 / clock.speed  # sim seconds → wall seconds
        queue = (req.first_sched - req.arrival) * s
        prefill = (req.first_token - req.first_sched) * s
        decode = (req.last_token - req.first_token) * s
        n = req.nout
        if self.kind == "ollama":
            ns = 1e9
            self._event(
                self._ollama(
                    response="",
                    done=True,
                    done_reason=req.reason,
                    total_duration=round((queue + prefill + decode) * ns),
                    load_duration=round(queue * ns),
                    prompt_eval_count=prompt,
                    prompt_eval_duration=round(prefill * ns),
                    eval_count=n,
                    eval_duration=round(decode * ns),
                )
            )
        else:
            end: dict[str, Any] = {"delta": {}} if self.kind == "chat" else {"text": ""}
            self._event(self._chunk({**end, "logprobs": None, "finish_reason": req.reason}))
            if self.usage:
                last = {**self._chunk({}), "choices": []}
                last["usage"] = {"prompt_tokens": prompt, "completion_tokens": n,
                                 "total_tokens": prompt + n}  # fmt: skip
                if clock.per_request_metrics:
                    last["metrics"] = {
                        "time_to_first_token_ms": prefill * 1000,
                        "generation_time_ms": decode * 1000,
                        "queue_time_ms": queue * 1000,
                        "mean_itl_ms": decode * 1000 / (n - 1) if n > 1 else None,
                        "tokens_per_second": n / (prefill + decode) if prefill + decode else None,
                    }
                self._event(last)
            self._write(b"data: [DONE]\n\n")
        self._write(b"")  # the last chunk: the body is complete
