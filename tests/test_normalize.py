"""Tests for app.scrape.normalize: vLLM names → canonical signals, engines folded."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.model import (
    CORE_SIGNALS,
    COUNTER_SIGNALS,
    GAUGE_SIGNALS,
    HISTOGRAM_SIGNALS,
    Histogram,
    Sample,
    Snapshot,
    StreamSnapshot,
)
from app.scrape.cache import ParseCache
from app.scrape.normalize import NormalizeCache, normalize
from app.scrape.parse import parse
from app.scrape.result import ParseResult
from app.scrape.signals import ALL_SIGNALS
from tests.fixtures_path import FIXTURES

# Copies of ../shared/fixtures (captured and generated vLLM pages) live in tests/fixtures.
SHARED_FIXTURES = FIXTURES
CAPTURED = SHARED_FIXTURES / "vllm-captured"
GENERATED = SHARED_FIXTURES / "vllm-generated"
V033 = GENERATED / "v0.33.0_V1_1engine_singleproc_GENERATED.prom"
V063 = GENERATED / "v0.6.3.post1_V0_singleproc_GENERATED.prom"
MODEL_033 = "meta-llama/Llama-3.1-8B-Instruct"
TTFT_BOUNDS_033 = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0)
TTFT_BOUNDS_033 += (2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)


def snap(text: str) -> Snapshot:
    """Parse (fresh cache) and normalise a page."""
    return normalize(parse(text, cache=ParseCache()), target="t", ts=100.0)


def stream_of(snapshot: Snapshot, model: str = "m") -> StreamSnapshot:
    """Return one stream, failing with the streams present if it is absent."""
    assert model in snapshot.streams, list(snapshot.streams)
    return snapshot.streams[model]


def hist(family: str, bounds: list[str], counts: list[float], total: float, labels: str) -> str:
    """Write one histogram series (buckets, count, sum) with ``labels`` before ``le``."""
    lines = [
        f'{family}_bucket{{{labels},le="{le}"}} {count}'
        for le, count in zip(bounds, counts, strict=True)
    ]
    lines.append(f"{family}_count{{{labels}}} {counts[-1]}")
    lines.append(f"{family}_sum{{{labels}}} {total}")
    return "\n".join(lines) + "\n"


TTFT = "vllm:time_to_first_token_seconds"


# --- shared fixtures --------------------------------------------------------------------


def test_033_generated_carries_every_canonical_signal() -> None:
    snapshot = snap(V033.read_text())
    assert list(snapshot.streams) == [MODEL_033]
    stream = stream_of(snapshot, MODEL_033)
    assert stream.missing == ()
    assert set(stream.histograms) == {
        "ttft",
        "itl",
        "tpot",
        "e2e",
        "queue_time",
        "prefill_time",
        "decode_time",
        "prompt_len",
        "gen_len",
        "step_tokens",
    }
    gauges = {
        "running": 8.0,
        "waiting": 3.0,
        "kv_usage": 0.62,
        "waiting_capacity": 3.0,
        "waiting_deferred": 0.0,
    }
    assert stream.gauges == gauges
    assert stream.engines == {"0": gauges}
    assert stream.counters["prefix_queries"] == 4096.0
    assert stream.counters["prefix_hits"] == 1024.0
    assert stream.counters["finished:stop"] == 1.0
    assert stream.prefix_unit == "tokens"
    assert stream.info["num_gpu_blocks"] == "27000" and "engine" not in stream.info
    assert not snapshot.metrics_disabled and snapshot.parse_errors == 0


def test_033_histogram_bounds_come_from_the_page_with_inf_last() -> None:
    ttft = stream_of(snap(V033.read_text()), MODEL_033).histograms["ttft"]
    assert ttft.bounds == TTFT_BOUNDS_033
    assert len(ttft.counts) == len(ttft.bounds) + 1
    assert ttft.counts[-1] == ttft.count == 2.0
    assert ttft.counts[8] == 1.0 and ttft.sum == 0.6


def test_033_iteration_tokens_total_is_the_step_tokens_histogram() -> None:
    stream = stream_of(snap(V033.read_text()), MODEL_033)
    step = stream.histograms["step_tokens"]
    assert step.count == 1.0 and step.sum == 3064.0
    assert step.bounds[0] == 1.0 and step.bounds[-1] == 16384.0
    assert not any("iteration" in name for name in stream.counters)


def test_063_generated_maps_v0_names_and_omits_disabled_hit_rate() -> None:
    stream = stream_of(snap(V063.read_text()), MODEL_033)
    assert stream.histograms["itl"].count == 3.0  # from time_per_output_token_seconds
    assert stream.gauges == {"running": 8.0, "waiting": 3.0, "kv_usage": 0.62}
    assert "prefix_hit_rate" not in stream.gauges
    assert stream.counters["prompt_tokens"] == 1000.0
    assert stream.missing == (
        "tpot",
        "queue_time",
        "prefill_time",
        "decode_time",
        "step_tokens",
        "prefix_hit_rate",
        "prefix_queries",
        "prefix_hits",
    )


def test_0100_capture_reads_kv_cache_usage_perc() -> None:
    snapshot = snap((CAPTURED / "V1_v0.10.0_production-stack-issue-617_excerpt1.prom").read_text())
    stream = stream_of(snapshot, "zai-org/GLM-4.5")
    assert stream.gauges["kv_usage"] == pytest.approx(9.75010481363281e-06)
    assert stream.counters["prefix_queries"] == 32.0  # the new name, not the deprecated one
    assert stream.prefix_unit == "tokens"


def test_kv_cache_usage_perc_wins_over_gpu_cache_usage_perc() -> None:
    page = (
        'vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.9\n'
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.3\n'
    )
    assert stream_of(snap(page)).gauges["kv_usage"] == 0.3


def test_gpu_cache_usage_perc_is_used_when_it_is_the_only_one() -> None:
    page = 'vllm:gpu_cache_usage_perc{model_name="m"} 0.9\n'
    assert stream_of(snap(page)).gauges["kv_usage"] == 0.9


def test_v0_help_type_only_capture_has_no_streams_and_is_not_disabled() -> None:
    text = CAPTURED / "V0_v0.5-0.6-era_MeetKai-functionary-pr263_help-type-only_excerpt.prom"
    snapshot = snap(text.read_text())
    assert snapshot.streams == {}
    assert not snapshot.metrics_disabled
    assert snapshot.parse_errors == 1  # its last TYPE line is cut


def test_http_only_page_is_metrics_disabled() -> None:
    snapshot = snap((CAPTURED / "http_metrics_docs-design-metrics-md_example.prom").read_text())
    assert snapshot.metrics_disabled and snapshot.streams == {}


def test_08x_capture_counts_prefix_cache_in_blocks() -> None:
    text = CAPTURED / "V1_v0.8.x-pre-engine-label_production-stack-issue-318_excerpt.prom"
    stream = stream_of(snap(text.read_text()), "Qwen/Qwen2.5-Coder-32B-Instruct")
    assert stream.prefix_unit == "blocks"
    assert stream.engines == {"0": {"running": 0.0, "waiting": 0.0, "kv_usage": 0.0}}


def test_v0_cache_config_without_model_name_is_attached_to_the_stream() -> None:
    text = (CAPTURED / "V0_v0.6-era_QwenLM-Qwen3-VL-issue-55_excerpt.prom").read_text()
    stream = stream_of(snap(text), "qwenvl")
    assert stream.info["block_size"] == "16" and stream.info["num_gpu_blocks"] == "2048"


def test_dp2_multiprocess_capture_drops_cut_histograms_and_counts_them() -> None:
    text = (
        CAPTURED / "V1_main-2025-09_DP2-api-server-multiproc_vllm-pr-22227_excerpt2.prom"
    ).read_text()
    snapshot = snap(text)
    stream = stream_of(snapshot, "/home/jovyan/qwen3-8b")
    # Both ITL families are cut (no _sum for one, only a few buckets for the other).
    assert "itl" not in stream.histograms and "itl" in stream.missing
    assert snapshot.parse_errors >= 2


def _as_dp2_multiprocess(text: str) -> str:
    """Turn the one-engine 0.33.0 page into a DP=2 multiprocess one: engine 1 has twice
    engine 0's values (half its KV usage, a fraction of at most 1), `_sum` lines come
    first and the engines are interleaved."""
    out = []
    for line in text.split("\n"):
        if not line or line.startswith("#") or "_created" in line:
            if "_created" not in line:
                out.append(line)
            continue
        series, _, value = line.rpartition(" ")
        other = series.replace('engine="0"', 'engine="1"')
        if other == series:
            out.append(line)
            continue
        factor = 0.5 if series.startswith("vllm:kv_cache_usage_perc") else 2
        pair = [line, f"{other} {float(value) * factor}"]
        out.extend(pair)
    # Move every _sum line to the front of its family block.
    blocks: list[list[str]] = [[]]
    for line in out:
        if line.startswith("# HELP"):
            blocks.append([])
        blocks[-1].append(line)
    ordered = []
    for block in blocks:
        sums = [line for line in block if "_sum{" in line]
        ordered.extend([line for line in block if line.startswith("#")] + sums)
        ordered.extend(line for line in block if not line.startswith("#") and line not in sums)
    return "\n".join(ordered) + "\n"


def test_dp2_multiprocess_page_sums_engines() -> None:
    one = stream_of(snap(V033.read_text()), MODEL_033)
    two = stream_of(snap(_as_dp2_multiprocess(V033.read_text())), MODEL_033)
    for signal, histogram in one.histograms.items():
        folded = two.histograms[signal]
        assert folded.bounds == histogram.bounds
        assert folded.counts == tuple(3 * c for c in histogram.counts)
        assert folded.count == 3 * histogram.count
        assert folded.sum == pytest.approx(3 * histogram.sum)
    assert two.gauges["running"] == 3 * one.gauges["running"]
    assert two.gauges["kv_usage"] == one.gauges["kv_usage"]  # max, not sum
    assert two.counters["prompt_tokens"] == 3 * one.counters["prompt_tokens"]
    assert two.counters["finished:stop"] == 3 * one.counters["finished:stop"]
    assert set(two.engines) == {"0", "1"}
    assert two.engines["1"]["running"] == 2 * two.engines["0"]["running"]
    assert two.missing == ()


@pytest.mark.parametrize("path", sorted(SHARED_FIXTURES.rglob("*.prom")), ids=lambda p: p.name)
def test_every_fixture_normalises_with_warm_and_cold_caches_alike(path: Path) -> None:
    text = path.read_text()
    cold = snap(text)
    parse_cache, normalize_cache = ParseCache(), NormalizeCache()
    for _ in range(3):
        parsed = parse(text, cache=parse_cache)
        assert normalize(parsed, target="t", ts=100.0, cache=normalize_cache) == cold
    for stream in cold.streams.values():
        for histogram in stream.histograms.values():
            assert len(histogram.counts) == len(histogram.bounds) + 1
            assert list(histogram.bounds) == sorted(histogram.bounds)


# --- gauges, pid, engines ---------------------------------------------------------------


def test_pid_labels_fold_kv_usage_by_max() -> None:
    page = (
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        'vllm:kv_cache_usage_perc{engine="0",model_name="m",pid="101"} 0.25\n'
        'vllm:kv_cache_usage_perc{engine="0",model_name="m",pid="102"} 0.75\n'
        'vllm:kv_cache_usage_perc{engine="1",model_name="m",pid="101"} 0.5\n'
        'vllm:kv_cache_usage_perc{engine="1",model_name="m",pid="999"} 0.0\n'
        'vllm:num_requests_running{engine="0",model_name="m"} 2\n'
        'vllm:num_requests_running{engine="1",model_name="m"} 5\n'
    )
    stream = stream_of(snap(page))
    assert stream.gauges == {"kv_usage": 0.75, "running": 7.0}
    assert stream.engines == {
        "0": {"running": 2.0, "kv_usage": 0.75},
        "1": {"running": 5.0, "kv_usage": 0.5},
    }


def test_page_without_engine_label_is_engine_zero() -> None:
    stream = stream_of(snap('vllm:num_requests_waiting{model_name="m"} 4\n'))
    assert stream.engines == {"0": {"waiting": 4.0}}


def test_v0_prefix_hit_rate_is_kept_when_caching_is_on() -> None:
    stream = stream_of(snap('vllm:gpu_prefix_cache_hit_rate{model_name="m"} 0.4\n'))
    assert stream.gauges == {"prefix_hit_rate": 0.4}
    assert "prefix_hit_rate" not in stream.missing


def test_v0_prefix_hit_rate_of_minus_one_is_omitted() -> None:
    stream = stream_of(snap('vllm:gpu_prefix_cache_hit_rate{model_name="m"} -1\n'))
    assert stream.gauges == {} and stream.engines == {}
    assert "prefix_hit_rate" in stream.missing


def test_nan_gauge_is_ignored() -> None:
    stream = stream_of(snap('vllm:num_requests_running{model_name="m"} NaN\n'))
    assert "running" not in stream.gauges and "running" in stream.missing


# --- counters ---------------------------------------------------------------------------


def test_counters_and_finished_reasons_are_summed_over_engines() -> None:
    page = (
        'vllm:num_preemptions_total{engine="0",model_name="m"} 1\n'
        'vllm:num_preemptions_total{engine="1",model_name="m"} 2\n'
        'vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 3\n'
        'vllm:request_success_total{engine="1",finished_reason="stop",model_name="m"} 4\n'
        'vllm:request_success_total{engine="1",finished_reason="length",model_name="m"} 5\n'
    )
    assert stream_of(snap(page)).counters == {
        "preemptions": 3.0,
        "finished:stop": 7.0,
        "finished:length": 5.0,
    }


def test_new_prefix_cache_counters_win_over_deprecated_ones() -> None:
    page = (
        'vllm:gpu_prefix_cache_queries_total{model_name="m"} 10\n'
        'vllm:gpu_prefix_cache_hits_total{model_name="m"} 5\n'
        'vllm:prefix_cache_queries_total{model_name="m"} 100\n'
        'vllm:prefix_cache_hits_total{model_name="m"} 50\n'
    )
    stream = stream_of(snap(page))
    assert stream.counters == {"prefix_queries": 100.0, "prefix_hits": 50.0}
    assert "prefix_hit_rate" not in stream.missing  # the counters replace the V0 gauge


@pytest.mark.parametrize(
    ("help_line", "extra", "unit"),
    [
        ("GPU prefix cache queries, in terms of number of queried blocks.", "", "blocks"),
        ("GPU prefix cache queries, in terms of number of queried tokens.", "", "tokens"),
        ("Multiprocess metric", "", "blocks"),
        (None, "", "blocks"),
        (None, 'vllm:kv_cache_usage_perc{model_name="m"} 0.1\n', "tokens"),
    ],
)
def test_prefix_unit_follows_help_then_the_version_hint(
    help_line: str | None, extra: str, unit: str
) -> None:
    page = "# TYPE vllm:gpu_prefix_cache_queries_total counter\n"
    if help_line is not None:
        page = f"# HELP vllm:gpu_prefix_cache_queries_total {help_line}\n" + page
    page += 'vllm:gpu_prefix_cache_queries_total{model_name="m"} 10\n' + extra
    assert stream_of(snap(page)).prefix_unit == unit


# --- histograms -------------------------------------------------------------------------


def test_newest_itl_name_wins_when_both_are_present() -> None:
    labels = 'model_name="m"'
    page = hist("vllm:time_per_output_token_seconds", ["0.1", "+Inf"], [1, 2], 0.3, labels)
    page += hist("vllm:inter_token_latency_seconds", ["0.1", "+Inf"], [5, 9], 1.5, labels)
    assert stream_of(snap(page)).histograms["itl"].count == 9.0


def test_itl_falls_back_to_time_per_output_token_seconds() -> None:
    page = hist(
        "vllm:time_per_output_token_seconds", ["0.1", "+Inf"], [1, 2], 0.3, 'model_name="m"'
    )
    assert stream_of(snap(page)).histograms["itl"] == Histogram((0.1,), (1.0, 2.0), 0.3, 2.0)


def test_missing_inf_bucket_is_taken_from_count() -> None:
    page = (
        f'{TTFT}_bucket{{le="0.5",model_name="m"}} 3\n'
        f'{TTFT}_count{{model_name="m"}} 7\n'
        f'{TTFT}_sum{{model_name="m"}} 9\n'
    )
    assert stream_of(snap(page)).histograms["ttft"] == Histogram((0.5,), (3.0, 7.0), 9.0, 7.0)


def test_missing_count_is_taken_from_inf_bucket() -> None:
    page = (
        f'{TTFT}_bucket{{le="0.5",model_name="m"}} 3\n'
        f'{TTFT}_bucket{{le="+Inf",model_name="m"}} 7\n'
        f'{TTFT}_sum{{model_name="m"}} 9\n'
    )
    assert stream_of(snap(page)).histograms["ttft"].count == 7.0


def test_buckets_listed_out_of_order_come_back_ascending() -> None:
    page = (
        f'{TTFT}_sum{{model_name="m"}} 9\n'
        f'{TTFT}_bucket{{le="+Inf",model_name="m"}} 7\n'
        f'{TTFT}_bucket{{le="2.0",model_name="m"}} 5\n'
        f'{TTFT}_bucket{{le="0.5",model_name="m"}} 3\n'
    )
    assert stream_of(snap(page)).histograms["ttft"] == Histogram(
        (0.5, 2.0), (3.0, 5.0, 7.0), 9.0, 7.0
    )


def test_custom_bucket_bounds_are_read_not_assumed() -> None:
    page = hist(TTFT, ["0.333", "7", "1e3", "+Inf"], [1, 2, 3, 4], 10, 'model_name="m"')
    assert stream_of(snap(page)).histograms["ttft"].bounds == (0.333, 7.0, 1000.0)


def test_engines_with_another_layout_are_dropped_and_counted() -> None:
    page = hist(TTFT, ["0.1", "1.0", "+Inf"], [1, 2, 3], 1.0, 'engine="0",model_name="m"')
    page += hist(TTFT, ["0.2", "1.0", "+Inf"], [9, 9, 9], 9.0, 'engine="1",model_name="m"')
    page += hist(TTFT, ["0.1", "1.0", "+Inf"], [1, 1, 1], 0.5, 'engine="2",model_name="m"')
    snapshot = snap(page)
    assert stream_of(snapshot).histograms["ttft"] == Histogram(
        (0.1, 1.0), (2.0, 3.0, 4.0), 1.5, 4.0
    )
    assert snapshot.parse_errors == 1


def test_layout_tie_keeps_the_first_engine() -> None:
    page = hist(TTFT, ["0.1", "+Inf"], [1, 2], 1.0, 'engine="0",model_name="m"')
    page += hist(TTFT, ["0.2", "+Inf"], [3, 4], 2.0, 'engine="1",model_name="m"')
    snapshot = snap(page)
    assert stream_of(snapshot).histograms["ttft"].bounds == (0.1,)
    assert snapshot.parse_errors == 1


def test_cut_histogram_series_is_dropped_and_counted() -> None:
    page = (
        f'{TTFT}_bucket{{le="0.5",model_name="m"}} 3\n{TTFT}_bucket{{le="1.0",model_name="m"}} 4\n'
    )
    snapshot = snap(page)
    assert "ttft" not in stream_of(snapshot).histograms
    assert "ttft" in stream_of(snapshot).missing
    assert snapshot.parse_errors == 1


def test_bad_le_drops_the_series() -> None:
    page = hist(TTFT, ["fast", "+Inf"], [1, 2], 1.0, 'model_name="m"')
    snapshot = snap(page)
    assert "ttft" not in stream_of(snapshot).histograms and snapshot.parse_errors == 1


# --- streams, info, missing, disabled ---------------------------------------------------


def test_cache_config_info_goes_to_every_stream() -> None:
    page = (
        'vllm:cache_config_info{block_size="16",engine="1",num_gpu_blocks="900"} 1\n'
        'vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="1000"} 1\n'
        'vllm:num_requests_running{model_name="a"} 1\n'
        'vllm:num_requests_running{model_name="b"} 2\n'
    )
    snapshot = snap(page)
    for model in ("a", "b"):
        assert stream_of(snapshot, model).info == {"block_size": "16", "num_gpu_blocks": "1000"}


def test_series_without_model_name_joins_the_only_model() -> None:
    page = 'vllm:num_requests_running{model_name="m"} 1\nvllm:num_requests_waiting 2\n'
    snapshot = snap(page)
    assert list(snapshot.streams) == ["m"]
    assert stream_of(snapshot).gauges == {"running": 1.0, "waiting": 2.0}


def test_series_without_model_name_go_to_an_unnamed_stream_when_models_are_several() -> None:
    page = (
        'vllm:num_requests_running{model_name="a"} 1\n'
        'vllm:num_requests_running{model_name="b"} 1\n'
        "vllm:num_requests_waiting 2\n"
    )
    assert stream_of(snap(page), "").gauges == {"waiting": 2.0}


def test_page_without_any_model_name_gives_one_unnamed_stream() -> None:
    assert stream_of(snap("vllm:num_requests_waiting 2\n"), "").gauges == {"waiting": 2.0}


def test_missing_lists_core_signals_first() -> None:
    stream = stream_of(snap('vllm:num_requests_running{model_name="m"} 1\n'))
    assert stream.missing[: len(CORE_SIGNALS) - 1] == ("ttft", "itl", "waiting", "kv_usage")
    assert set(stream.missing) == set(ALL_SIGNALS) - {"running"}


def test_family_declared_without_samples_counts_as_missing() -> None:
    page = (
        f'# HELP {TTFT} h\n# TYPE {TTFT} histogram\nvllm:num_requests_running{{model_name="m"}} 1\n'
    )
    assert "ttft" in stream_of(snap(page)).missing


def test_model_on_other_vllm_families_only_still_gets_a_stream() -> None:
    page = 'vllm:admission_rejections_total{model_name="m",reason="max_num_queued_reqs"} 2\n'
    assert stream_of(snap(page)).missing == ALL_SIGNALS


def test_empty_page_is_neither_disabled_nor_a_stream() -> None:
    snapshot = snap("")
    assert snapshot.streams == {} and not snapshot.metrics_disabled


def test_page_with_process_metrics_only_is_metrics_disabled() -> None:
    page = "# TYPE process_open_fds gauge\nprocess_open_fds 45.0\n"
    assert snap(page).metrics_disabled


def test_parse_errors_and_target_and_time_are_carried() -> None:
    result = ParseResult(samples=[], types={"vllm:x": "gauge"}, errors=3, cut_last_line=True)
    snapshot = normalize(result, target="http://h:8000/metrics", ts=12.5)
    assert (snapshot.target, snapshot.ts, snapshot.parse_errors) == (
        "http://h:8000/metrics",
        12.5,
        3,
    )


def test_hand_made_samples_sharing_one_labels_tuple_are_read_right() -> None:
    labels = (("engine", "0"), ("model_name", "m"))
    samples = [
        Sample("vllm:num_requests_running", labels, 2.0),
        Sample("vllm:num_requests_waiting", labels, 3.0),
        Sample("vllm:prompt_tokens_total", labels, 4.0),
    ]
    result = ParseResult(samples=samples, types={}, errors=0, cut_last_line=False)
    stream = stream_of(normalize(result, target="t", ts=0.0))
    assert stream.gauges == {"running": 2.0, "waiting": 3.0}
    assert stream.counters == {"prompt_tokens": 4.0}


def test_all_signals_are_every_canonical_signal_once_with_core_first() -> None:
    canonical = HISTOGRAM_SIGNALS + GAUGE_SIGNALS + COUNTER_SIGNALS
    assert sorted(ALL_SIGNALS) == sorted(canonical)
    assert ALL_SIGNALS[: len(CORE_SIGNALS)] == CORE_SIGNALS
