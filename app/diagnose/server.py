"""What a server runs with: its engine settings, as far as anyone knows them (pure).

vLLM's ``/metrics`` shows only the cache configuration (``vllm:cache_config_info``:
``block_size``, ``num_gpu_blocks``, ``gpu_memory_utilization``, ``enable_prefix_caching``,
``cache_dtype``, …; docs/vllm-signals.md) — not ``max_num_seqs``,
``max_num_batched_tokens``, ``max_model_len``, the model or the device. A target may say
them (:class:`ServerSettings`: a target's ``server:`` block, ``--server KEY=VALUE``;
``DiagnosisConfig.server_for``). :func:`resolve` puts the three sources together, per
setting:

1. **the page** (``cache_config_info``, the window's ``info``): what the engine itself
   reports. It is used when present; a configured value that disagrees is named in a
   note (the configuration is stale, or names another server);
2. **configured**: the target's settings;
3. **assumed vLLM default**: what ``vllm serve`` (V1) picks when the flag is not given —
   ``max_num_seqs`` 256 and ``max_num_batched_tokens`` 2048 on a GPU under 70 GiB or an
   A100, 1024 and 8192 on larger ones (H100, H200, MI300X: vLLM's
   ``EngineArgs.get_batch_defaults``; 128 sequences where vLLM cannot tell the usage
   context), ``gpu_memory_utilization`` 0.9, ``block_size`` 16, prefix caching on, the
   KV cache in the model's dtype (``auto``), no tensor parallelism. A hint built on a
   default says so.

The hints (``app.diagnose.hints``) start from these values; nothing here reads a file or
the environment.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

__all__ = [
    "DEVICE_MEMORY_GB",
    "SERVER_KEYS",
    "ServerSettings",
    "ServerView",
    "Setting",
    "device_memory_gb",
    "resolve",
]


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """The engine settings of one server as configured (None: not said).

    The names are vLLM's engine arguments (``--max-num-seqs`` → ``max_num_seqs``);
    ``model`` and ``device`` are free text (``device`` also sizes the GPU's memory:
    :func:`device_memory_gb`).
    """

    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    block_size: int | None = None
    enable_prefix_caching: bool | None = None
    kv_cache_dtype: str | None = None
    quantization: str | None = None
    tensor_parallel_size: int | None = None
    # The KV pool in blocks (``--num-gpu-blocks-override``); the page's cache_config_info
    # says it when the server runs a vLLM that exports it.
    num_gpu_blocks: int | None = None
    model: str | None = None
    device: str | None = None

    def merged(self, over: ServerSettings) -> ServerSettings:
        """These settings with every field ``over`` sets replaced by its value."""
        changes = {f.name: getattr(over, f.name) for f in fields(over)}
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


SERVER_KEYS: tuple[str, ...] = tuple(f.name for f in fields(ServerSettings))
"""Every key a ``server:`` block and ``--server KEY=VALUE`` accept."""

# GPU memory by device name, GB (vendors' data sheets), for the weights' share of it.
# The roofline presets (``roofline.DEVICE_BANDWIDTH_GBS``) spell some of them.
DEVICE_MEMORY_GB: dict[str, float] = {
    "gh200": 96.0,
    "h200": 141.0,
    "h100": 80.0,
    "h800": 80.0,
    "b200": 180.0,
    "mi300x": 192.0,
    "mi300": 192.0,
    "a100-80gb": 80.0,
    "a100": 40.0,
    "l40s": 48.0,
    "l40": 48.0,
    "a10g": 24.0,
    "rtx4090": 24.0,
    "4090": 24.0,
    "l4": 24.0,
    "a10": 24.0,
    "t4": 16.0,
}
_MEMORY_IN_NAME = re.compile(r"(\d+(?:\.\d+)?)\s*gi?b", re.I)
# vLLM's larger batch defaults: at least this much device memory, and not an A100.
_LARGE_GPU_GIB = 70.0


def device_memory_gb(device: str | None) -> float | None:
    """A device's memory in GB: a size in its name (``H100-80GB``), else the table."""
    if not device:
        return None
    found = _MEMORY_IN_NAME.search(device)
    if found:
        return float(found.group(1))
    key = device.lower().replace(" ", "").replace("_", "-")
    for name, gb in DEVICE_MEMORY_GB.items():  # a name before any name inside it
        if name in key:
            return gb
    return None


def _large_gpu(device: str | None) -> bool | None:
    """vLLM's own test for its larger defaults (None: the device is not known)."""
    gb = device_memory_gb(device)
    if device is None or gb is None:
        return None
    return gb * 1e9 / 2**30 >= _LARGE_GPU_GIB and "a100" not in device.lower()


@dataclass(frozen=True, slots=True)
class Setting:
    """One engine setting: its value and where it comes from (``page``: the server's
    ``cache_config_info``; ``configured``; ``default``: assumed, ``basis`` says which
    default; ``""``: unknown, ``value`` None)."""

    name: str
    value: Any
    source: str
    basis: str = ""

    @property
    def known(self) -> bool:
        return self.value is not None

    @property
    def assumed(self) -> bool:
        return self.source == "default"

    def shown(self) -> str:
        """The value as a hint writes it: ``0.6`` / ``8,192`` / ``True``."""
        v = self.value
        if isinstance(v, bool) or v is None:
            return str(v)
        if isinstance(v, float) and not v.is_integer():
            return f"{v:g}"
        if isinstance(v, int | float):
            return f"{int(v):,}"
        return str(v)

    def origin(self) -> str:
        """``configured``, ``cache_config_info``, ``assumed vLLM default: …``."""
        return {
            "page": "cache_config_info",
            "configured": "configured",
            "default": f"assumed vLLM default{': ' + self.basis if self.basis else ''}",
        }.get(self.source, "unknown")

    def said(self) -> str:
        """``128, configured``, ``0.6, cache_config_info``, ``256, assumed vLLM
        default: …``."""
        return f"{self.shown()}, {self.origin()}"

    def to_dict(self) -> dict[str, Any]:
        value = self.value
        if isinstance(value, float) and not math.isfinite(value):
            value = None
        return {"value": value, "source": self.source or None}


@dataclass(frozen=True, slots=True)
class ServerView:
    """Every setting the hints read, resolved (module docstring), the pool the page
    shows (``num_gpu_blocks`` × ``block_size`` tokens), the device's memory, and notes
    where the configuration and the page disagree."""

    max_num_seqs: Setting
    max_num_batched_tokens: Setting
    max_model_len: Setting
    gpu_memory_utilization: Setting
    block_size: Setting
    enable_prefix_caching: Setting
    kv_cache_dtype: Setting
    quantization: Setting
    tensor_parallel_size: Setting
    num_gpu_blocks: Setting
    model: str | None = None
    device: str | None = None
    memory_gb: float | None = None
    notes: tuple[str, ...] = ()
    # Whose server: "vllm" or "sglang" (the stream's page; the hints' words follow it).
    engine: str = "vllm"

    @property
    def pool_tokens(self) -> int | None:
        """Tokens the KV pool holds: num_gpu_blocks × block_size (from the page)."""
        blocks, size = self.num_gpu_blocks.value, self.block_size.value
        if blocks is None or size is None or self.num_gpu_blocks.source != "page":
            return None
        return int(blocks) * int(size)

    def settings(self) -> tuple[Setting, ...]:
        return (
            self.max_num_seqs,
            self.max_num_batched_tokens,
            self.max_model_len,
            self.gpu_memory_utilization,
            self.block_size,
            self.num_gpu_blocks,
            self.enable_prefix_caching,
            self.kv_cache_dtype,
            self.quantization,
            self.tensor_parallel_size,
        )

    def to_dict(self) -> dict[str, Any]:
        """Every setting with its source (the assumed defaults too; value and source
        null: not known), the model and device, and the notes."""
        out: dict[str, Any] = {s.name: s.to_dict() for s in self.settings()}
        out["model"] = self.model
        out["device"] = self.device
        out["engine"] = self.engine
        out["notes"] = list(self.notes)
        return out


def _page_number(info: Mapping[str, str], key: str, kind: type) -> Any:
    raw = info.get(key)
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        return None
    if not math.isfinite(value) or value <= 0:
        return None
    return int(value) if kind is int else value


def _page_bool(info: Mapping[str, str], key: str) -> bool | None:
    raw = info.get(key, "").strip().lower()
    return {"true": True, "false": False}.get(raw)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool) or isinstance(a, str) or isinstance(b, str):
        return str(a).lower() == str(b).lower()
    return math.isclose(float(a), float(b), rel_tol=1e-6, abs_tol=1e-9)


def _pick(
    name: str,
    page: Any,
    configured: Any,
    default: Any,
    basis: str,
    notes: list[str],
) -> Setting:
    if page is not None:
        if configured is not None and not _same(page, configured):
            notes.append(
                f"server: {name} is configured as {configured} but the server's "
                f"cache_config_info says {page}; the page's value is used (is the "
                "configuration stale, or for another server?)"
            )
        return Setting(name, page, "page")
    if configured is not None:
        return Setting(name, configured, "configured")
    if default is not None:
        return Setting(name, default, "default", basis)
    return Setting(name, None, "")


def resolve(settings: ServerSettings, info: Mapping[str, str] | None = None) -> ServerView:
    """The settings the hints start from: the page's ``cache_config_info`` (``info``),
    then ``settings``, then vLLM's defaults (module docstring)."""
    page = info or {}
    notes: list[str] = []
    large = _large_gpu(settings.device)
    if large is None:
        seqs, tokens = 256, 2048
        where = "on a GPU under 70 GiB or an A100, {} on larger ones (device not configured)"
        seqs_basis = "256 " + where.format(1024)
        tokens_basis = "2048 " + where.format(8192)
    else:
        seqs, tokens = (1024, 8192) if large else (256, 2048)
        what = "a GPU of 70 GiB or more (not an A100)" if large else f"a {settings.device}"
        seqs_basis = f"{seqs} on {what}"
        tokens_basis = f"{tokens} on {what}"
    page_caching = _page_bool(page, "enable_prefix_caching")
    page_dtype = page.get("cache_dtype") or None
    view = ServerView(
        max_num_seqs=_pick("max_num_seqs", None, settings.max_num_seqs, seqs, seqs_basis, notes),
        max_num_batched_tokens=_pick(
            "max_num_batched_tokens",
            None,
            settings.max_num_batched_tokens,
            tokens,
            tokens_basis,
            notes,
        ),
        max_model_len=_pick("max_model_len", None, settings.max_model_len, None, "", notes),
        gpu_memory_utilization=_pick(
            "gpu_memory_utilization",
            _page_number(page, "gpu_memory_utilization", float),
            settings.gpu_memory_utilization,
            0.9,
            "0.9",
            notes,
        ),
        block_size=_pick(
            "block_size",
            _page_number(page, "block_size", int),
            settings.block_size,
            16,
            "16",
            notes,
        ),
        enable_prefix_caching=_pick(
            "enable_prefix_caching",
            page_caching,
            settings.enable_prefix_caching,
            True,
            "on in V1",
            notes,
        ),
        kv_cache_dtype=_pick(
            "kv_cache_dtype", page_dtype, settings.kv_cache_dtype, "auto", "auto", notes
        ),
        quantization=_pick("quantization", None, settings.quantization, None, "", notes),
        tensor_parallel_size=_pick(
            "tensor_parallel_size", None, settings.tensor_parallel_size, 1, "1", notes
        ),
        num_gpu_blocks=_pick(
            "num_gpu_blocks",
            _page_number(page, "num_gpu_blocks", int),
            settings.num_gpu_blocks,
            None,
            "",
            notes,
        ),
        model=settings.model,
        device=settings.device,
        memory_gb=device_memory_gb(settings.device),
        notes=tuple(notes),
    )
    return _sglang(view, settings) if page.get("engine_kind") == "sglang" else view


def _sglang(view: ServerView, settings: ServerSettings) -> ServerView:
    """An SGLang server's view: no vLLM default assumed where SGLang's differs (it sizes
    ``--max-running-requests``, ``--chunked-prefill-size`` and ``--mem-fraction-static``
    from the GPU and the pool, and shows none of them on its page); its radix cache is
    on unless disabled, its page size 1. The settings keep vLLM's names
    (``max_num_seqs`` stands for ``--max-running-requests``: ``docs/sglang.md``)."""
    notes: list[str] = []
    s = settings
    return replace(
        view,
        engine="sglang",
        max_num_seqs=_pick("max_num_seqs", None, s.max_num_seqs, None, "", notes),
        max_num_batched_tokens=_pick(
            "max_num_batched_tokens", None, s.max_num_batched_tokens, None, "", notes
        ),
        gpu_memory_utilization=_pick(
            "gpu_memory_utilization", None, s.gpu_memory_utilization, None, "", notes
        ),
        block_size=_pick("block_size", None, s.block_size, 1, "1 (SGLang's page size)", notes),
        enable_prefix_caching=_pick(
            "enable_prefix_caching",
            None,
            s.enable_prefix_caching,
            True,
            "SGLang's radix cache, on unless --disable-radix-cache",
            notes,
        ),
    )
