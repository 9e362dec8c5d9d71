"""A probe's streamed answer, read as it arrives: when each output token came, and what
the server said of its own timings.

Two wire formats, fed in chunks with their arrival times (:class:`AnswerReader`):

* **OpenAI-compatible server-sent events** (``/v1/completions``,
  ``/v1/chat/completions``): ``data: {json}`` lines, ``data: [DONE]`` at the end, ``:``
  comments (keep-alives) and ``event:``/``id:`` lines ignored. An output event is a
  chunk whose first choice carries text (``text``; chat: ``delta.content``, or the
  reasoning text of a reasoning model): the first one is the client's time to first
  token. ``usage`` (asked for with ``stream_options.include_usage``) gives the token
  counts; vLLM's per-request ``metrics`` (``--enable-per-request-metrics``, on the last
  chunk) give the server's own timings: its TTFT for this request is
  ``queue_time_ms + time_to_first_token_ms`` (vLLM times the first token from the
  request's scheduling, after its queueing), prefill is ``time_to_first_token_ms``,
  decode is ``generation_time_ms`` (first to last token) for ``completion_tokens − 1``
  tokens.
* **Ollama's newline-delimited JSON** (``/api/generate``; also its single object with
  ``"stream": false``): an output event is an object with a non-empty ``response`` (or
  ``thinking``); the last has ``"done": true`` and the counters, durations in
  nanoseconds: prefill is ``prompt_eval_count`` tokens in ``prompt_eval_duration``,
  decode ``eval_count`` tokens in ``eval_duration``, and the server's own time before
  it generated is ``total_duration − eval_duration`` (loading the model, waiting,
  evaluating the prompt).

Edge cases: a line cut across chunks is joined before it is read; a line that is not
JSON is counted (``bad_lines``), not fatal; an ``error`` object in the stream (Ollama
and vLLM both send one once the status line is out) ends the answer as
``stream_error``; an answer without its end marker is ``truncated``; one with no output
event is ``no_tokens``; one with nothing readable at all is ``bad_stream``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["Answer", "AnswerReader", "ServerTimings"]

MAX_LINE = 1_000_000  # a longer line is no probe answer (the body's own cap is the caller's)


@dataclass(frozen=True, slots=True)
class ServerTimings:
    """What the server reported of its own work on this request, seconds and tokens;
    None where it did not say."""

    ttft: float | None = None
    prefill_s: float | None = None
    prefill_tokens: int | None = None
    decode_s: float | None = None
    decode_tokens: int | None = None
    load_s: float | None = None


@dataclass(frozen=True, slots=True)
class Answer:
    """A probe's answer as read: output event times (the caller's clock), counts, the
    server's timings, and what went wrong (``error_kind``: ``stream_error``,
    ``truncated``, ``no_tokens``, ``bad_stream``; None when the answer is whole)."""

    token_times: tuple[float, ...]
    completion_tokens: int | None
    prompt_tokens: int | None
    server: ServerTimings | None
    done: bool
    bad_lines: int
    error_kind: str | None
    error: str | None

    @property
    def tokens(self) -> int:
        """Output tokens: the server's count when it gave one, else the output events."""
        if self.completion_tokens is not None and self.completion_tokens >= len(self.token_times):
            return self.completion_tokens
        return len(self.token_times)


def _num(obj: Any, key: str) -> float | None:
    value = obj.get(key) if isinstance(obj, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value >= 0 else None


def _int(obj: Any, key: str) -> int | None:
    value = _num(obj, key)
    return None if value is None else int(value)


class AnswerReader:
    """Reads one answer of one wire format (``openai`` or ``ollama``), chunk by chunk."""

    def __init__(self, wire: str, *, chat: bool = False) -> None:
        if wire not in ("openai", "ollama"):
            raise ValueError(f"unknown wire format {wire!r}")
        self.wire = wire
        self.chat = chat
        self._buf = b""
        self._times: list[float] = []
        self._usage: dict[str, Any] = {}
        self._metrics: dict[str, Any] = {}
        self._final: dict[str, Any] = {}
        self._done = False
        self._read = 0
        self._bad = 0
        self._error: str | None = None

    @property
    def finished(self) -> bool:
        """The end marker or an error came: nothing after it counts."""
        return self._done or self._error is not None

    def feed(self, t: float, chunk: bytes) -> None:
        """Read the complete lines of ``chunk`` (arrived at ``t``); keep a cut one."""
        self._buf += chunk
        *lines, self._buf = self._buf.split(b"\n")
        if len(self._buf) > MAX_LINE:
            self._bad += 1
            self._buf = b""
        for line in lines:
            if self.finished:
                return
            self._line(t, line.strip())

    def close(self, t: float) -> Answer:
        """The answer once the body ended (``t``); a last line without newline is read."""
        if self._buf.strip() and not self.finished:
            self._line(t, self._buf.strip())
        self._buf = b""
        return self._answer()

    def _line(self, t: float, line: bytes) -> None:
        if not line:
            return
        if self.wire == "openai":
            if line.startswith(b":") or not line.startswith(b"data:"):
                return  # an SSE comment (keep-alive), event:, id: or retry: line
            line = line[5:].strip()
            if line == b"[DONE]":
                self._done = True
                self._read += 1
                return
        try:
            obj = json.loads(line)
        except ValueError:
            self._bad += 1
            return
        if not isinstance(obj, dict):
            self._bad += 1
            return
        self._read += 1
        if "error" in obj:
            err = obj["error"]
            text = err.get("message") if isinstance(err, dict) else err
            self._error = str(text or "error")[:300]
            return
        if self.wire == "openai":
            self._openai(t, obj)
        else:
            self._ollama(t, obj)

    def _openai(self, t: float, obj: dict[str, Any]) -> None:
        choices = obj.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            first = choices[0]
            if self.chat:
                delta = first.get("delta")
                if not isinstance(delta, dict):
                    delta = {}
                parts = [delta.get(k) for k in ("content", "reasoning_content", "reasoning")]
            else:
                parts = [first.get("text")]
            if any(isinstance(p, str) and p for p in parts):
                self._times.append(t)
        if isinstance(obj.get("usage"), dict):
            self._usage = obj["usage"]
        if isinstance(obj.get("metrics"), dict):
            self._metrics = obj["metrics"]

    def _ollama(self, t: float, obj: dict[str, Any]) -> None:
        text = [obj.get("response"), obj.get("thinking")]
        if any(isinstance(p, str) and p for p in text):
            self._times.append(t)
        if obj.get("done") is True:
            self._final = obj
            self._done = True

    def _server(self) -> ServerTimings | None:
        if self.wire == "ollama":
            f = self._final
            total, evald = _num(f, "total_duration"), _num(f, "eval_duration")
            prompt_d, load = _num(f, "prompt_eval_duration"), _num(f, "load_duration")
            if total is None and evald is None and prompt_d is None:
                return None
            return ServerTimings(
                ttft=None if total is None or evald is None else max(0.0, total - evald) / 1e9,
                prefill_s=None if prompt_d is None else prompt_d / 1e9,
                prefill_tokens=_int(f, "prompt_eval_count"),
                decode_s=None if evald is None else evald / 1e9,
                decode_tokens=_int(f, "eval_count"),
                load_s=None if load is None else load / 1e9,
            )
        m = self._metrics
        first, queue = _num(m, "time_to_first_token_ms"), _num(m, "queue_time_ms")
        gen = _num(m, "generation_time_ms")
        if first is None and gen is None:
            return None
        out_tokens = _int(self._usage, "completion_tokens")
        return ServerTimings(
            ttft=None if first is None or queue is None else (first + queue) / 1000.0,
            prefill_s=None if first is None else first / 1000.0,
            prefill_tokens=_int(self._usage, "prompt_tokens"),
            decode_s=None if gen is None else gen / 1000.0,
            decode_tokens=None if out_tokens is None else max(0, out_tokens - 1),
        )

    def _answer(self) -> Answer:
        if self.wire == "ollama":
            completion = _int(self._final, "eval_count")
            prompt = _int(self._final, "prompt_eval_count")
        else:
            completion = _int(self._usage, "completion_tokens")
            prompt = _int(self._usage, "prompt_tokens")
        kind: str | None = None
        error = self._error
        if error is not None:
            kind = "stream_error"
        elif self._read == 0:
            kind, error = "bad_stream", "no readable event in the answer"
        elif not self._done:
            kind, error = "truncated", "the answer ended before its end marker"
        elif not self._times:
            kind, error = "no_tokens", "the answer carried no output token"
        return Answer(
            token_times=tuple(self._times),
            completion_tokens=completion,
            prompt_tokens=prompt,
            server=self._server(),
            done=self._done,
            bad_lines=self._bad,
            error_kind=kind,
            error=error,
        )
