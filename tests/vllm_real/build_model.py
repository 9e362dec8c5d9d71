"""Build a tiny randomly initialised Llama and a locally trained BPE tokenizer.

Nothing comes from a model hub: the tokenizer is trained here with ``tokenizers`` on
generated text, the weights are random (``transformers`` init, fixed seed). Run with the
vLLM venv's Python: ``python build_model.py OUT_DIR``. About 2 MB on disk.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

WORDS = [
    "the",
    "a",
    "of",
    "to",
    "and",
    "in",
    "is",
    "it",
    "that",
    "for",
    "on",
    "with",
    "as",
    "was",
    "at",
    "by",
    "an",
    "be",
    "this",
    "from",
    "or",
    "are",
    "cache",
    "token",
    "prefill",
    "decode",
    "batch",
    "queue",
    "engine",
    "request",
    "stream",
    "latency",
    "metric",
    "server",
    "model",
    "block",
    "memory",
    "window",
    "spike",
    "alert",
    "prompt",
    "output",
    "step",
    "page",
    "scrape",
    "value",
    "time",
]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}</s>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def corpus(n: int, rng: random.Random) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 40))) for _ in range(n)]


def main(out: Path) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    if (out / "config.json").exists() and (out / "tokenizer.json").exists():
        print(f"model already built in {out}")
        return
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    special = ["<unk>", "<s>", "</s>", "<pad>", "<|user|>", "<|assistant|>", "<|system|>"]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus(2000, rng), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,  # vLLM's CPU attention needs a head size of 32 or more
        max_position_embeddings=1024,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        tie_word_embeddings=False,
        torch_dtype="float32",
    )
    model = LlamaForCausalLM(config)
    model.save_pretrained(out, safe_serialization=True)
    (out / "phasewatch-model.json").write_text(
        json.dumps({"note": "random weights, built by tests/vllm_real/build_model.py"})
    )
    print(f"built {sum(p.numel() for p in model.parameters()):,} parameters in {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
