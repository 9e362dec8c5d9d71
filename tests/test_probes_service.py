"""End to end: the service probes the simulator as vLLM (OpenAI chat) and as Ollama; both
probes show in the API, the UI and /metrics, a frontend delay injected in the simulator
is diagnosed frontend_bound, and a hung engine behind a page that answers is stalled."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from app.alerts.fields import ScrapeStatus
from app.config import load_settings
from app.diagnose import DEFAULT_CONFIG
from app.evaluate.round import Evaluator, TargetRound, judge
from app.evaluate.settings import diagnosis_config
from app.main import create_app
from app.sim.server import SimHTTPServer, start_server
from app.store.sqlite import Store
from tests.dash_calls import dash_callback
from tests.test_e2e import ServiceThread
from tests.waiting import wait_for

TOKEN = "probe-bearer-0123456789"


def _model(server: SimHTTPServer) -> str:
    return server.fleet._slot(0).engine.model_label.decode().split('"')[1]


def _settings(url: str, model: str, tmp: Any) -> Any:
    # Timeouts well past a quiet answer (the 0.4 s delay and 16 tokens; a probe's at most its
    # interval, three in a 10 s window): on a busy machine
    # a probe or scrape cut at 1 s read as a failure, and the window was not the one waited on.
    probe = {"url": url, "model": model, "interval": 3, "timeout": 3}
    return load_settings(
        None,
        {
            "targets": [{"name": "sim", "url": url + "/metrics"}],
            "scrape": {"interval": 1, "timeout": 5},
            "window": {"length": 10, "step": 2},
            "alerts": {"evaluation_interval": 1},
            "storage": {"path": str(tmp / "pw.db")},
            "probes": [
                {
                    **probe,
                    "name": "vllm-chat",
                    "kind": "openai_chat",
                    "target": "sim",
                    "bearer_token": TOKEN,
                    "headers": {"X-Api-Key": "k-" + TOKEN},
                },
                {
                    **probe,
                    "name": "ollama",
                    "kind": "ollama_generate",
                    "device": "l40s",
                    "model_params_b": 8,
                },
            ],
        },
    )


@pytest.fixture
def sim(request: pytest.FixtureRequest) -> Iterator[tuple[SimHTTPServer, str]]:
    server, _thread, url = start_server("healthy", port=0, overrides=request.param)
    yield server, url
    server.shutdown()
    server.server_close()


def _latest_row(base: str, target: str) -> dict[str, Any] | None:
    rows = httpx.get(base + "/api/v1/diagnoses", params={"target": target}, timeout=10).json()
    return rows[-1] if rows else None


def _latest_class(base: str, target: str) -> str | None:
    row = _latest_row(base, target)
    return row["class"] if row else None


def _target_side_panel(base: str, target: str, model: str) -> str:
    """What the target page's refresh callback puts beside the card (the page's own
    callback, found by its output, asked as the browser asks it)."""
    values: dict[tuple[str, str], Any] = {
        ("target-model", "value"): model,
        ("target-range", "value"): "1h",
        ("target-live", "value"): ["live"],
        ("target-stream", "data"): {"target": target},
        ("target-tick", "n_intervals"): 0,
    }
    return dash_callback(base, "target-engines.children", values, "target-model.value")


@pytest.mark.parametrize("sim", [{"faults.frontend_delay_s": 0.4}], indirect=True)
def test_probes_show_everywhere_and_a_frontend_delay_is_frontend_bound(
    sim: tuple[SimHTTPServer, str], tmp_path: Any
) -> None:
    server, url = sim
    model = _model(server)
    svc = ServiceThread(create_app(_settings(url, model, tmp_path)))
    try:
        base = svc.url

        want = {"vllm-chat": "frontend_bound", "ollama": "frontend_bound", "sim": "healthy"}
        seen: dict[str, dict[str, Any]] = {}

        def diagnosed() -> bool:
            # The rows that met the condition are the ones checked below: a window
            # diagnosed after the wait (another class, no frontend hints) is not.
            latest = {t: _latest_row(base, t) for t in want}
            if all(r is not None and r["class"] == want[t] for t, r in latest.items()):
                seen.update({t: r for t, r in latest.items() if r is not None})
                return True
            return False

        wait_for(diagnosed, timeout=120)
        probes = httpx.get(base + "/api/v1/probes", timeout=10)
        targets = httpx.get(base + "/api/v1/targets", timeout=10).json()
        metrics = httpx.get(base + "/metrics", timeout=10).text
        windows = httpx.get(
            base + "/api/v1/windows",
            params={"target": "ollama", "window": 10, "step": 2},
            timeout=10,
        ).json()
        chat = seen["vllm-chat"]
        panel = _target_side_panel(base, "ollama", model)
    finally:
        svc.close()

    # The API: each probe, its latest answer; the credentials named, never shown.
    assert TOKEN not in probes.text
    by_name = {p["name"]: p for p in probes.json()}
    assert by_name["vllm-chat"]["headers"] == ["X-Api-Key"]
    assert by_name["vllm-chat"]["bearer_token_set"] is True
    for p in by_name.values():
        latest = p["latest"]
        assert p["up"] and latest["ok"] and latest["tokens"] == 16
        assert latest["client_gap_s"] >= 0.4  # the injected delay, outside the engine
    names = {t["name"]: t for t in targets}
    assert names["ollama"]["labels"]["probe"] == "ollama_generate"
    assert names["vllm-chat"]["labels"]["probe_of"] == "sim"
    assert [w for w in windows if w.get("probe") and w["probe"]["client_gap"]]

    # The diagnosis: per request, with the frontend's hints.
    gap = next(e for e in chat["evidence"] if e["signal"] == "client_gap")
    assert gap["value"] >= 0.4 and "per request" in gap["note"]
    assert {h["id"] for h in chat["hints"]} >= {"frontend-path", "frontend-api-server"}

    # /metrics, blackbox_exporter style.
    assert 'phasewatch_probe_success{kind="openai_chat",probe="vllm-chat"} 1.0' in metrics
    assert 'phasewatch_probe_success{kind="ollama_generate",probe="ollama"} 1.0' in metrics
    for family in (
        "phasewatch_probe_duration_seconds",
        "phasewatch_probe_phase_duration_seconds",
        "phasewatch_probe_client_gap_seconds",
        "phasewatch_probe_ttft_seconds_bucket",
        "phasewatch_probe_itl_seconds_bucket",
        "phasewatch_probes_total",
    ):
        assert f"{family}{{" in metrics, family

    # The UI: the probe's readings beside its card, with the decode roofline.
    assert "Probe (as a client sees it)" in panel
    assert "client gap" in panel and "decode ceiling" in panel


@pytest.mark.parametrize("sim", [{"faults.hang": True}], indirect=True)
def test_probes_timing_out_while_metrics_answer_are_a_stall(
    sim: tuple[SimHTTPServer, str], tmp_path: Any
) -> None:
    server, url = sim
    svc = ServiceThread(create_app(_settings(url, _model(server), tmp_path)))
    try:
        wait_for(lambda: _latest_class(svc.url, "vllm-chat") == "stalled", timeout=60)
        probes = {p["name"]: p for p in httpx.get(svc.url + "/api/v1/probes").json()}
        ollama = _latest_class(svc.url, "ollama")
    finally:
        svc.close()
    assert probes["vllm-chat"]["last_error_kind"] == "timeout"
    # The probe without a scraped target cannot prove a stall: its answers just fail.
    assert ollama == "insufficient_data"


def test_a_failing_probe_stays_judged_between_its_answers() -> None:
    """A probe answers once an interval: its target is not stale (target_up null, so a
    target-down rule could never fire) between two answers, as a scraped target is."""
    failed = ScrapeStatus(ts=1000.0, ok=False, error_kind="timeout")
    rounds = [TargetRound("probe", {}, failed, (), 30.0 + 20.0 + 10.0),
              TargetRound("scraped", {}, failed)]  # fmt: skip
    done = judge(rounds, now=1040.0, config=DEFAULT_CONFIG, stale_after=15.0, ui_base_url="u")
    up = {i.target: i.fields["target_up"] for i in done.instances}
    assert up == {"probe": 0.0, "scraped": None}
    settings = load_settings(
        None,
        {
            "probes": [{"name": "p", "kind": "openai_chat", "url": "http://h:1", "model": "m"}],
            "storage": {"path": ":memory:"},
        },
    )

    ev = Evaluator.from_settings(
        settings, Store(":memory:"), diagnosis_config(settings), targets=dict, ui_base_url="u"
    )
    assert ev.stale_by_target == {"p": 30.0 + 20.0 + 2 * 5.0}
