"""SGLang pages (tests/fixtures/sglang, built from SGLang's collector.py at the commits
its README names) parse and normalise into the same streams and signals as vLLM's."""

from __future__ import annotations

import pytest

from app.model import CORE_SIGNALS, Snapshot
from app.scrape.cache import ParseCache
from app.scrape.normalize import normalize
from app.scrape.parse import parse
from app.scrape.signals import page_engine
from tests.fixtures_path import FIXTURES

SGLANG = FIXTURES / "sglang"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
NEWEST = "main-00ae9c15_unified_GENERATED.prom"
DP2 = "main-00ae9c15_dp2_GENERATED.prom"
MIDDLE = "93d04878_unified_GENERATED.prom"
OLDEST = "docs-00b08c49_time-per-output-token_EXAMPLE.prom"
OFF = "metrics-off_no-sglang-families.prom"
ITL_BOUNDS = (0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04)
ITL_BOUNDS += (0.06, 0.08, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0)


def snap(name: str) -> Snapshot:
    text = (SGLANG / name).read_text()
    return normalize(parse(text, cache=ParseCache()), target="t", ts=100.0)


@pytest.mark.parametrize("name", [NEWEST, DP2, MIDDLE, OLDEST])
def test_every_release_is_one_stream_with_the_core_signals(name: str) -> None:
    s = snap(name)
    assert s.engine_kind == "sglang"
    assert not s.metrics_disabled
    assert s.parse_errors == 0 and s.problems == ()
    assert list(s.streams) == [MODEL]
    stream = s.streams[MODEL]
    assert not set(CORE_SIGNALS) & set(stream.missing)
    assert stream.info == {"engine_kind": "sglang"}
    assert {"prompt_tokens", "generation_tokens", "prefix_queries"} <= set(stream.counters)


def test_newest_release_maps_each_family() -> None:
    stream = snap(NEWEST).streams[MODEL]
    assert stream.gauges == {"running": 48.0, "waiting": 3.0, "kv_usage": 0.47}
    assert stream.counters["preemptions"] == 2.0  # num_retracted_requests_total
    assert stream.counters["prefix_queries"] == stream.counters["prompt_tokens"] == 812890.0
    assert stream.counters["prefix_hits"] == 204800.0  # cached_tokens_total
    assert stream.counters["finished:any"] == 1100.0  # num_requests_total, no reason
    assert {"ttft", "itl", "e2e", "queue_time"} <= set(stream.histograms)
    # --collect-tokens-histogram
    assert stream.histograms["prompt_len"].count == stream.histograms["gen_len"].count == 3.0
    itl = stream.histograms["itl"]
    assert itl.bounds == ITL_BOUNDS
    # SGLang counts tokens into the bucket and the interval into _sum.
    assert itl.count == 4.0 and itl.sum == pytest.approx(0.096)
    # The gauge cache_hit_rate is not read (0 after every decode log).
    assert "prefix_hit_rate" not in stream.gauges


def test_data_parallel_ranks_are_engines() -> None:
    stream = snap(DP2).streams[MODEL]
    assert set(stream.engines) == {"0", "1"}
    assert stream.gauges["running"] == 97.0  # summed over ranks
    assert stream.gauges["waiting"] == 7.0
    assert stream.gauges["kv_usage"] == pytest.approx(0.57)  # the fuller rank
    assert stream.counters["preemptions"] == 5.0
    assert stream.histograms["queue_time"].count == 8.0


def test_middle_release_has_no_retraction_counter() -> None:
    stream = snap(MIDDLE).streams[MODEL]
    # Only the gauge of retractions since the last log: not a count, not read.
    assert "preemptions" in stream.missing
    assert "preemptions" not in stream.counters


def test_oldest_release_reads_time_per_output_token_as_itl() -> None:
    stream = snap(OLDEST).streams[MODEL]
    assert stream.histograms["itl"].count == 7.400757e06
    assert stream.histograms["ttft"].count == 11008.0
    assert stream.gauges == {"running": 162.0, "waiting": 2826.0, "kv_usage": 0.28}


def test_metrics_off_is_said() -> None:
    s = snap(OFF)
    assert s.metrics_disabled
    assert s.streams == {}
    assert s.engine_kind == ""


def test_vllm_pages_stay_vllm() -> None:
    page = FIXTURES / "vllm-generated" / "v0.33.0_V1_1engine_singleproc_GENERATED.prom"
    text = page.read_text()
    s = normalize(parse(text), target="t", ts=1.0)
    assert s.engine_kind == "vllm"
    assert all("engine_kind" not in st.info for st in s.streams.values())


def test_page_engine() -> None:
    assert page_engine(["process_start_time_seconds", "sglang:token_usage"], None) == "sglang"
    assert page_engine([], "vllm:num_requests_running") == "vllm"
    assert page_engine(["python_info"], None) == ""
