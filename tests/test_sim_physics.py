"""Physics claims (docs/concepts.md), pinned on the simulator."""

from __future__ import annotations

from typing import Any

import pytest

from app.sim.device import PRESETS
from app.sim.engine import Replica
from app.sim.metrics import Hist
from app.sim.model import get_model
from app.sim.scenario import Scenario, from_tree, load


def _scenario(device: str = "l40s", bits: int = 16, **engine: Any) -> Scenario:
    tree: dict[str, Any] = {
        "name": "lab",
        "device": device,
        "model": {"preset": "llama-3.1-8b", "weight_bits": bits},
        "engine": {"max_model_len": 8192, "enable_prefix_caching": False, **engine},
        "workload": {"rate": 0.0, "classes": [{"prompt_tokens": 100, "output_tokens": 10}]},
    }
    if device == "cpu":
        tree["engine"]["max_model_len"] = 4096
    return from_tree(tree)


def _single_stream(device: str, bits: int = 16, prompt: int = 200, output: int = 200) -> Replica:
    rep = Replica(_scenario(device, bits))
    rep.submit(prompt, output)
    rep.advance_to(10_000.0)
    assert rep.metrics.success["length"] == 1
    return rep


def _mean(h: Hist) -> float:
    return h.sum / h.count


def test_kv_bytes_per_token_of_a_typical_8b_config() -> None:
    model = get_model("llama-3.1-8b")
    assert (model.layers, model.kv_heads, model.head_dim, model.kv_bits) == (32, 8, 128, 16)
    assert model.kv_bytes_per_token == 131_072


def test_single_stream_decode_on_h100_is_just_below_the_bandwidth_ceiling() -> None:
    rep = _single_stream("h100-sxm")
    ceiling = rep.physics.decode_ceiling_tok_s()
    assert ceiling == pytest.approx(209, abs=1)
    tok_s = 1.0 / _mean(rep.metrics.itl)
    assert 0.85 * ceiling <= tok_s < ceiling


@pytest.mark.parametrize("device", sorted(PRESETS))
def test_decode_never_beats_the_ceiling_on_any_preset(device: str) -> None:
    rep = _single_stream(device, prompt=100, output=20)
    assert 1.0 / _mean(rep.metrics.itl) < rep.physics.decode_ceiling_tok_s()


@pytest.mark.parametrize("device", ["a10g", "l40s", "h100-sxm"])
def test_8_bit_weights_decode_about_twice_as_fast(device: str) -> None:
    itl16 = _mean(_single_stream(device, 16).metrics.itl)
    itl8 = _mean(_single_stream(device, 8).metrics.itl)
    assert 1.7 <= itl16 / itl8 <= 2.05


@pytest.mark.parametrize("device", sorted(PRESETS))
def test_ttft_grows_with_the_prompt_while_itl_barely_moves(device: str) -> None:
    short = _single_stream(device, prompt=200, output=50).metrics
    long = _single_stream(device, prompt=2000, output=50).metrics
    assert _mean(long.ttft) >= 5 * _mean(short.ttft)
    assert _mean(long.itl) == pytest.approx(_mean(short.itl), rel=0.05)


def _decode_throughput(batch: int, blocks: int) -> float:
    """Generated tokens/s once ``batch`` identical requests are all decoding."""
    rep = Replica(_scenario("l40s", num_gpu_blocks_override=blocks, max_model_len=4096))
    for _ in range(batch):
        rep.submit(1000, 400)
    rep.advance_to(3.0)
    before, t0 = rep.metrics.generation_tokens, rep.now
    rep.advance_to(6.0)
    return (rep.metrics.generation_tokens - before) / (rep.now - t0)


def test_decode_throughput_grows_nearly_linearly_until_the_kv_pool_is_full() -> None:
    blocks = 1600  # 25,600 tokens: 16 sequences of up to 1,400 tokens fit, 32 do not
    thr = {b: _decode_throughput(b, blocks) for b in (1, 2, 4, 8, 16, 32, 64)}
    for b in (2, 4, 8, 16):
        assert thr[b] >= 0.8 * b * thr[1], (b, thr)
    # Past the pool's capacity the batch cannot grow: throughput plateaus.
    assert thr[32] < 0.8 * 32 * thr[1], thr
    assert thr[64] <= 1.05 * thr[32], thr


def test_more_flops_do_not_stream_faster_but_shorten_long_prompt_ttft() -> None:
    base = _scenario("l40s")
    faster = from_tree(
        {
            "name": "lab",
            "device": {"preset": "l40s", "peak_tflops": 724.0},
            "model": "llama-3.1-8b",
            "engine": {"enable_prefix_caching": False},
            "workload": {"rate": 0.0, "classes": [{"prompt_tokens": 1, "output_tokens": 1}]},
        }
    )
    out = []
    for sc in (base, faster):
        rep = Replica(sc)
        rep.submit(4000, 50)
        rep.advance_to(100.0)
        out.append((_mean(rep.metrics.ttft), _mean(rep.metrics.itl)))
    (ttft_a, itl_a), (ttft_b, itl_b) = out
    assert itl_b == pytest.approx(itl_a, rel=0.05)
    assert ttft_b < 0.7 * ttft_a


def _quantile(h: Hist, q: float) -> float:
    """histogram_quantile over the simulator's own buckets (linear inside a bucket)."""
    cum = h.cumulative()
    rank = q * cum[-1]
    lo, below = 0.0, 0
    for hi, c in zip(h.bounds, cum, strict=False):
        if c >= rank:
            return lo + (hi - lo) * (rank - below) / max(1, c - below)
        lo, below = hi, c
    return h.bounds[-1]


def test_lower_token_budget_trades_ttft_for_itl_under_prefill_interference() -> None:
    results = []
    for budget in (8192, 2048, 512):
        sc = load("prefill_interference", {"engine.max_num_batched_tokens": budget})
        rep = Replica(sc, seed=3)
        rep.advance_to(240.0)
        m = rep.metrics
        results.append((budget, _quantile(m.itl, 0.99), _mean(m.ttft)))
    for (_, itl_hi, ttft_hi), (_, itl_lo, ttft_lo) in zip(results, results[1:], strict=False):
        assert itl_lo < 0.5 * itl_hi, results
        assert ttft_lo > ttft_hi, results
    assert results[0][1] > 0.1 > results[-1][1], results  # over the ITL SLO, then within
