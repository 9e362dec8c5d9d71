"""The hint catalog is well-formed data, and every problem situation has hints."""

from __future__ import annotations

from app.diagnose.hints import CATALOG, SITUATION_FOCUS

SITUATIONS = {
    "stalled",
    "kv_pressure",
    "queue_bound/arrival_surge",
    "queue_bound/capacity_loss",
    "queue_bound/deferred",
    "prefill_bound/long_prompts",
    "prefill_bound/prefix_cache_miss",
    "decode_bound/prefill_interference",
    "decode_bound/bandwidth_bound",
    "decode_bound/spec_decode_regression",
    "frontend_bound",
    "transfer_bound/slow_transfer",
    "transfer_bound/transfer_failures",
    "transfer_bound/kv_expired",
    "insufficient_data",
}

# Capacity advice: never for a stall or deferred admission (neither is short of capacity).
CAPACITY = {
    "more-replicas",
    "max-num-seqs-up",
    "quantize-weights",
    "batched-tokens-up",
    "rate-limit",
}


def test_hint_ids_are_unique_and_every_entry_is_complete():
    ids = [h.id for h in CATALOG]
    assert len(ids) == len(set(ids))
    for h in CATALOG:
        assert h.title and h.why and h.applies and callable(h.build)


def test_every_change_a_hint_addresses_is_a_compared_signal():
    from app.diagnose.changes import SIGNALS

    for h in CATALOG:
        for a in h.addresses:
            assert a.rstrip("+-") in SIGNALS, (h.id, a)
    for lead in SITUATION_FOCUS.values():
        assert lead.rstrip("+-") in SIGNALS
        # Without a baseline the sub-cause's own signal leads: some hint answers it.
        assert any(lead in h.addresses for h in CATALOG), lead


def test_every_situation_has_at_least_two_hints_and_no_unknown_situation_is_named():
    named = {s for h in CATALOG for s in h.applies}
    assert named == SITUATIONS
    for s in SITUATIONS - {"insufficient_data"}:
        assert sum(s in h.applies for h in CATALOG) >= 2


def test_no_capacity_advice_for_a_stall_or_deferred_admission():
    for situation in ("stalled", "queue_bound/deferred"):
        named = {h.id for h in CATALOG if situation in h.applies}
        assert named and not named & CAPACITY, (situation, named & CAPACITY)


def test_catalog_covers_the_levers_of_the_physics():
    ids = {h.id for h in CATALOG}
    assert ids >= {
        "prefix-caching",
        "shorter-prompt",
        "batched-tokens-up",
        "batched-tokens-down",
        "quantize-weights",
        "fp8-kv-cache",
        "gpu-memory-utilization",
        "max-model-len",
        "max-num-seqs-down",
        "max-num-seqs-up",
        "more-replicas",
        "disaggregated-prefill",
    }


# --- hints built from the evidence and the server's settings ---------------------------------
# Each hint's premise, contradicted → the hint is absent; the number it computes from the
# evidence (and the page's cache_config_info, the configured settings, vLLM's defaults) →
# present with that number.

import dataclasses  # noqa: E402

from app.diagnose import DiagnosisConfig, diagnose  # noqa: E402
from app.diagnose.changes import Baseline, with_changes  # noqa: E402
from app.diagnose.records import BaselineInfo, Diagnosis  # noqa: E402
from app.diagnose.server import ServerSettings, resolve  # noqa: E402
from app.model import Derived, Window  # noqa: E402
from tests.diagnose_windows import make_window  # noqa: E402

# The page of a server whose pool was sized at 0.6 of the GPU (the simulator's
# kv_pressure scenario): 5,388 blocks of 16 tokens.
PAGE_AT_06 = {
    "block_size": "16",
    "cache_dtype": "auto",
    "enable_prefix_caching": "True",
    "gpu_memory_utilization": "0.6",
    "num_gpu_blocks": "5388",
}


def _kv_window(info: dict[str, str] | None = None, **kw) -> Window:
    """A full pool: usage avg 95 %, max 100 %, preemptions, 20 running, 4 waiting."""
    args = dict(kv=(0.95, 1.0), preemptions=12, running=(20.0, 24.0), waiting=(4.0, 9.0, 5.0))
    args.update(kw)
    w = make_window(**args)
    return dataclasses.replace(w, info=info or {})


def _hint(d: Diagnosis, hint_id: str):
    return next((h for h in d.hints if h.id == hint_id), None)


def _ids(d: Diagnosis) -> list[str]:
    return [h.id for h in d.hints]


def _config(**server) -> DiagnosisConfig:
    return DiagnosisConfig(server=ServerSettings(**server))


def test_every_hint_shown_quotes_its_evidence_first():
    for w in (
        _kv_window(PAGE_AT_06),
        make_window(itl=(0.03, 0.35, 20000, 0.05), step_tokens=(9.0, 8192.0, 3000)),
        make_window(ttft=(1.8, 3.5, 100, 2.0), queue_time=(0.05, 100), prompt_len=1800),
    ):
        d = diagnose(w)
        assert d.hints
        for h in d.hints:
            assert h.evidence and h.why.startswith(h.evidence), h
            assert any(c.isdigit() for c in h.evidence), h  # a number, not a generic line


def test_gpu_memory_utilization_starts_from_what_the_server_runs_at():
    d = diagnose(_kv_window(PAGE_AT_06))
    h = _hint(d, "gpu-memory-utilization")
    assert h is not None
    # Never "0.95 (default 0.9)" on a server running at 0.6: from its own 0.6.
    assert "default 0.9" not in h.action and "(now 0.6, cache_config_info)" in h.action
    # Demand: (20 running + 4 waiting) × (0.95 × 86,208 / 20 tokens each) / 0.9 = 1.27× the
    # pool → 0.6 + 0.27 × 0.6 = 0.76 → 0.80 (steps of 0.05).
    assert h.action.startswith("--gpu-memory-utilization 0.80 ")
    # +blocks = num_gpu_blocks × (new − now) / now (the weights' share unknown: at least).
    extra = 5388 * (0.80 - 0.6) / 0.6
    assert f"+{extra:,.0f} blocks = +{extra * 16:,.0f} tokens of KV" in h.evidence
    assert "at least this" in h.evidence


def test_gpu_memory_utilization_with_the_weights_share_from_the_gpu_and_model():
    from app.diagnose import Hardware

    hw = Hardware(device="l40s", bandwidth_gbs=864.0, weight_bytes=16e9)
    config = DiagnosisConfig(hardware=hw, server=ServerSettings(device="L40S"))
    h = _hint(diagnose(_kv_window(PAGE_AT_06), config), "gpu-memory-utilization")
    assert h is not None
    w = 16e9 / 48e9  # weights / memory
    new = 0.8 if "0.80" in h.action else float(h.action.split()[1])
    extra = 5388 * (new - 0.6) / (0.6 - w)
    assert f"+{extra:,.0f} blocks" in h.evidence and "0.33 the weights' share" in h.evidence


def test_no_more_pool_memory_for_a_server_already_at_the_most_a_hint_gives():
    page = {**PAGE_AT_06, "gpu_memory_utilization": "0.95"}
    assert "gpu-memory-utilization" not in _ids(diagnose(_kv_window(page)))


def test_the_page_wins_over_the_configuration_and_the_disagreement_is_said():
    config = _config(gpu_memory_utilization=0.9)
    d = diagnose(_kv_window(PAGE_AT_06), config)
    assert "(now 0.6, cache_config_info)" in (_hint(d, "gpu-memory-utilization") or d).action
    assert any("gpu_memory_utilization is configured as 0.9" in n for n in d.notes)
    assert d.server is not None and d.server.gpu_memory_utilization.source == "page"


def test_without_page_or_configuration_the_default_is_said_to_be_assumed():
    h = _hint(diagnose(_kv_window()), "gpu-memory-utilization")
    assert h is not None and "now 0.9, assumed vLLM default" in h.action
    assert h.action.startswith("--gpu-memory-utilization 0.95 ")
    view = resolve(ServerSettings())
    assert view.max_num_seqs.said().startswith("256, assumed vLLM default")
    assert view.max_num_batched_tokens.value == 2048
    big = resolve(ServerSettings(device="H100-80GB"))
    assert (big.max_num_seqs.value, big.max_num_batched_tokens.value) == (1024, 8192)
    a100 = resolve(ServerSettings(device="A100-80GB"))
    assert (a100.max_num_seqs.value, a100.max_num_batched_tokens.value) == (256, 2048)


def test_no_fp8_kv_cache_for_a_cache_that_is_fp8_already():
    assert "fp8-kv-cache" in _ids(diagnose(_kv_window(PAGE_AT_06)))
    fp8 = {**PAGE_AT_06, "cache_dtype": "fp8_e4m3"}
    assert "fp8-kv-cache" not in _ids(diagnose(_kv_window(fp8)))
    h = _hint(diagnose(_kv_window(PAGE_AT_06)), "fp8-kv-cache")
    assert h is not None and "the pool holds 86,208 tokens in 16 bit, 172,416 in fp8" in h.why


def test_max_num_seqs_down_is_what_fits_the_pool():
    h = _hint(diagnose(_kv_window(PAGE_AT_06)), "max-num-seqs-down")
    assert h is not None
    assert h.action.startswith("--max-num-seqs 18 ")  # 20 × 0.90 / 0.95 = 18.9
    assert "so 18 fit at 90%" in h.evidence


def test_max_num_seqs_up_needs_running_at_the_limit_and_room_in_the_pool():
    w = make_window(
        ttft=(2.0, 4.0, 90, 2.6),
        queue_time=(2.2, 90),
        waiting=(40.0, 60.0, 50.0),
        running=(128.0, 128.0),
        kv=(0.3, 0.4),
    )
    d = diagnose(w, _config(max_num_seqs=128))
    h = _hint(d, "max-num-seqs-up")
    assert h is not None
    assert h.action.startswith("--max-num-seqs 256 (now 128, configured)")  # ×2 at most
    assert "running sat at 128, the configured limit" in h.evidence
    # Below the configured limit, or with the pool nearly full: absent.
    assert "max-num-seqs-up" not in _ids(diagnose(w, _config(max_num_seqs=200)))
    full = dataclasses.replace(w, gauges={**w.gauges, "kv_usage": w.gauges["running"]})
    assert "max-num-seqs-up" not in _ids(diagnose(full, _config(max_num_seqs=128)))


def test_lower_the_step_budget_with_the_step_size_the_page_shows():
    w = make_window(itl=(0.03, 0.35, 20000, 0.05), step_tokens=(9.0, 8192.0, 3000))
    d = diagnose(w, _config(max_num_batched_tokens=8192))
    h = d.hints[0]
    assert h.id == "batched-tokens-down"
    assert h.action.startswith("--max-num-batched-tokens 2048 (now 8,192, configured)")
    assert h.evidence.startswith("steps of 8,192 tokens (p99")
    # Already at 2048 (issue #44 item 6): never "2048" again — half the chunk, half the
    # stall it adds, down to 512; then disaggregation is next.
    at = _hint(diagnose(w, _config(max_num_batched_tokens=2048)), "batched-tokens-down")
    assert at is not None and at.action.startswith("--max-num-batched-tokens 1024 (now 2,048")
    assert "about half the stall of 2048" in at.evidence
    assert "batched-tokens-down" not in _ids(diagnose(w, _config(max_num_batched_tokens=512)))
    # Not configured, vLLM's default (2048) is in force as far as anyone knows: the same.
    near = make_window(itl=(0.03, 0.35, 20000, 0.05), step_tokens=(9.0, 2300.0, 3000))
    assumed = _hint(diagnose(near), "batched-tokens-down")
    assert assumed is not None and assumed.action.startswith("--max-num-batched-tokens 1024")
    assert "batched-tokens-down" in _ids(diagnose(near, _config(max_num_batched_tokens=4096)))


def test_no_replicas_for_prefill_interference_with_nothing_waiting():
    w = make_window(itl=(0.03, 0.35, 20000, 0.05), step_tokens=(9.0, 8192.0, 3000))
    assert "more-replicas" not in _ids(diagnose(w))
    queued = make_window(
        itl=(0.03, 0.35, 20000, 0.05), step_tokens=(9.0, 8192.0, 3000), waiting=(3.0, 5.0, 4.0)
    )
    h = _hint(diagnose(queued), "more-replicas")
    assert h is not None and h.evidence.startswith("3 requests waiting on average")


def _surge_window(**kw) -> Window:
    args = dict(
        ttft=(2.0, 4.0, 90, 2.6),
        queue_time=(2.2, 90),
        waiting=(40.0, 60.0, 50.0),
        running=(128.0, 128.0),
        kv=(0.3, 0.4),
        prompt_len=6000.0,
        prefix=(1000, 0),
    )
    args.update(kw)
    w = make_window(**args)
    now = Derived(arrival_rate=16.0, completion_rate=11.0, prompt_tokens_mean=6000.0)
    return dataclasses.replace(w, derived=now)


def test_a_traffic_surge_leads_with_replicas_and_rate_limiting():
    d = diagnose(_surge_window(), _config(max_num_batched_tokens=2048))
    assert d.label == "queue_bound/arrival_surge"
    ids = _ids(d)
    # The prompts span three steps (6,000 tokens at 2,048): the bigger budget is promoted,
    # yet it comes after what addresses the surge itself.
    assert ids[:2] == ["more-replicas", "rate-limit"]
    assert ids.index("batched-tokens-up") > ids.index("rate-limit")
    replicas, limit = d.hints[0], d.hints[1]
    assert "≈ 1.5× the replicas" in replicas.action  # 16 / 11 arrivals per completion
    assert "arrivals 16/s > completions 11/s" in limit.evidence
    assert "≈ 11/s per replica" in limit.action


def test_no_rate_limit_while_the_queue_drains():
    w = _surge_window()
    draining = dataclasses.replace(w, derived=Derived(arrival_rate=9.0, completion_rate=11.0))
    assert "rate-limit" not in _ids(diagnose(draining))


def _with_headline(d: Diagnosis, w: Window, before: Derived) -> Diagnosis:
    info = BaselineInfo(run_start=900.0, healthy_s=1800.0, needed_s=600.0)
    return with_changes(d, w, Baseline(before, info), config=DiagnosisConfig())


def test_the_hint_that_addresses_the_headline_change_comes_first():
    w = make_window(
        ttft=(1.8, 3.5, 100, 2.0), queue_time=(0.05, 100), prompt_len=6000.0, prefix=(1000, 50)
    )
    now = Derived(prompt_tokens_mean=6000.0, prefix_cache_hit_rate=0.05, arrival_rate=1.0)
    w = dataclasses.replace(w, derived=now)
    # The hit rate collapsed (0.85 → 0.05) at the same prompt: restore the prefix first.
    before = Derived(prompt_tokens_mean=6000.0, prefix_cache_hit_rate=0.85, arrival_rate=1.0)
    d = _with_headline(diagnose(w, baseline=before), w, before)
    assert d.changes[0].signal == "prefix_cache_hit_rate"
    assert d.hints[0].id == "stable-prefix"
    assert "hit rate fell 0.85 → 0.05: uncached prompt tokens ×6.3" in d.hints[0].evidence
    # The prompt grew ×6 at the same hit rate: shorten it first.
    before = Derived(prompt_tokens_mean=1000.0, prefix_cache_hit_rate=0.05, arrival_rate=1.0)
    d = _with_headline(diagnose(w, baseline=before), w, before)
    assert d.changes[0].signal == "prompt_tokens_mean"
    assert d.hints[0].id == "shorter-prompt"
    assert "(was 1,000: ×6)" in d.hints[0].evidence


def test_no_prefix_caching_advice_when_the_page_says_it_is_on():
    w = make_window(ttft=(1.8, 3.5, 100, 2.0), queue_time=(0.05, 100), prefix=(0.0, 0.0))
    assert diagnose(w).hints[0].id == "prefix-caching"  # no lookups at all: off
    off = dataclasses.replace(
        make_window(ttft=(1.8, 3.5, 100, 2.0), queue_time=(0.05, 100)),
        info={**PAGE_AT_06, "enable_prefix_caching": "False"},
    )
    h = _hint(diagnose(off), "prefix-caching")
    assert h is not None and "enable_prefix_caching False (cache_config_info)" in h.evidence
    on = dataclasses.replace(off, info=PAGE_AT_06)
    assert "prefix-caching" not in _ids(diagnose(on))


def test_no_collective_hang_on_one_gpu_and_no_quantising_quantised_weights():
    from tests.test_diagnose_subcauses import _frozen

    assert "hang-collective" in _ids(diagnose(_frozen()))
    assert "hang-collective" not in _ids(diagnose(_frozen(), _config(tensor_parallel_size=1)))
    w = make_window(
        itl=(0.13, 0.17, 20000, 0.135), step_tokens=(60.0, 80.0, 3000), running=(60, 64)
    )
    assert diagnose(w).hints[0].id == "quantize-weights"
    assert "quantize-weights" not in _ids(diagnose(w, _config(quantization="awq")))
    h = _hint(diagnose(w, _config(quantization="fp8")), "quantize-weights")
    assert h is not None and "4-bit" in h.action and "weights now fp8" in h.evidence


def test_server_for_merges_the_target_block_under_the_flags():
    config = DiagnosisConfig(
        servers=(("a", ServerSettings(max_num_seqs=64, device="L40S")),),
        server=ServerSettings(max_num_seqs=32),
    )
    assert config.server_for("a") == ServerSettings(max_num_seqs=32, device="L40S")
    assert config.server_for("b") == ServerSettings(max_num_seqs=32)
