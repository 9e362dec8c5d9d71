"""The decode ceiling: single-stream tokens/s ≤ memory bandwidth / bytes of weights.

Decode reads every weight once per step and uses it for about two operations, so memory
bandwidth, not compute, sets the pace (docs/concepts.md, "The decode ceiling"). Comparing the
ceiling with the measured per-stream speed (1 / mean ITL) tells whether to work on the
serving stack (far below the ceiling) or on bytes and hardware (close to it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.diagnose.kv import ModelShape, dtype_bytes
from app.diagnose.records import Roofline

# Published memory bandwidth, GB/s (docs/concepts.md, "The decode ceiling").
DEVICE_BANDWIDTH_GBS: dict[str, float] = {
    "cpu": 90.0,  # dual-channel DDR5-5600
    "a10g": 600.0,
    "l40s": 864.0,
    "rtx4090": 1008.0,
    "a100-80gb": 2039.0,  # SXM
    "h100-sxm": 3350.0,
}


def estimate_params(shape: ModelShape) -> tuple[float, float]:
    """(total, active per token) parameter counts of a decoder-only transformer.

    Embeddings (vocab × hidden, twice unless tied), attention (Q and O: hidden × heads ×
    head_dim each; K and V: hidden × KV heads × head_dim each) and a gated MLP (3 ×
    hidden × intermediate, as Llama, Mistral and Qwen use). Mixture-of-experts: every
    expert is stored, only ``experts_per_token`` of them are read per token. Norms and
    biases are ignored (< 0.1 %). Raises ValueError without intermediate_size/vocab_size.
    """
    if shape.vocab_size is None or (
        shape.intermediate_size is None and shape.moe_intermediate_size is None
    ):
        raise ValueError("config.json lacks intermediate_size or vocab_size")
    h = shape.hidden_size
    attn = h * shape.head_dim * (2 * shape.num_attention_heads + 2 * shape.num_key_value_heads)
    embeddings = shape.vocab_size * h * (1 if shape.tie_word_embeddings else 2)
    if shape.num_experts:
        expert = 3 * h * (shape.moe_intermediate_size or shape.intermediate_size or 0)
        k = shape.experts_per_token or 1
        total_mlp, active_mlp = shape.num_experts * expert, k * expert
    else:
        total_mlp = active_mlp = 3 * h * (shape.intermediate_size or 0)
    layers = shape.num_hidden_layers
    total = float(embeddings + layers * (attn + total_mlp))
    active = float(embeddings + layers * (attn + active_mlp))
    return total, active


@dataclass(frozen=True, slots=True)
class Hardware:
    """A device's memory bandwidth and the bytes of weights one decode step reads."""

    device: str
    bandwidth_gbs: float
    weight_bytes: float

    @property
    def ceiling_tok_s(self) -> float:
        return decode_ceiling(self.bandwidth_gbs, self.weight_bytes)

    @classmethod
    def resolve(
        cls,
        *,
        device: str | None = None,
        bandwidth_gbs: float | None = None,
        weight_bytes: float | None = None,
        params: float | None = None,
        dtype: str | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> Hardware | None:
        """Build from the options a user may give; None when GPU or model is not given.

        Bandwidth: ``bandwidth_gbs`` or a ``device`` preset. Weights: ``weight_bytes``, or
        ``params`` × bytes of ``dtype`` (default 16 bit), or a ``config.json`` dict (its
        active parameters × ``dtype`` or the config's own dtype). Raises ValueError on an
        unknown preset or dtype.
        """
        if bandwidth_gbs is None and device is not None:
            key = device.lower()
            if key not in DEVICE_BANDWIDTH_GBS:
                known = ", ".join(DEVICE_BANDWIDTH_GBS)
                raise ValueError(f"unknown device {device!r} (presets: {known})")
            bandwidth_gbs = DEVICE_BANDWIDTH_GBS[key]
        if weight_bytes is None and params is not None:
            weight_bytes = params * dtype_bytes(dtype or "bfloat16")
        if weight_bytes is None and config is not None:
            shape = ModelShape.from_config(config)
            _, active = estimate_params(shape)
            weight_bytes = active * dtype_bytes(dtype or shape.dtype or "bfloat16")
        if bandwidth_gbs is None or weight_bytes is None:
            return None
        name = device or f"{bandwidth_gbs:g} GB/s"
        return cls(device=name, bandwidth_gbs=bandwidth_gbs, weight_bytes=weight_bytes)


def decode_ceiling(bandwidth_gbs: float, weight_bytes: float) -> float:
    """Upper bound of single-stream decode tokens/s: bandwidth / weight bytes."""
    return bandwidth_gbs * 1e9 / weight_bytes


def roofline(hardware: Hardware, itl_mean: float | None) -> Roofline:
    """The ceiling beside the measured per-stream speed 1 / mean ITL, and their ratio."""
    ceiling = hardware.ceiling_tok_s
    measured = 1.0 / itl_mean if itl_mean else None
    return Roofline(
        device=hardware.device,
        bandwidth_gbs=hardware.bandwidth_gbs,
        weight_bytes=hardware.weight_bytes,
        ceiling_tok_s=ceiling,
        measured_tok_s=measured,
        efficiency=None if measured is None else measured / ceiling,
    )
