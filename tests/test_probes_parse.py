"""A probe's answer is read as it arrives: Ollama's documented bodies (tests/fixtures/ollama)
and vLLM's server-sent events, cut anywhere, give the same tokens and timings."""

from __future__ import annotations

import json

import pytest

from app.scrape.probe_parse import AnswerReader
from tests.fixtures_path import FIXTURES

OLLAMA = FIXTURES / "ollama"


def _read(wire: str, lines: list[bytes], *, chat: bool = False, step: float = 0.01):
    """Feed one line per ``step`` seconds (each line arriving at its own time)."""
    reader = AnswerReader(wire, chat=chat)
    t = 0.0
    for line in lines:
        t += step
        reader.feed(t, line)
    return reader.close(t + step)


def _sse(*objs: object, done: bool = True) -> list[bytes]:
    out = [b"data: " + json.dumps(o).encode() + b"\n\n" for o in objs]
    return out + ([b"data: [DONE]\n\n"] if done else [])


def _chunk(text: str, **extra: object) -> dict[str, object]:
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": None}
    return {"id": "cmpl-1", "object": "text_completion", "model": "m", "choices": [choice], **extra}


def test_ollama_documented_stream_gives_its_counters_and_the_servers_own_ttft() -> None:
    lines = (OLLAMA / "generate_stream.ndjson").read_bytes().splitlines(keepends=True)
    a = _read("ollama", lines)
    assert a.error_kind is None and a.done
    assert a.token_times == (0.01,)  # "The"; the final object's response is empty
    assert a.completion_tokens == 259 and a.prompt_tokens == 26
    s = a.server
    assert s is not None
    assert s.prefill_tokens == 26 and s.prefill_s == pytest.approx(0.130079)
    assert s.decode_tokens == 259 and s.decode_s == pytest.approx(4.23271)
    assert s.load_s == pytest.approx(6.338219291)
    # total − eval: loading, waiting and prompt evaluation, before it generated.
    assert s.ttft == pytest.approx((10706818083 - 4232710000) / 1e9)
    # The docs' own formula: eval_count / eval_duration × 1e9 tokens per second.
    assert s.decode_tokens / s.decode_s == pytest.approx(259 / 4232710000 * 1e9)


def test_ollama_documented_single_object_answer() -> None:
    body = (OLLAMA / "generate_nostream.json").read_bytes()
    a = _read("ollama", [body.replace(b"\n", b" ") + b"\n"])
    assert a.error_kind is None and len(a.token_times) == 1
    assert a.tokens == 290 and a.server is not None and a.server.prefill_tokens == 26


def test_ollama_documented_stream_counts_each_output_event() -> None:
    lines = (OLLAMA / "streaming.ndjson").read_bytes().splitlines(keepends=True)
    a = _read("ollama", lines)
    assert a.error_kind is None and len(a.token_times) == 7
    assert a.server is None  # this example carries no counters
    assert a.tokens == 7


def test_ollama_documented_error_mid_stream_is_a_stream_error() -> None:
    lines = (OLLAMA / "stream_error.ndjson").read_bytes().splitlines(keepends=True)
    a = _read("ollama", lines)
    assert a.error_kind == "stream_error"
    assert a.error == "an error was encountered while running the model"
    assert len(a.token_times) == 4


def test_ollama_documented_error_body_is_read_as_a_stream_error() -> None:
    body = (OLLAMA / "error.json").read_bytes().replace(b"\n", b"")
    a = _read("ollama", [body])
    assert a.error_kind == "stream_error"
    assert a.error == "the model failed to generate a response"


def test_vllm_completion_events_with_usage_and_per_request_metrics() -> None:
    metrics = {
        "time_to_first_token_ms": 40.0,
        "generation_time_ms": 300.0,
        "queue_time_ms": 10.0,
        "mean_itl_ms": 20.0,
        "tokens_per_second": 47.0,
    }
    last = {**_chunk(""), "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 16}}
    lines = _sse(_chunk(" a"), _chunk(" b"), _chunk(" c"), {**last, "metrics": metrics})
    a = _read("openai", lines)
    assert a.error_kind is None and a.token_times == (0.01, 0.02, 0.03)
    assert a.tokens == 16 and a.prompt_tokens == 9
    s = a.server
    assert s is not None
    # vLLM times the first token from scheduling: its TTFT is queue + that.
    assert s.ttft == pytest.approx(0.05) and s.prefill_s == pytest.approx(0.04)
    assert s.decode_s == pytest.approx(0.3) and s.decode_tokens == 15


def test_chat_role_chunk_is_no_token_and_reasoning_text_is() -> None:
    role = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
    think = {"choices": [{"index": 0, "delta": {"reasoning_content": "hmm"}}]}
    text = {"choices": [{"index": 0, "delta": {"content": "Hi"}}]}
    a = _read("openai", _sse(role, think, text), chat=True)
    assert a.token_times == (0.02, 0.03) and a.server is None


def test_a_line_cut_across_chunks_is_read_once_whole() -> None:
    body = b"".join(_sse(_chunk(" x"), _chunk(" y")))
    whole = _read("openai", [body])
    for cut in range(1, len(body)):
        reader = AnswerReader("openai")
        reader.feed(1.0, body[:cut])
        reader.feed(2.0, body[cut:])
        a = reader.close(3.0)
        assert len(a.token_times) == 2 and a.error_kind is None, cut
    assert whole.tokens == 2


def test_comments_and_other_sse_fields_are_ignored() -> None:
    lines = [b": keep-alive\n\n", b"event: message\n", b"id: 7\n", *_sse(_chunk(" z"))]
    a = _read("openai", lines)
    assert a.error_kind is None and len(a.token_times) == 1 and a.bad_lines == 0


@pytest.mark.parametrize(
    ("lines", "kind"),
    [
        (_sse(_chunk(" a"), done=False), "truncated"),
        (_sse(_chunk("")), "no_tokens"),
        ([b"<html>502 Bad Gateway</html>\n"], "bad_stream"),
        (_sse({"object": "error", "error": {"message": "boom"}}), "stream_error"),
    ],
)
def test_what_went_wrong_is_named(lines: list[bytes], kind: str) -> None:
    assert _read("openai", lines).error_kind == kind


def test_nothing_after_the_end_marker_counts() -> None:
    lines = [*_sse(_chunk(" a")), *_sse(_chunk(" late"), done=False)]
    a = _read("openai", lines)
    assert len(a.token_times) == 1


def test_unknown_wire_format_is_refused() -> None:
    with pytest.raises(ValueError, match="wire format"):
        AnswerReader("grpc")
