"""The optional signals: families of some vLLM versions or features only, read when a
page has them and never reported missing (``app.model.OPTIONAL_*_SIGNALS``)."""

from __future__ import annotations

from app.model import ErrorKind, Snapshot, StreamSnapshot
from app.scrape.cache import ParseCache
from app.scrape.normalize import normalize
from app.scrape.parse import parse
from app.scrape.signals import ALL_SIGNALS, OPTIONAL_SIGNALS
from tests.fixtures_path import FIXTURES

V033 = FIXTURES / "vllm-generated" / "v0.33.0_V1_1engine_singleproc_GENERATED.prom"
V063 = FIXTURES / "vllm-generated" / "v0.6.3.post1_V0_singleproc_GENERATED.prom"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
BASE = 'vllm:num_requests_running{engine="0",model_name="m"} 1.0\n'


def stream(text: str, model: str = "m") -> StreamSnapshot:
    snapshot = snap(text)
    assert model in snapshot.streams, list(snapshot.streams)
    return snapshot.streams[model]


def snap(text: str) -> Snapshot:
    return normalize(parse(text, cache=ParseCache()), target="t", ts=100.0)


def test_optional_signals_are_apart_from_the_ones_reported_missing() -> None:
    assert not set(OPTIONAL_SIGNALS) & set(ALL_SIGNALS)
    assert len(set(OPTIONAL_SIGNALS)) == len(OPTIONAL_SIGNALS)


def test_033_page_reads_waiting_reasons_prompt_sources_external_cache_and_rejections() -> None:
    s = stream(V033.read_text(), MODEL)
    assert s.gauges["waiting_capacity"] == 3.0 and s.gauges["waiting_deferred"] == 0.0
    assert s.counters["prompt_tokens_local_compute"] == 3000.0
    assert s.counters["prompt_tokens_local_cache_hit"] == 1024.0
    assert s.counters["prompt_tokens_external_kv_transfer"] == 0.0
    assert s.counters["external_prefix_queries"] == 0.0
    assert s.counters["external_prefix_hits"] == 0.0
    assert s.counters["admission_rejections"] == 0.0  # both reasons, no engine label
    assert s.missing == ()
    assert not any(name.startswith("spec_") for name in s.counters)  # not configured


def test_v0_page_without_the_new_families_reports_none_of_them_missing() -> None:
    s = stream(V063.read_text(), MODEL)
    assert not set(OPTIONAL_SIGNALS) & (set(s.counters) | set(s.gauges) | set(s.missing))


def test_waiting_reasons_are_summed_over_engines_and_kept_per_engine() -> None:
    page = "".join(
        f'vllm:num_requests_waiting_by_reason{{engine="{e}",model_name="m",reason="{r}"}} {v}\n'
        for e, r, v in (("0", "capacity", 2), ("0", "deferred", 1), ("1", "capacity", 5))
    )
    s = stream(page)
    assert s.gauges == {"waiting_capacity": 7.0, "waiting_deferred": 1.0}
    assert s.engines["0"] == {"waiting_capacity": 2.0, "waiting_deferred": 1.0}
    assert s.engines["1"] == {"waiting_capacity": 5.0}


def test_a_label_value_phasewatch_does_not_know_is_ignored() -> None:
    page = BASE + (
        'vllm:num_requests_waiting_by_reason{engine="0",model_name="m",reason="lora"} 4.0\n'
        'vllm:prompt_tokens_by_source_total{engine="0",model_name="m",source="disk"} 9.0\n'
    )
    s = stream(page)
    assert s.gauges == {"running": 1.0}
    assert s.counters == {}


def test_an_invalid_source_leaves_only_that_source_out() -> None:
    page = BASE + "".join(
        f'vllm:prompt_tokens_by_source_total{{engine="0",model_name="m",source="{src}"}} {v}\n'
        for src, v in (("local_compute", "-5"), ("local_cache_hit", "12"))
    )
    snapshot = snap(page)
    s = snapshot.streams["m"]
    assert "prompt_tokens_local_compute" not in s.counters
    assert "prompt_tokens_local_compute" in s.withheld
    assert s.counters["prompt_tokens_local_cache_hit"] == 12.0
    assert [p.kind for p in snapshot.problems] == [ErrorKind.INVALID_VALUES]


def test_conflicting_copies_of_one_reason_withhold_that_reason() -> None:
    line = 'vllm:num_requests_waiting_by_reason{engine="0",model_name="m",reason="capacity"}'
    page = BASE + f"{line} 2.0\n{line} 3.0\n"
    s = stream(page)
    assert "waiting_capacity" in s.withheld and "waiting_capacity" not in s.gauges


def test_spec_decode_counters_are_read_per_engine_and_summed() -> None:
    names = {
        "spec_decode_num_drafts_total": 10,
        "spec_decode_num_draft_tokens_total": 40,
        "spec_decode_num_accepted_tokens_total": 25,
    }
    page = BASE + "".join(
        f'vllm:{name}{{engine="{e}",model_name="m"}} {v}\n'
        for name, v in names.items()
        for e in ("0", "1")
    )
    per_pos = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
    page += f'{per_pos}{{engine="0",model_name="m",position="0"}} 9\n'  # not read
    s = stream(page)
    assert s.counters == {
        "spec_drafts": 20.0,
        "spec_draft_tokens": 80.0,
        "spec_accepted_tokens": 50.0,
    }


def test_v0_spec_decode_counters_share_the_v1_names() -> None:
    page = (
        'vllm:num_requests_running{model_name="m"} 1.0\n'
        'vllm:spec_decode_num_draft_tokens_total{model_name="m"} 30.0\n'
        'vllm:spec_decode_num_accepted_tokens_total{model_name="m"} 12.0\n'
    )
    s = stream(page)
    assert s.counters == {"spec_draft_tokens": 30.0, "spec_accepted_tokens": 12.0}
