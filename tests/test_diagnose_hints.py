"""The hint catalog is well-formed data, and every problem situation has hints."""

from __future__ import annotations

from app.diagnose.hints import CATALOG, PREDICATES

SITUATIONS = {
    "kv_pressure",
    "queue_bound",
    "prefill_bound",
    "decode_bound/prefill_interference",
    "decode_bound/bandwidth_bound",
    "insufficient_data",
}


def test_hint_ids_are_unique_and_every_entry_is_complete():
    ids = [h.id for h in CATALOG]
    assert len(ids) == len(set(ids))
    for h in CATALOG:
        assert h.title and h.action and h.why and h.applies


def test_every_condition_a_hint_names_exists():
    for h in CATALOG:
        for name in (h.requires, h.promote):
            assert name is None or name in PREDICATES


def test_every_situation_has_at_least_two_hints_and_no_unknown_situation_is_named():
    named = {s for h in CATALOG for s in h.applies}
    assert named == SITUATIONS
    for s in SITUATIONS - {"insufficient_data"}:
        assert sum(s in h.applies for h in CATALOG) >= 2


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
