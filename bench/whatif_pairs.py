"""The what-if fit check's simulator pairs (``bench/whatif.py``): what A is, how B differs
from it, and the ``--set`` value a user would give for B.

``PAIRS`` are the 40 the twin was developed on (five per key, the scenarios' own rates,
seeds from 7). ``WIDE`` are pairs at rates, seeds and durations those do not have, at
least one per key whose change moves a p99 by 10 % or more — among them the misses of
issue #45: a pressured KV pool grown (×1.5, and gpu_memory_utilization 0.6 → 0.8), traffic
×1.7, a decode-heavy token budget cut to 512 and a chunk budget raised 256 → 2048 on a
mix of short chats and 800-token prompts.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from app.diagnose.server import ServerSettings
from app.sim.scenario import from_tree, read_tree, set_dotted

# A mix of short chats and 800-token prompts (the real pair's budget mix).
CHAT_AND_PROMPTS: list[dict[str, Any]] = [
    {
        "name": "chat",
        "weight": 0.7,
        "prompt_tokens": {"median": 120, "sigma": 0.4},
        "output_tokens": {"median": 150, "sigma": 0.4},
        "max_tokens": 512,
    },
    {
        "name": "prompt800",
        "weight": 0.3,
        "prompt_tokens": {"median": 800, "sigma": 0.05},
        "output_tokens": {"median": 60, "sigma": 0.3},
        "max_tokens": 256,
    },
]


@dataclass(frozen=True)
class Pair:
    key: str
    value: float
    scenario: str
    label: str
    # Where A differs from the shipped scenario: its absolute rate (req/s; None: the
    # scenario's load), dotted overrides of its tree, its seeds' base and its seconds
    # (None: the bench's --duration).
    rate: float | None = None
    patch: tuple[tuple[str, Any], ...] = field(default=())
    seed: int | None = None
    duration: float | None = None


PAIRS: tuple[Pair, ...] = (
    Pair("rate_scale", 1.5, "healthy", "traffic ×1.5"),
    Pair("rate_scale", 2.0, "healthy", "traffic ×2"),
    Pair("rate_scale", 0.7, "decode_heavy", "traffic ×0.7"),
    Pair("rate_scale", 1.3, "decode_heavy", "traffic ×1.3"),
    Pair("rate_scale", 0.6, "queue_overload", "traffic ×0.6"),
    Pair("replicas", 2, "healthy", "2 replicas"),
    Pair("replicas", 2, "queue_overload", "2 replicas"),
    Pair("replicas", 3, "queue_overload", "3 replicas"),
    Pair("replicas", 2, "decode_heavy", "2 replicas"),
    Pair("replicas", 2, "kv_pressure", "2 replicas"),
    Pair("max_num_seqs", 64, "queue_overload", "32 → 64"),
    Pair("max_num_seqs", 16, "queue_overload", "32 → 16"),
    Pair("max_num_seqs", 24, "healthy", "256 → 24"),
    Pair("max_num_seqs", 8, "prefill_heavy", "4 → 8"),
    Pair("max_num_seqs", 48, "decode_heavy", "→ 48"),
    Pair("max_num_batched_tokens", 2048, "prefill_interference", "8192 → 2048"),
    Pair("max_num_batched_tokens", 4096, "prefill_interference", "8192 → 4096"),
    Pair("max_num_batched_tokens", 512, "healthy", "2048 → 512"),
    Pair("max_num_batched_tokens", 8192, "decode_heavy", "2048 → 8192"),
    Pair("max_num_batched_tokens", 1024, "queue_overload", "2048 → 1024"),
    Pair("num_gpu_blocks", 2.0, "kv_pressure", "pool ×2"),
    Pair("num_gpu_blocks", 4.0, "kv_pressure", "pool ×4"),
    Pair("num_gpu_blocks", 0.75, "kv_pressure", "pool ×0.75"),
    Pair("num_gpu_blocks", 0.5, "decode_heavy", "pool ×0.5"),
    Pair("num_gpu_blocks", 0.05, "healthy", "pool ×0.05"),
    Pair("prompt_scale", 2.0, "healthy", "prompts ×2"),
    Pair("prompt_scale", 0.5, "healthy", "prompts ×0.5"),
    Pair("prompt_scale", 1.5, "decode_heavy", "prompts ×1.5"),
    Pair("prompt_scale", 0.5, "prefill_heavy", "prompts ×0.5"),
    Pair("prompt_scale", 2.0, "queue_overload", "prompts ×2"),
    Pair("output_scale", 2.0, "healthy", "answers ×2"),
    Pair("output_scale", 0.5, "healthy", "answers ×0.5"),
    Pair("output_scale", 0.5, "decode_heavy", "answers ×0.5"),
    Pair("output_scale", 0.5, "queue_overload", "answers ×0.5"),
    Pair("output_scale", 0.5, "kv_pressure", "answers ×0.5"),
    Pair("prefix_cache_hit_rate", 0.0, "healthy", "reuse 100 % → 0 %"),
    Pair("prefix_cache_hit_rate", 0.5, "healthy", "reuse 100 % → 50 %"),
    Pair("prefix_cache_hit_rate", 0.0, "queue_overload", "reuse 100 % → 0 %"),
    Pair("prefix_cache_hit_rate", 0.3, "prefix_cache_collapse", "reuse 100 % → 30 %"),
    Pair("prefix_cache_hit_rate", 0.06, "prefix_cache_collapse", "reuse 100 % → 6 %"),
)

_BUDGET_MIX = (
    ("workload.classes", CHAT_AND_PROMPTS),
    ("workload.shared_prefix_tokens", 0),
    ("engine.max_num_batched_tokens", 256),
)

WIDE: tuple[Pair, ...] = (
    Pair("num_gpu_blocks", 1.5, "kv_pressure", "pool ×1.5", 0.9, (), 9101, 600),
    Pair("gpu_memory_utilization", 0.8, "kv_pressure", "0.6 → 0.8", 0.8, (), 9111, 540),
    Pair("rate_scale", 1.7, "healthy", "traffic ×1.7", 4.6, (), 9121, 480),
    Pair("max_num_batched_tokens", 512, "decode_heavy", "2048 → 512", 0.8, (), 9131, 480),
    Pair(
        "max_num_batched_tokens",
        2048,
        "healthy",
        "256 → 2048 (chats + 800)",
        6.0,
        _BUDGET_MIX,
        9141,
        420,
    ),  # fmt: skip
    Pair("replicas", 2, "queue_overload", "2 replicas", 5.0, (), 9151, 420),
    Pair("max_num_seqs", 24, "decode_heavy", "256 → 24", 0.8, (), 9161, 540),
    Pair("prompt_scale", 2.5, "healthy", "prompts ×2.5", 5.0, (), 9171, 360),
    Pair("output_scale", 2.0, "healthy", "answers ×2", 4.5, (), 9181, 540),
    Pair(
        "prefix_cache_hit_rate", 0.0, "queue_overload", "reuse 100 % → 0 %", 4.0, (), 9191, 360
    ),  # fmt: skip
    Pair("num_gpu_blocks", 0.3, "decode_heavy", "pool ×0.3", 0.7, (), 9201, 540),
    Pair("rate_scale", 1.25, "decode_heavy", "traffic ×1.25", 0.75, (), 9211, 600),
    Pair(
        "max_num_batched_tokens", 1024, "prefill_interference", "8192 → 1024", 1.6, (), 9221, 420
    ),  # fmt: skip
    Pair("rate_scale", 0.75, "queue_overload", "traffic ×0.75", 4.0, (), 9231, 480),
)


def a_tree(pair: Pair) -> dict[str, Any]:
    """A's scenario: the shipped one's base phase, its load turned into the absolute rate
    (or the pair's), with the pair's overrides."""
    tree = read_tree(pair.scenario)
    tree.pop("phases", None)
    tree["name"] = pair.scenario
    for key, value in pair.patch:
        set_dotted(tree, key, copy.deepcopy(value))
    base = from_tree(tree).base
    wl = tree.setdefault("workload", {})
    wl.pop("load", None)
    wl["rate"] = pair.rate if pair.rate is not None else base.workload.rate
    return tree


def b_tree(pair: Pair, a: dict[str, Any]) -> dict[str, Any]:
    """B's scenario: A's with the pair's change."""
    b = copy.deepcopy(a)
    wl, eng = b["workload"], b.setdefault("engine", {})
    v = pair.value
    if pair.key == "rate_scale":
        wl["rate"] *= v
    elif pair.key == "replicas":
        wl["rate"] /= v
    elif pair.key in ("max_num_seqs", "max_num_batched_tokens"):
        eng[pair.key] = int(v)
    elif pair.key == "gpu_memory_utilization":
        eng[pair.key] = v
    elif pair.key == "num_gpu_blocks":
        blocks = from_tree(a).base.num_gpu_blocks
        eng["num_gpu_blocks_override"] = max(1, int(blocks * v))
        eng["max_model_len"] = min(eng.get("max_model_len", 8192), int(blocks * v) * 16)
    elif pair.key in ("prompt_scale", "output_scale"):
        name = "prompt_tokens" if pair.key == "prompt_scale" else "output_tokens"
        for c in wl["classes"]:
            c[name]["median"] = c[name]["median"] * v
    elif pair.key == "prefix_cache_hit_rate":
        wl["prefix_reuse"] = v  # the same prompts, fewer of them reusable
    return b


def server(tree: dict[str, Any]) -> ServerSettings:
    """What a user would give with ``--server``: the settings the page does not carry."""
    e = from_tree(tree).base.engine
    return ServerSettings(
        max_num_seqs=e.max_num_seqs,
        max_num_batched_tokens=e.max_num_batched_tokens,
        max_model_len=e.max_model_len,
    )


def hardware(tree: dict[str, Any]) -> tuple[float, float]:
    """The device's memory and the weights' size, GB (``--server device=…``,
    ``--params``): what ``gpu_memory_utilization`` needs."""
    base = from_tree(tree).base
    return base.device.memory_gb, base.model.weight_bytes / 1e9


def value(pair: Pair, a: dict[str, Any], b_hit: float | None) -> float | int:
    """The ``--set`` value a user would give for B (``b_hit``: B's prefix-cache hit rate
    as its page shows it)."""
    if pair.key == "num_gpu_blocks":
        return max(1, int(from_tree(a).base.num_gpu_blocks * pair.value))
    if pair.key == "prefix_cache_hit_rate":
        return round(min(b_hit or 0.0, 0.99), 3)
    if pair.key in ("max_num_seqs", "max_num_batched_tokens", "replicas"):
        return int(pair.value)
    return pair.value
