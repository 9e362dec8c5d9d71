"""The simulator answers streaming completions like vLLM and Ollama, timed by its engine;
a frontend delay is seen by clients only; the truth says what a client sees."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.scrape.probe_fetch import ProbeResult, build_request, send_probe
from app.sim.record import record
from app.sim.server import SimHTTPServer, start_server
from app.sim.truth import window_client_truth, window_truth

ROOT = Path(__file__).resolve().parents[1]


def _model(server: SimHTTPServer, i: int = 0) -> str:
    slot = server.fleet._slot(i)
    return (slot.model_label or slot.engine.model_label).decode().split('"')[1]


@pytest.fixture
def sim(request: pytest.FixtureRequest) -> Iterator[tuple[SimHTTPServer, str]]:
    kwargs = getattr(request, "param", {})
    server, _thread, url = start_server("healthy", port=0, **kwargs)
    yield server, url
    server.shutdown()
    server.server_close()


def _probe(
    url: str, kind: str, model: str, *, max_tokens: int = 8, timeout: float = 30
) -> ProbeResult:
    path = {"openai_completions": "/v1/completions", "openai_chat": "/v1/chat/completions"}
    req = build_request(
        kind,
        url + path.get(kind, "/api/generate"),
        model,
        "why is the sky blue",
        max_tokens=max_tokens,
    )

    async def go() -> ProbeResult:
        async with httpx.AsyncClient() as client:
            return await send_probe(client, req, timeout=timeout, max_bytes=1_000_000)

    return asyncio.run(go())


@pytest.mark.parametrize("kind", ["openai_completions", "openai_chat", "ollama_generate"])
def test_each_api_streams_its_tokens_with_the_engines_timings(
    sim: tuple[SimHTTPServer, str], kind: str
) -> None:
    server, url = sim
    r = _probe(url, kind, _model(server), max_tokens=8)
    assert r.ok, r.error
    assert r.tokens == 8 and len(r.gaps) >= 1
    s = r.server
    assert s is not None and s.ttft is not None and r.ttft is not None
    assert 0 < s.ttft <= r.ttft
    assert s.prefill_tokens is not None and s.prefill_tokens > 0
    assert s.decode_s is not None and s.decode_s > 0
    # A step of one stream on the simulated L40S takes ~20 ms; the client sees the same.
    client_tps = r.decode_tokens_per_s
    assert client_tps is not None and 20 < client_tps < 80


def test_a_frontend_delay_is_seen_by_clients_not_by_the_engine() -> None:
    server, _t, url = start_server("healthy", port=0, overrides={"faults.frontend_delay_s": 0.3})
    try:
        r = _probe(url, "openai_completions", _model(server))
        page = httpx.get(url + "/metrics").text
    finally:
        server.shutdown()
        server.server_close()
    assert r.ok and r.ttft is not None and r.server is not None and r.server.ttft is not None
    assert r.ttft - r.server.ttft >= 0.3  # the delay, outside the engine's timings
    assert r.server.ttft < 0.2
    assert r.ttfb is not None and r.ttfb >= 0.3  # the answer starts after the frontend
    assert "vllm:time_to_first_token_seconds" in page


@pytest.mark.parametrize("sim", [{"per_request_metrics": False}], indirect=True)
def test_without_per_request_metrics_vllm_reports_no_timings(
    sim: tuple[SimHTTPServer, str],
) -> None:
    server, url = sim
    r = _probe(url, "openai_completions", _model(server))
    assert r.ok and r.server is None and r.tokens == 8  # usage still counts the tokens


def test_a_wrong_model_or_body_is_answered_as_each_server_does(
    sim: tuple[SimHTTPServer, str],
) -> None:
    _server, url = sim
    r = _probe(url, "openai_completions", "no-such-model")
    assert r.error_kind == "http_status" and r.status == 404
    assert "does not exist" in (r.error or "")
    o = _probe(url, "ollama_generate", "no-such-model")
    assert o.status == 404 and "not found" in (o.error or "")
    bad = httpx.post(url + "/v1/completions", content=b"not json")
    assert bad.status_code == 400
    assert httpx.post(url + "/v1/other", json={}).status_code == 404


def test_replicas_answer_under_their_own_path() -> None:
    server, _t, url = start_server("healthy", port=0, replicas=2, model_per_replica=True)
    try:
        r = _probe(url + "/replica/1", "ollama_generate", _model(server, 1), max_tokens=3)
        bare = httpx.post(url + "/v1/completions", json={"model": _model(server, 0)})
    finally:
        server.shutdown()
        server.server_close()
    assert r.ok and r.tokens == 3
    assert bare.status_code == 404  # several replicas: no bare path


def test_a_hung_engine_takes_the_request_and_never_answers() -> None:
    server, _t, url = start_server("healthy", port=0, overrides={"faults.hang": True})
    try:
        before = httpx.get(url + "/metrics").text
        r = _probe(url, "openai_chat", _model(server), timeout=1.0)
        after = httpx.get(url + "/metrics").text
    finally:
        server.shutdown()
        server.server_close()
    assert r.error_kind == "timeout" and r.ttft is None

    def waiting(page: str) -> str:
        return next(
            line for line in page.splitlines() if line.startswith("vllm:num_requests_waiting{")
        )

    assert waiting(before) == waiting(after)  # a hung core does not read its input


def test_the_truth_says_a_client_sees_the_frontend(tmp_path: Path) -> None:
    scenario = ROOT / "docs" / "scenarios" / "frontend_delay.yaml"
    out = record(str(scenario), tmp_path, duration=420, seed=1)
    rows = [json.loads(line) for line in (Path(out) / "truth.jsonl").read_text().splitlines()]
    t0 = rows[0]["t0"]
    assert window_truth(rows, t0 + 120, t0 + 180).cls == "healthy"
    assert window_client_truth(rows, t0 + 120, t0 + 180) == "healthy"
    # After the delay begins (300 s) the engine stays healthy; a client does not.
    assert window_truth(rows, t0 + 330, t0 + 390).cls == "healthy"
    assert window_client_truth(rows, t0 + 330, t0 + 390) == "frontend_bound"
    assert {r["frontend_delay_s"] for r in rows} == {0.0, 0.5}


def test_the_real_vllm_probe_check_passes_on_the_simulators_imitation() -> None:
    """``make test-vllm``'s probe check (tests/vllm_real/probe_check.py), run here against
    an idle simulator so the script cannot rot between real runs."""
    server, _t, url = start_server("healthy", port=0, overrides={"workload.rate": 0.0})
    try:
        done = subprocess.run(
            [sys.executable, str(ROOT / "tests/vllm_real/probe_check.py"), url, _model(server),
             "--probes", "2"],
            capture_output=True, text=True, timeout=120, cwd=ROOT,
        )  # fmt: skip
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "OK: every probe answered" in done.stdout
