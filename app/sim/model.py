"""Model shapes and the step-time physics (``docs/concepts.md``).

One engine step runs every scheduled token through the model once. Its time is the larger
of two costs, plus ``overlap_loss`` times the smaller one (kernels overlap compute and
memory traffic imperfectly, so every extra step re-pays part of its weight read), plus a
fixed scheduling overhead:

* compute: ``2 * params`` FLOPs per new token (the matmuls) plus attention, ``4 * layers *
  hidden`` FLOPs per (new token, context token) pair, at ``peak FLOP/s * compute_efficiency``.
  Prefill chunks carry many tokens, so prefill is compute-bound; the attention term is the
  quadratic part that matters at long context.
* memory: all weight bytes plus the K/V bytes of every scheduled sequence's context, at
  ``bandwidth * bandwidth_efficiency``. A decode step carries one token per sequence, so
  decode is bandwidth-bound and a single stream is capped at bandwidth / weight bytes.

Weight quantisation (16/8/4 bit) changes the bytes read, not the FLOPs (kernels dequantise
to 16 bit before the matmul), so it speeds decode up and leaves prefill alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.sim.device import Device
from app.sim.errors import SimConfigError


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """The numbers of a decoder-only transformer that the physics needs."""

    name: str
    served_name: str
    params: float
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    weight_bits: int = 16
    kv_bits: int = 16

    @property
    def hidden(self) -> int:
        return self.heads * self.head_dim

    @property
    def weight_bytes(self) -> float:
        return self.params * self.weight_bits / 8

    @property
    def kv_bytes_per_token(self) -> int:
        """2 (K and V) x layers x KV heads x head dim x bytes per element."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.kv_bits // 8


MODEL_PRESETS: dict[str, ModelSpec] = {
    m.name: m
    for m in (
        ModelSpec("llama-3.2-1b", "meta-llama/Llama-3.2-1B-Instruct", 1.24e9, 16, 32, 8, 64),
        ModelSpec("llama-3.2-3b", "meta-llama/Llama-3.2-3B-Instruct", 3.2e9, 28, 24, 8, 128),
        ModelSpec("llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct", 8.0e9, 32, 32, 8, 128),
        ModelSpec("qwen2.5-14b", "Qwen/Qwen2.5-14B-Instruct", 14.7e9, 48, 40, 8, 128),
        ModelSpec("qwen2.5-32b", "Qwen/Qwen2.5-32B-Instruct", 32.5e9, 64, 40, 8, 128),
        ModelSpec("llama-3.1-70b", "meta-llama/Llama-3.1-70B-Instruct", 70.0e9, 80, 64, 8, 128),
    )
}

WEIGHT_BITS = (4, 8, 16)


def nearest_preset(params_b: float) -> str:
    """Name of the preset whose size is closest (in ratio) to ``params_b`` billion."""
    if params_b <= 0:
        raise SimConfigError(f"model size must be positive, got {params_b}B")
    return min(MODEL_PRESETS, key=lambda n: abs(math.log(MODEL_PRESETS[n].params / 1e9 / params_b)))


def get_model(
    preset: str,
    *,
    params_b: float | None = None,
    weight_bits: int = 16,
    kv_bits: int = 16,
    served_name: str | None = None,
    layers: int | None = None,
    heads: int | None = None,
    kv_heads: int | None = None,
    head_dim: int | None = None,
) -> ModelSpec:
    """Build a model from a preset, replacing any of its numbers."""
    try:
        base = MODEL_PRESETS[preset]
    except KeyError:
        known = ", ".join(MODEL_PRESETS)
        raise SimConfigError(f"unknown model preset {preset!r} (known: {known})") from None
    if weight_bits not in WEIGHT_BITS:
        raise SimConfigError(f"weight_bits must be one of {WEIGHT_BITS}, got {weight_bits}")
    if kv_bits not in (8, 16):
        raise SimConfigError(f"kv_bits must be 8 or 16, got {kv_bits}")
    params = base.params if params_b is None else float(params_b) * 1e9
    if params <= 0:
        raise SimConfigError(f"model size must be positive, got {params / 1e9}B")
    spec = ModelSpec(
        name=base.name,
        served_name=served_name or base.served_name,
        params=params,
        layers=layers or base.layers,
        heads=heads or base.heads,
        kv_heads=kv_heads or base.kv_heads,
        head_dim=head_dim or base.head_dim,
        weight_bits=weight_bits,
        kv_bits=kv_bits,
    )
    if min(spec.layers, spec.heads, spec.kv_heads, spec.head_dim) <= 0:
        raise SimConfigError("model layers, heads, kv_heads and head_dim must be positive")
    return spec


@dataclass(frozen=True, slots=True)
class PhysicsParams:
    """How close to the datasheet the kernels get, and the per-step CPU cost."""

    compute_efficiency: float = 0.6
    bandwidth_efficiency: float = 0.92
    step_overhead_s: float = 0.0003
    per_seq_overhead_s: float = 0.00001
    overlap_loss: float = 0.25
    activation_reserve_gb: float = 1.5

    def validate(self) -> None:
        if not 0 <= self.overlap_loss <= 1:
            raise SimConfigError(f"physics.overlap_loss must be in [0, 1], got {self.overlap_loss}")
        for name in ("compute_efficiency", "bandwidth_efficiency"):
            value = getattr(self, name)
            if not 0 < value <= 1:
                raise SimConfigError(f"physics.{name} must be in (0, 1], got {value}")
        for name in ("step_overhead_s", "per_seq_overhead_s", "activation_reserve_gb"):
            if getattr(self, name) < 0:
                raise SimConfigError(f"physics.{name} must not be negative")


class Physics:
    """Step time of one engine iteration on one device for one model."""

    __slots__ = (
        "device",
        "model",
        "params",
        "flops_per_token",
        "attn_flops_per_pair",
        "eff_flops",
        "eff_bandwidth",
        "weight_bytes",
        "kv_bytes_per_token",
        "overhead_s",
        "per_seq_s",
        "overlap_loss",
    )

    def __init__(self, device: Device, model: ModelSpec, params: PhysicsParams) -> None:
        params.validate()
        self.device = device
        self.model = model
        self.params = params
        self.flops_per_token = 2.0 * model.params
        self.attn_flops_per_pair = 4.0 * model.layers * model.hidden
        self.eff_flops = device.peak_flops * params.compute_efficiency
        self.eff_bandwidth = device.bandwidth_bytes_s * params.bandwidth_efficiency
        self.weight_bytes = model.weight_bytes
        self.kv_bytes_per_token = float(model.kv_bytes_per_token)
        self.overhead_s = params.step_overhead_s
        self.per_seq_s = params.per_seq_overhead_s
        self.overlap_loss = params.overlap_loss

    def step_time(
        self, new_tokens: int, attn_pairs: float, context_tokens: int, num_seqs: int
    ) -> float:
        """Seconds for one step.

        ``new_tokens``: tokens computed this step (1 per decode, the chunk per prefill);
        ``attn_pairs``: sum over new tokens of the context each attends to;
        ``context_tokens``: cached tokens whose K/V the step reads (all scheduled sequences).
        """
        compute = (
            self.flops_per_token * new_tokens + self.attn_flops_per_pair * attn_pairs
        ) / self.eff_flops
        memory = (
            self.weight_bytes + self.kv_bytes_per_token * (context_tokens + new_tokens)
        ) / self.eff_bandwidth
        if compute > memory:
            busy = compute + self.overlap_loss * memory
        else:
            busy = memory + self.overlap_loss * compute
        return busy + self.overhead_s + self.per_seq_s * num_seqs

    def prefill_time(self, prompt_tokens: int, chunk: int) -> float:
        """Seconds to prefill ``prompt_tokens`` alone, in chunks of at most ``chunk`` tokens."""
        done, total = 0, 0.0
        while done < prompt_tokens:
            n = min(chunk, prompt_tokens - done)
            total += self.step_time(n, n * done + n * (n + 1) / 2, done, 1)
            done += n
        return total

    def decode_step_time(self, batch: int, context: int) -> float:
        """Seconds for a pure decode step of ``batch`` sequences of ``context`` tokens each."""
        return self.step_time(batch, batch * (context + 1), batch * context, batch)

    def draft_time(self, tokens: int, cost: float) -> float:
        """Seconds a drafter needs for ``tokens`` draft tokens per step, each costing
        ``cost`` of one read of the target's weights (speculative decoding)."""
        return tokens * cost * self.weight_bytes / self.eff_bandwidth

    def decode_ceiling_tok_s(self) -> float:
        """Single-stream decode ceiling: bandwidth / weight bytes (no efficiency)."""
        return self.device.bandwidth_bytes_s / self.weight_bytes


def kv_pool_blocks(
    device: Device,
    model: ModelSpec,
    params: PhysicsParams,
    gpu_memory_utilization: float,
    block_size: int,
) -> int:
    """KV blocks that fit after weights and activations, as vLLM sizes the pool at start-up.

    Raises ``SimConfigError`` when the weights alone do not fit.
    """
    if not 0 < gpu_memory_utilization <= 1:
        raise SimConfigError(
            f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}"
        )
    budget = device.memory_bytes * gpu_memory_utilization
    free = budget - model.weight_bytes - params.activation_reserve_gb * 1e9
    if free <= 0:
        raise SimConfigError(
            f"{model.name} at {model.weight_bits} bit: weights ({model.weight_bytes / 1e9:.1f} GB)"
            f" + activations ({params.activation_reserve_gb} GB) do not fit in {device.name} x "
            f"gpu_memory_utilization {gpu_memory_utilization} = {budget / 1e9:.1f} GB; quantise "
            "the weights (--weight-bits) or pick a bigger device"
        )
    return int(free // (block_size * model.kv_bytes_per_token))
