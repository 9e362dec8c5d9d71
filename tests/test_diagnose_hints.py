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
    "insufficient_data",
}

# Capacity advice: never for a stall or deferred admission (neither is short of capacity).
CAPACITY = {"more-replicas", "max-num-seqs-up", "quantize-weights", "batched-tokens-up"}


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
