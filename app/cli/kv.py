"""``phasewatch kv``: KV-cache bytes per token and for a context, from a ``config.json``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from app.diagnose.kv import ModelShape, dtype_bytes, format_bytes, shape_kv_bytes_per_token
from app.diagnose.roofline import estimate_params


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "kv",
        help="KV-cache size per token and for N tokens of context, from a model's config.json",
        description="KV bytes per token = 2 × layers × KV heads × head_dim × bytes per "
        "element; head_dim = config.head_dim or hidden_size / num_attention_heads.",
    )
    p.add_argument("--config-json", required=True, type=Path, help="the model's config.json")
    p.add_argument("--context", type=int, default=8000, help="tokens of context (default 8000)")
    p.add_argument(
        "--dtype",
        default=None,
        help="KV-cache dtype (bfloat16, float16, fp8, float32…); default: the model's dtype",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        config = json.loads(args.config_json.read_text())
        shape = ModelShape.from_config(config)
        kv_dtype = args.dtype or shape.dtype or "bfloat16"
        per_token = shape_kv_bytes_per_token(shape, kv_dtype)
    except (OSError, ValueError) as exc:
        print(f"phasewatch kv: {exc}")
        return 2
    total = per_token * args.context
    try:
        params: float | None = estimate_params(shape)[0]
    except ValueError:
        params = None
    if args.json:
        print(
            json.dumps(
                {
                    "kv_bytes_per_token": per_token,
                    "context_tokens": args.context,
                    "kv_bytes": total,
                    "kv_dtype": kv_dtype,
                    "num_hidden_layers": shape.num_hidden_layers,
                    "num_key_value_heads": shape.num_key_value_heads,
                    "head_dim": shape.head_dim,
                    "params_estimate": params,
                }
            )
        )
        return 0
    print(
        f"model: {shape.num_hidden_layers} layers × {shape.num_key_value_heads} KV heads × "
        f"head_dim {shape.head_dim}; KV dtype {kv_dtype} ({dtype_bytes(kv_dtype):g} B)"
    )
    print(f"kv_bytes_per_token: {per_token:,.0f} B ({format_bytes(per_token)})")
    print(f"kv_bytes_for_{args.context}_tokens: {total:,.0f} B ({format_bytes(total)})")
    if params is not None:
        weights = params * dtype_bytes(shape.dtype or "bfloat16")
        print(
            f"weights (estimate): {params / 1e9:.2f} B parameters, "
            f"{weights / 1e9:.1f} GB at {shape.dtype or 'bfloat16'}"
        )
    return 0
