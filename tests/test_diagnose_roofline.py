"""The decode ceiling: bandwidth / weight bytes, and weight bytes from a config."""

from __future__ import annotations

import pytest

from app.diagnose.kv import ModelShape
from app.diagnose.roofline import DEVICE_BANDWIDTH_GBS, Hardware, estimate_params, roofline
from tests.test_diagnose_kv import LLAMA_8B


@pytest.mark.parametrize(
    ("device", "ceiling"),
    [
        ("cpu", 6),
        ("a10g", 38),
        ("l40s", 54),
        ("rtx4090", 63),
        ("a100-80gb", 127),
        ("h100-sxm", 209),
    ],
)
def test_ceiling_for_an_8b_model_at_16_bit_matches_the_physics_table(device, ceiling):
    hw = Hardware.resolve(device=device, params=8e9, dtype="bfloat16")
    assert hw is not None and round(hw.ceiling_tok_s) == ceiling


def test_llama_8b_parameter_estimate_is_within_one_percent():
    total, active = estimate_params(ModelShape.from_config(LLAMA_8B))
    assert total == active
    assert abs(total - 8.03e9) / 8.03e9 < 0.01


def test_mixture_of_experts_reads_only_the_routed_experts():
    moe = {**LLAMA_8B, "num_local_experts": 8, "num_experts_per_tok": 2}
    total, active = estimate_params(ModelShape.from_config(moe))
    assert total > 3 * active > 0


def test_config_json_and_dtype_give_the_weight_bytes():
    hw = Hardware.resolve(device="h100-sxm", config=LLAMA_8B, dtype="fp8")
    assert hw is not None and abs(hw.weight_bytes - 8.03e9) / 8.03e9 < 0.01


def test_bandwidth_overrides_the_preset_and_no_model_means_no_roofline():
    hw = Hardware.resolve(device="cpu", bandwidth_gbs=100.0, weight_bytes=1e9)
    assert hw is not None and hw.ceiling_tok_s == 100.0
    assert Hardware.resolve(device="cpu") is None


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(ValueError, match="h100-sxm"):
        Hardware.resolve(device="tpu", weight_bytes=1e9)


def test_efficiency_is_measured_speed_over_ceiling():
    r = roofline(Hardware("x", 100.0, 1e9), itl_mean=0.02)
    assert (r.ceiling_tok_s, r.measured_tok_s, r.efficiency) == (100.0, 50.0, 0.5)
    assert roofline(Hardware("x", 100.0, 1e9), itl_mean=None).efficiency is None


def test_presets_match_the_physics_table():
    assert DEVICE_BANDWIDTH_GBS == {
        "cpu": 90,
        "a10g": 600,
        "l40s": 864,
        "rtx4090": 1008,
        "a100-80gb": 2039,
        "h100-sxm": 3350,
    }
