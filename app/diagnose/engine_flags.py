"""A hint in the words of the stream's engine: one class vocabulary and one hint
catalog (``app.diagnose.hints``, written in vLLM's flags), the flags, families and
setting names of each other engine put in by a small table (``docs/sglang.md``).

For SGLang, vLLM's knobs map onto their SGLang counterparts —
``--max-num-seqs`` → ``--max-running-requests``, ``--max-num-batched-tokens`` →
``--chunked-prefill-size``, ``--gpu-memory-utilization`` → ``--mem-fraction-static``,
``--max-model-len`` → ``--context-length``, fp8 KV cache → ``--kv-cache-dtype
fp8_e4m3``, more replicas → more replicas or ``--dp`` ranks, tensor parallelism
``--tp`` — and a few hints add what SGLang has beside them (``--enable-mixed-chunk``
where prefill chunks stall decode, ``--schedule-policy lpm`` where the prefix cache
misses). A hint whose lever SGLang lacks, or whose text only speaks of vLLM, is not
shown rather than guessed (``UNSUPPORTED``).

The engine of a stream is its page's (``ServerView.engine``, from the stream's
``info``: ``app.scrape.normalize``); "vllm" leaves a hint as it is.
"""

from __future__ import annotations

from dataclasses import replace

from app.diagnose.records import Hint

__all__ = ["ENGINES", "UNSUPPORTED", "for_engine", "in_words_of"]

ENGINES = ("vllm", "sglang")

# (vLLM's words, the engine's), longest first where one contains another.
_WORDS: dict[str, tuple[tuple[str, str], ...]] = {
    "sglang": (
        (
            "vllm serve --enable-prefix-caching (the default changed between releases: "
            "check `vllm serve --help`)",
            "run SGLang without --disable-radix-cache (its prefix cache is on unless disabled)",
        ),
        (
            "vLLM must run without --disable-log-stats",
            "SGLang must run with --enable-metrics",
        ),
        ("vllm:num_requests_waiting", "sglang:num_queue_reqs"),
        ("vllm:num_requests_running", "sglang:num_running_reqs"),
        ("vllm:kv_cache_usage_perc", "sglang:token_usage"),
        ("--max-num-seqs", "--max-running-requests"),
        ("--max-num-batched-tokens", "--chunked-prefill-size"),
        ("--gpu-memory-utilization", "--mem-fraction-static"),
        ("--max-model-len", "--context-length"),
        ("--tensor-parallel-size", "--tp"),
        ("--data-parallel-size", "--dp"),
        ("--kv-cache-dtype fp8", "--kv-cache-dtype fp8_e4m3"),
        ("max_num_seqs", "max_running_requests"),
        ("max_num_batched_tokens", "chunked_prefill_size"),
        ("gpu_memory_utilization", "mem_fraction_static"),
        ("max_model_len", "context_length"),
        ("tensor_parallel_size", "tp_size"),
        ("vLLM's default", "the assumed default"),
        ("vLLM", "SGLang"),
    ),
}
# What an engine has beside a hint's lever, appended to its action.
_BESIDE: dict[str, dict[str, str]] = {
    "sglang": {
        "batched-tokens-down": "; or --enable-mixed-chunk, so running decodes share the "
        "steps of the prefill chunks instead of waiting for them",
        "more-replicas": "; on a host with spare GPUs, --dp N runs N data-parallel ranks "
        "behind one SGLang endpoint",
        "stable-prefix": "; --schedule-policy lpm admits the requests that share a cached "
        "prefix first",
    },
}
# Hints whose lever the engine lacks (or whose reading it does not export): not shown.
UNSUPPORTED: dict[str, frozenset[str]] = {
    "sglang": frozenset(
        {
            "frontend-api-server",  # vLLM's --api-server-count
            "deferred-admission",  # vLLM's waiting-by-reason and KV connector
            "spec-decode-drafter",  # vLLM's --speculative-config counters
            # vLLM's NIXL connector (SGLang's P/D families are not read).
            "hang-kv-transfer",
            "transfer-backend",
            "transfer-network",
            "transfer-block-size",
            "transfer-buffer",
            "kv-lease",
            "decode-fetch-capacity",
            "transfer-failures",
        }
    ),
}


def in_words_of(engine: str, text: str) -> str:
    """``text`` (in vLLM's words) in ``engine``'s."""
    for old, new in _WORDS.get(engine, ()):
        if old in text:
            text = text.replace(old, new)
    return text


def for_engine(hint: Hint, engine: str) -> Hint | None:
    """``hint`` in ``engine``'s flags and words; None where the engine lacks its lever."""
    if engine == "vllm" or engine not in _WORDS:
        return hint
    if hint.id in UNSUPPORTED.get(engine, frozenset()):
        return None
    action = in_words_of(engine, hint.action) + _BESIDE.get(engine, {}).get(hint.id, "")
    return replace(
        hint,
        title=in_words_of(engine, hint.title),
        action=action,
        why=in_words_of(engine, hint.why),
        evidence=in_words_of(engine, hint.evidence),
    )
