"""The simulator's /metrics pages: byte-identical to prometheus_client, shaped like vLLM."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from app.sim.engine import Replica
from app.sim.exposition import CONTENT_TYPE, SimCollector, TextWriter, replica_families
from app.sim.scenario import load
from tests.fixtures_path import FIXTURES as SHARED

# Copies of ../shared/fixtures live in tests/fixtures.
FIXTURES = SHARED / "vllm-generated"
EPOCH = 1764403200.0


def _page(scenario: str, version: str, until: float, seed: int = 0) -> tuple[bytes, bytes]:
    """(TextWriter page, generate_latest page) of one replica after ``until`` sim seconds."""
    rep = Replica(load(scenario), seed=seed, version=version)
    rep.advance_to(until)
    fams = replica_families(rep)
    registry = CollectorRegistry()
    registry.register(SimCollector(fams, EPOCH))
    return TextWriter(fams, EPOCH).render(), generate_latest(registry)


@pytest.mark.parametrize("version", ["0.33", "0.10", "0.6"])
@pytest.mark.parametrize(
    ("scenario", "until"),
    [("kv_pressure", 200.0), ("healthy", 0.0), ("spec_decode_drop", 100.0)],
)
def test_fast_writer_is_byte_identical_to_generate_latest(
    version: str, scenario: str, until: float
) -> None:
    fast, reference = _page(scenario, version, until)
    assert fast == reference


def _shape(text: str) -> list[tuple[str, str, str, list[tuple[str, ...]]]]:
    """(name, type, help, sorted label-name sets and `le` lists) per family."""
    out = []
    for fam in text_string_to_metric_families(text):
        keys = sorted({tuple(sorted(k for k in s.labels if k != "le")) for s in fam.samples})
        les = sorted({s.labels["le"] for s in fam.samples if "le" in s.labels}, key=float)
        out.append((fam.name, fam.type, fam.documentation, [*keys, tuple(les)]))
    return out


def test_v033_page_has_the_families_labels_and_buckets_of_vllm_0_33() -> None:
    fixture = (FIXTURES / "v0.33.0_V1_1engine_singleproc_GENERATED.prom").read_text()
    page, _ = _page("healthy", "0.33", 60.0)
    assert _shape(page.decode()) == _shape(fixture)


def test_v06_page_has_the_v0_families_and_buckets() -> None:
    fixture = (FIXTURES / "v0.6.3.post1_V0_singleproc_GENERATED.prom").read_text()
    page, _ = _page("healthy", "0.6", 60.0)
    # The generated V0 fixture was made without the startup info gauge; V0 does print it.
    ours = [f for f in _shape(page.decode()) if f[0] != "vllm:cache_config_info"]
    theirs = _shape(fixture)
    # Reasons other than "stop" appear once seen; the fixture saw only "stop".
    assert [f[:3] for f in ours] == [f[:3] for f in theirs]
    by_name = {f[0]: f[3] for f in theirs}
    for name, _, _, keys in ours:
        # The fixture is one stats log in: no throughput log yet, only "stop" seen.
        if by_name[name] != [()] and name != "vllm:request_success":
            assert keys == by_name[name], name


def test_v0_families_have_no_samples_before_the_first_step() -> None:
    page, _ = _page("healthy", "0.6", 0.0)
    text = page.decode()
    assert "vllm:num_requests_running{" not in text
    assert "# TYPE vllm:num_requests_running gauge" in text
    assert "_created" not in text


def test_v010_page_prints_the_deprecated_twins_with_the_same_data() -> None:
    page, _ = _page("healthy", "0.10", 60.0)
    fams = {f.name: f for f in text_string_to_metric_families(page.decode())}
    twins = (
        "vllm:gpu_cache_usage_perc",
        "vllm:kv_cache_usage_perc",
        "vllm:gpu_prefix_cache_queries",
        "vllm:prefix_cache_queries",
        "vllm:time_per_output_token_seconds",
        "vllm:inter_token_latency_seconds",
    )
    for name in twins:
        assert name in fams, name
    old = [
        (s.labels.get("le"), s.value) for s in fams["vllm:time_per_output_token_seconds"].samples
    ]
    new = [(s.labels.get("le"), s.value) for s in fams["vllm:inter_token_latency_seconds"].samples]
    assert old == new and old
    assert "vllm:request_time_per_output_token_seconds" not in fams
    reasons = {s.labels["finished_reason"] for s in fams["vllm:request_success"].samples}
    assert reasons == {"stop", "length", "abort"}


def test_v1_series_exist_with_zero_before_the_first_request() -> None:
    page, _ = _page("healthy", "0.33", 0.0)
    text = page.decode()
    assert (
        'vllm:num_requests_running{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0'
        in text
    )
    assert "vllm:time_to_first_token_seconds_count{" in text


def test_names_keep_the_colon_and_content_type_is_text_0_0_4() -> None:
    page, _ = _page("healthy", "0.33", 30.0)
    assert b"vllm_" not in page.replace(b"vllm:", b"")
    assert CONTENT_TYPE == "text/plain; version=0.0.4; charset=utf-8"


def test_counters_and_histograms_only_grow() -> None:
    rep = Replica(load("incident"), seed=2)
    fams = replica_families(rep)
    writer = TextWriter(fams, EPOCH)
    previous: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for t in range(0, 700, 35):
        rep.advance_to(float(t))
        for fam in text_string_to_metric_families(writer.render().decode()):
            if fam.type not in ("counter", "histogram"):
                continue
            for s in fam.samples:
                key = (s.name, tuple(sorted(s.labels.items())))
                assert s.value >= previous.get(key, 0.0), key
                previous[key] = s.value
