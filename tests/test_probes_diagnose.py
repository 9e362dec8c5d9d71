"""A probe's window is judged as a client sees the server: the frontend gap (per request or
estimated from the server's page), a stall proven by /metrics answering, the decode
roofline — and a server's own window never gains a frontend verdict."""

from __future__ import annotations

import dataclasses
import math

import pytest

from app.diagnose import DEFAULT_CONFIG, DiagnosisClass, diagnose
from app.evaluate.probes import probe_hardware, with_probes
from app.fleet.aggregate import FleetKey, fleet_window
from app.model import Histogram, Snapshot, StreamSnapshot, Window
from app.probeconfig import ProbeConfig, ProbingConfig
from app.read.points import point_of
from app.scrape.probe_fetch import ProbeResult
from app.scrape.probe_parse import ServerTimings
from app.sources.probe_tally import ProbeTally
from app.ui.probeview import probe_panel
from app.windows.aggregate import window
from app.windows.delta import snapshot_deltas
from app.windows.probefacts import is_probe_window, probe_facts
from tests.diagnose_windows import make_window

C = DiagnosisClass
T0 = 1_800_000_000.0
TTFT_BOUNDS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


def _answer(
    ttft: float = 0.1,
    server_ttft: float | None = None,
    *,
    gap: float = 0.02,
    tokens: int = 16,
    decode_s: float | None = None,
    connect: float = 0.001,
    error_kind: str | None = None,
) -> ProbeResult:
    if error_kind is not None:
        return ProbeResult(T0, 5.0, ok=False, error_kind=error_kind, error="x", connect=connect)
    server = None
    if server_ttft is not None:
        server = ServerTimings(
            ttft=server_ttft,
            prefill_s=server_ttft / 2,
            prefill_tokens=12,
            decode_s=decode_s if decode_s is not None else gap * (tokens - 1),
            decode_tokens=tokens,
        )
    return ProbeResult(
        T0,
        ttft + gap * (tokens - 1),
        ok=True,
        connect=connect,
        ttfb=ttft * 0.9,
        ttft=ttft,
        gaps=(gap,) * (tokens - 1),
        tokens=tokens,
        server=server,
    )


def _page(n: int, ttft: float, tokens: float) -> StreamSnapshot:
    """A scraped server's stream with ``n`` TTFTs of ``ttft`` seconds so far."""
    i = next(k for k, b in enumerate(TTFT_BOUNDS) if ttft <= b)
    counts = tuple(float(n) if k >= i else 0.0 for k in range(len(TTFT_BOUNDS) + 1))
    hist = Histogram(TTFT_BOUNDS, counts, n * ttft, float(n))
    return StreamSnapshot("m", histograms={"ttft": hist}, counters={"generation_tokens": tokens})


def _window(
    answers: list[ProbeResult],
    *,
    pages: list[StreamSnapshot] | None = None,
    page_up: bool | None = None,
    target: str = "probe",
) -> Window:
    """A 60 s window of a probe answering every 10 s (``pages``: the server's page read
    after each answer, one more first: the baseline)."""
    tally = ProbeTally("m")
    if pages:
        tally.add_page(pages[0])
    prev = Snapshot(target, T0, {"m": tally.stream()})
    deltas = []
    for k, r in enumerate(answers, start=1):
        tally.add(r, page_up=page_up)
        if pages:
            tally.add_page(pages[k])
        snap = Snapshot(target, T0 + 10 * k, {"m": tally.stream()})
        deltas += snapshot_deltas(prev, snap)
        prev = snap
    end = T0 + 10 * len(answers)
    return window(deltas, start=end - 60, end=end, target=target, model_name="m")


def test_a_gap_the_server_reports_per_request_is_frontend_bound() -> None:
    w = _window([_answer(0.5, 0.05) for _ in range(6)])
    assert is_probe_window(w)
    d = diagnose(w, DEFAULT_CONFIG)
    assert d.cls is C.FRONTEND_BOUND
    gap = next(e for e in d.evidence if e.signal == "client_gap")
    assert gap.value == pytest.approx(0.45) and gap.holds and "per request" in gap.note
    assert d.confidence >= 0.9  # an exact comparison, not a percentile of six
    assert [h.id for h in d.hints][:2] == ["frontend-path", "frontend-api-server"]
    assert d.facts["client_gap"] == pytest.approx(0.45)
    assert "Frontend-bound" in d.summary and "not the engine" in d.summary


def test_without_per_request_timings_the_gap_is_estimated_from_the_page() -> None:
    pages = [_page(100 * k, 0.04, 1000.0 * k) for k in range(7)]
    w = _window([_answer(0.5) for _ in range(6)], pages=pages, page_up=True)
    p = probe_facts(w)
    assert p is not None and p.client_gap_estimated
    assert p.page_ttft_p50 is not None and p.page_ttft_p50 <= 0.05
    d = diagnose(w, DEFAULT_CONFIG)
    assert d.cls is C.FRONTEND_BOUND
    assert any("estimate" in n for n in d.notes)


@pytest.mark.parametrize(
    ("client", "server"),
    [(0.12, 0.05), (0.09, 0.01)],  # a gap under half the TTFT; a gap under 100 ms
)
def test_a_small_gap_is_healthy(client: float, server: float) -> None:
    d = diagnose(_window([_answer(client, server) for _ in range(6)]), DEFAULT_CONFIG)
    assert d.cls is C.HEALTHY, d.summary


def test_the_thresholds_come_from_the_probing_settings() -> None:
    w = _window([_answer(0.12, 0.05) for _ in range(6)])
    probing = ProbingConfig(frontend_gap_min=0.05, frontend_gap_share=0.5)
    config = with_probes(DEFAULT_CONFIG, [], probing)
    assert diagnose(w, config).cls is C.FRONTEND_BOUND


def test_probes_timing_out_while_metrics_answer_and_nothing_moves_is_a_stall() -> None:
    pages = [_page(50, 0.04, 900.0)] * 7  # the page answers, nothing on it moves
    timeouts = [_answer(error_kind="timeout") for _ in range(6)]
    d = diagnose(_window(timeouts, pages=pages, page_up=True), DEFAULT_CONFIG)
    assert d.cls is C.STALLED
    assert "every probe" in d.summary
    assert d.hints and d.hints[0].id == "engine-health"
    assert "every probe (6) timed out" in d.hints[0].evidence


def test_failing_probes_are_no_stall_while_the_server_produces_tokens() -> None:
    pages = [_page(50 * k, 0.04, 900.0 * k) for k in range(7)]
    timeouts = [_answer(error_kind="timeout") for _ in range(6)]
    d = diagnose(_window(timeouts, pages=pages, page_up=True), DEFAULT_CONFIG)
    assert d.cls is C.INSUFFICIENT_DATA and "6 of 6 probes failed" in d.summary
    assert [h.id for h in d.hints] == ["check-probe"]


def test_failing_probes_without_a_scraped_target_prove_nothing() -> None:
    timeouts = [_answer(error_kind="timeout") for _ in range(6)]
    d = diagnose(_window(timeouts), DEFAULT_CONFIG)
    assert d.cls is C.INSUFFICIENT_DATA


def test_ollama_on_a_cpu_is_decode_bound_beside_its_roofline() -> None:
    probe = ProbeConfig(
        name="ollama",
        kind="ollama_generate",
        url="http://127.0.0.1:11434",
        model="llama3.1:8b",
        device="cpu",
        model_params_b=8,
    )
    config = with_probes(DEFAULT_CONFIG, [probe], ProbingConfig())
    # ~5 tokens/s: every gap 200 ms; the server's own decode at the same speed.
    answers = [_answer(0.8, 0.75, gap=0.2, decode_s=3.0) for _ in range(6)]
    d = diagnose(_window(answers, target="ollama"), config)
    assert d.cls is C.DECODE_BOUND and str(d.sub_cause) == "bandwidth_bound"
    roof = d.roofline
    assert roof is not None and roof.ceiling_tok_s == pytest.approx(90e9 / 16e9)
    assert roof.measured_tok_s == pytest.approx(16 / 3.0)
    assert {"quantize-weights", "faster-memory"} <= {h.id for h in d.hints}


def test_a_probes_own_hardware_applies_to_it_alone() -> None:
    probe = ProbeConfig(
        name="p", kind="openai_chat", url="http://h:1", model="m", device="h100-sxm",
        model_params_b=70, weight_bits=8,
    )  # fmt: skip
    hw = probe_hardware(probe)
    assert hw is not None and hw.weight_bytes == pytest.approx(70e9)
    config = with_probes(DEFAULT_CONFIG, [probe], ProbingConfig())
    assert config.hardware_for("p") == hw and config.hardware_for("other") is None
    unknown = probe.model_copy(update={"device": "tpu-v9"})
    assert probe_hardware(unknown) is None  # no ceiling, said in the log; the probe runs


def test_a_servers_window_never_gains_a_frontend_verdict() -> None:
    w = make_window()
    assert not is_probe_window(w)
    d = diagnose(w, DEFAULT_CONFIG)
    assert d.cls is C.HEALTHY
    assert not any(e.rule == "frontend_bound" for e in d.evidence)
    assert not any(k.startswith("probe_") for k in d.facts)


def test_probe_readings_are_exact_means_and_speeds() -> None:
    w = _window([_answer(0.3, 0.1, gap=0.025, tokens=11) for _ in range(6)])
    p = probe_facts(w)
    assert p is not None
    assert p.attempts == 6 and p.failures == 0 and p.ttft_n == 6
    assert p.ttft_mean == pytest.approx(0.3) and p.server_ttft_mean == pytest.approx(0.1)
    assert p.decode_tps == pytest.approx(10 / 0.25)
    assert p.connect_mean == pytest.approx(0.001)
    assert p.client_gap_share == pytest.approx(0.2 / 0.3)
    assert all(v is None or math.isfinite(v) for v in p.numbers().values())
    d = dataclasses.replace(diagnose(w, DEFAULT_CONFIG))
    assert d.ttft_slo == "within"


def test_a_probe_is_never_summed_into_its_models_fleet() -> None:
    server = make_window()
    probe = _window([_answer(0.5, 0.05) for _ in range(6)])
    server = dataclasses.replace(server, start=probe.start, end=probe.end, model_name="m")
    key = FleetKey("m")
    both = fleet_window(key, [server, probe], start=probe.start, end=probe.end)
    alone = fleet_window(key, [server], start=probe.start, end=probe.end)
    assert both.window == alone.window and len(both.replicas) == 1
    assert not is_probe_window(both.window)
    assert diagnose(both.window, DEFAULT_CONFIG).cls is C.HEALTHY


def test_the_ui_charts_a_probes_client_view_and_shows_its_readings() -> None:
    w = _window([_answer(0.5, 0.05) for _ in range(6)])
    d = diagnose(w, DEFAULT_CONFIG)
    point = point_of(w, d)
    assert point.cls == "frontend_bound" and point.requests == 6
    assert point.ttft_p50 is not None and 0.25 < point.ttft_p50 <= 0.5
    assert point.itl_p50 is not None and point.running_avg is None
    panel = str(probe_panel(w, d))
    assert "client gap" in panel and "450 ms" in panel and "reported per request" in panel
    assert probe_panel(make_window(), diagnose(make_window(), DEFAULT_CONFIG)) is None
