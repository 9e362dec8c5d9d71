"""Model shape from a Hugging Face ``config.json``, and the KV-cache size per token.

KV bytes per token = 2 (K and V) × num_hidden_layers × num_key_value_heads × head_dim ×
bytes per element, with head_dim = ``config.head_dim`` or hidden_size /
num_attention_heads (docs/concepts.md, "The KV cache"). A typical 8B with GQA (32 layers, 8 KV
heads, head_dim 128, 16 bit) needs 131,072 B per token: an 8,000-token conversation ≈ 1 GB.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Bytes per element for the dtype spellings found in config.json, vLLM's --dtype and
# --kv-cache-dtype.
DTYPE_BYTES: dict[str, float] = {
    "float32": 4.0,
    "fp32": 4.0,
    "float": 4.0,
    "float16": 2.0,
    "fp16": 2.0,
    "half": 2.0,
    "bfloat16": 2.0,
    "bf16": 2.0,
    "fp8": 1.0,
    "fp8_e4m3": 1.0,
    "fp8_e5m2": 1.0,
    "float8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
    "fp4": 0.5,
}


def dtype_bytes(dtype: str) -> float:
    """Bytes per element of a dtype name (``torch.`` prefix allowed); ValueError if unknown."""
    key = dtype.lower().removeprefix("torch.")
    if key not in DTYPE_BYTES:
        known = ", ".join(sorted(DTYPE_BYTES))
        raise ValueError(f"unknown dtype {dtype!r} (known: {known})")
    return DTYPE_BYTES[key]


def _int(cfg: Mapping[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = cfg.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            return int(value)
    return None


@dataclass(frozen=True, slots=True)
class ModelShape:
    """The numbers of a transformer that size its weights and its KV cache."""

    num_hidden_layers: int
    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int | None = None
    vocab_size: int | None = None
    tie_word_embeddings: bool = False
    num_experts: int | None = None
    experts_per_token: int | None = None
    moe_intermediate_size: int | None = None
    dtype: str | None = None

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ModelShape:
        """Read a ``config.json`` dict (multimodal configs: the ``text_config`` part).

        Raises ValueError naming the fields a KV estimate needs but the config lacks.
        """
        text = config.get("text_config")
        cfg: Mapping[str, Any] = {**config, **text} if isinstance(text, Mapping) else config
        layers = _int(cfg, "num_hidden_layers", "n_layer", "num_layers")
        hidden = _int(cfg, "hidden_size", "n_embd", "d_model")
        heads = _int(cfg, "num_attention_heads", "n_head")
        lacking = [
            name
            for name, value in (
                ("num_hidden_layers", layers),
                ("hidden_size", hidden),
                ("num_attention_heads", heads),
            )
            if value is None
        ]
        if layers is None or hidden is None or heads is None:
            raise ValueError(f"config.json lacks {', '.join(lacking)}")
        kv_heads = _int(cfg, "num_key_value_heads", "num_kv_heads") or heads
        head_dim = _int(cfg, "head_dim") or hidden // heads
        dtype = cfg.get("torch_dtype", cfg.get("dtype"))
        return cls(
            num_hidden_layers=layers,
            hidden_size=hidden,
            num_attention_heads=heads,
            num_key_value_heads=kv_heads,
            head_dim=head_dim,
            intermediate_size=_int(cfg, "intermediate_size", "ffn_dim", "n_inner"),
            vocab_size=_int(cfg, "vocab_size"),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            num_experts=_int(cfg, "num_local_experts", "num_experts", "n_routed_experts"),
            experts_per_token=_int(cfg, "num_experts_per_tok", "moe_topk"),
            moe_intermediate_size=_int(cfg, "moe_intermediate_size"),
            dtype=dtype if isinstance(dtype, str) else None,
        )


def kv_bytes_per_token(
    num_hidden_layers: int, num_key_value_heads: int, head_dim: int, bytes_per_element: float
) -> float:
    """2 (K and V) × layers × KV heads × head_dim × bytes per element."""
    return 2.0 * num_hidden_layers * num_key_value_heads * head_dim * bytes_per_element


def shape_kv_bytes_per_token(shape: ModelShape, kv_dtype: str | None = None) -> float:
    """KV bytes per token of a model; the KV dtype defaults to the model's (else 16 bit)."""
    element = dtype_bytes(kv_dtype or shape.dtype or "bfloat16")
    return kv_bytes_per_token(
        shape.num_hidden_layers, shape.num_key_value_heads, shape.head_dim, element
    )


def format_bytes(n: float) -> str:
    """Binary units: ``131072`` → ``128.0 KiB``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
