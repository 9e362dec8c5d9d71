"""KV bytes per token, model shapes from config.json, and ``phasewatch kv``."""

from __future__ import annotations

import argparse
import json

import pytest

from app.cli import kv as kv_command
from app.diagnose.kv import ModelShape, kv_bytes_per_token, shape_kv_bytes_per_token

LLAMA_8B = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


def test_typical_8b_with_gqa_needs_128_kib_per_token():
    assert kv_bytes_per_token(32, 8, 128, 2) == 131_072


def test_shape_from_config_derives_head_dim_from_hidden_size():
    shape = ModelShape.from_config(LLAMA_8B)
    assert (shape.num_hidden_layers, shape.num_key_value_heads, shape.head_dim) == (32, 8, 128)
    assert shape_kv_bytes_per_token(shape) == 131_072


def test_explicit_head_dim_wins_and_kv_heads_default_to_attention_heads():
    shape = ModelShape.from_config(
        {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 32}
    )
    assert (shape.head_dim, shape.num_key_value_heads) == (32, 4)


def test_fp8_kv_cache_halves_the_bytes():
    shape = ModelShape.from_config(LLAMA_8B)
    assert shape_kv_bytes_per_token(shape, "fp8") == 65_536


def test_multimodal_config_reads_its_text_config():
    shape = ModelShape.from_config({"model_type": "x", "text_config": LLAMA_8B})
    assert shape.num_hidden_layers == 32


def test_config_without_layers_names_what_is_missing():
    with pytest.raises(ValueError, match="num_hidden_layers"):
        ModelShape.from_config({"hidden_size": 64, "num_attention_heads": 4})


def _run(tmp_path, *extra):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA_8B))
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    kv_command.register(sub)
    args = parser.parse_args(["kv", "--config-json", str(path), *extra])
    return args.func(args)


def test_kv_command_prints_bytes_per_token_and_for_the_context(tmp_path, capsys):
    assert _run(tmp_path, "--context", "8000") == 0
    out = capsys.readouterr().out
    assert "kv_bytes_per_token: 131,072 B (128.0 KiB)" in out
    assert "kv_bytes_for_8000_tokens: 1,048,576,000 B" in out


def test_kv_command_json_with_dtype(tmp_path, capsys):
    assert _run(tmp_path, "--context", "1000", "--dtype", "fp8", "--json") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kv_bytes_per_token"] == 65_536 and out["kv_bytes"] == 65_536_000


def test_kv_command_rejects_an_unknown_dtype(tmp_path, capsys):
    assert _run(tmp_path, "--dtype", "int3") == 2
    assert "unknown dtype" in capsys.readouterr().out
