"""``phasewatch sim --engine sglang``: SGLang's families over the same replica state,
shaped as the fixtures built from SGLang's collector.py, read back as SGLang streams."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from app.cli import main
from app.model import CORE_SIGNALS
from app.scrape.normalize import normalize
from app.scrape.parse import parse
from app.sim.engine import Replica
from app.sim.exposition import SimCollector, TextWriter, replica_families
from app.sim.scenario import load
from app.sim.server import page_of
from tests.fixtures_path import FIXTURES

EPOCH = 1764403200.0
NEWEST = FIXTURES / "sglang" / "main-00ae9c15_unified_GENERATED.prom"


def _page(scenario: str, until: float, version: str = "sglang") -> tuple[str, bytes]:
    rep = Replica(load(scenario), seed=0, version=version)
    rep.advance_to(until)
    fams = replica_families(rep)
    registry = CollectorRegistry()
    registry.register(SimCollector(fams, EPOCH))
    fast = TextWriter(fams, EPOCH).render()
    assert fast == generate_latest(registry)
    return fast.decode(), fast


def _shapes(text: str) -> dict[str, tuple[str, str, list[tuple[str, ...]]]]:
    out = {}
    for fam in text_string_to_metric_families(text):
        keys = sorted({tuple(sorted(k for k in s.labels if k != "le")) for s in fam.samples})
        les = sorted({s.labels["le"] for s in fam.samples if "le" in s.labels}, key=float)
        out[fam.name] = (fam.type, fam.documentation, [*keys, tuple(les)])
    return out


def test_every_simulated_family_is_shaped_as_sglang_prints_it() -> None:
    page, _ = _page("healthy", 60.0)
    fixture = _shapes(NEWEST.read_text())
    simulated = _shapes(page)
    assert simulated and all(name.startswith("sglang:") for name in simulated)
    for name, shape in simulated.items():
        assert fixture[name] == shape, name
    assert "_created" not in page  # SGLang serves the multiprocess collector's page


@pytest.mark.parametrize("scenario", ["healthy", "kv_pressure", "queue_overload"])
def test_sglang_page_parses_to_an_sglang_stream_with_the_core_signals(scenario: str) -> None:
    text, _ = _page(scenario, 120.0)
    snap = normalize(parse(text), target="r0", ts=EPOCH + 120.0)
    assert snap.engine_kind == "sglang" and not snap.metrics_disabled
    assert snap.parse_errors == 0 and snap.problems == ()
    (stream,) = snap.streams.values()
    assert stream.info == {"engine_kind": "sglang"}
    assert not set(CORE_SIGNALS) & set(stream.missing)


def test_both_engines_show_the_same_replica_state() -> None:
    sglang = normalize(parse(_page("kv_pressure", 150.0)[0]), target="a", ts=1.0)
    vllm = normalize(parse(_page("kv_pressure", 150.0, "0.33")[0]), target="b", ts=1.0)
    (s,) = sglang.streams.values()
    (v,) = vllm.streams.values()
    for signal in ("running", "waiting", "kv_usage"):
        assert s.gauges[signal] == v.gauges[signal], signal
    for signal in ("prompt_tokens", "generation_tokens", "preemptions"):
        assert s.counters[signal] == v.counters[signal], signal
    # SGLang prints cached tokens from the first hit on.
    assert s.counters.get("prefix_hits", 0.0) == v.counters["prefix_hits"]
    for signal in ("ttft", "itl", "e2e"):
        assert s.histograms[signal].count == v.histograms[signal].count, signal
        assert s.histograms[signal].sum == pytest.approx(v.histograms[signal].sum), signal
    # SGLang observes the queue time at admission, vLLM at the finish.
    assert s.histograms["queue_time"].count >= v.histograms["queue_time"].count
    assert s.counters["finished:any"] == sum(
        value for key, value in v.counters.items() if key.startswith("finished:")
    )


def test_a_mixed_fleet_alternates_the_engines() -> None:
    assert [page_of("mixed", i) for i in range(4)] == ["0.33", "sglang", "0.33", "sglang"]
    assert page_of("sglang", 3) == "sglang" and page_of("0.10", 1) == "0.10"


def test_cli_records_sglang_pages(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rec"
    args = ["sim", "--scenario", "healthy", "--engine", "sglang", "--record", str(out)]
    assert main([*args, "--duration", "30"]) == 0
    pages = sorted(out.glob("*.prom"))
    assert pages
    assert normalize(parse(pages[-1].read_text()), target="x", ts=0.0).engine_kind == "sglang"
    assert main(["sim", "--scenario", "healthy", "--engine", "mixed", "--record", str(out)]) == 2
    assert "--engine mixed" in capsys.readouterr().err


def test_a_mixed_fleet_is_one_fleet(tmp_path: Path) -> None:
    """vLLM and SGLang replicas of one model: one fleet; the latency histograms of the
    engine whose layout holds most observations, the other's replicas named."""
    fleet = tmp_path / "fleet"
    for name, engine, seed in (("r0", "vllm", "0"), ("r1", "sglang", "1")):
        args = ["sim", "--scenario", "healthy", "--engine", engine, "--seed", seed]
        assert main([*args, "--record", str(fleet / name), "--duration", "120"]) == 0
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["replay", str(fleet), "--json"]) == 0
    answer = json.loads(out.getvalue())
    assert answer["fleet"] and answer["targets"] == ["r0", "r1"]
    last = answer["windows"][-1]
    assert [r["target"] for r in last["replicas"]] == ["r0", "r1"]
    assert last["running_avg"] == pytest.approx(sum(r["running_avg"] for r in last["replicas"]))
    assert any("use other buckets" in note for note in last["notes"])
