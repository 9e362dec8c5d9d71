"""``targets``: the vLLM servers to scrape, and each one's engine settings its /metrics
does not show (``server:``)."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from app.config.checks import NAME_RE, Strict, parsable_url


class TargetServerConfig(Strict):
    """A target's vLLM engine settings that its /metrics does not show (vLLM's engine
    argument names); the hints start from them (``app.diagnose.server``). Unset: what the
    page's ``cache_config_info`` says, else vLLM's default, said as assumed."""

    max_num_seqs: int | None = Field(None, ge=1, description="--max-num-seqs")
    max_num_batched_tokens: int | None = Field(
        None, ge=1, description="--max-num-batched-tokens (the per-step token budget)"
    )
    max_model_len: int | None = Field(None, ge=1, description="--max-model-len")
    gpu_memory_utilization: float | None = Field(
        None, gt=0, le=1, description="--gpu-memory-utilization"
    )
    block_size: int | None = Field(None, ge=1, description="--block-size, tokens per KV block")
    enable_prefix_caching: bool | None = Field(None, description="--enable-prefix-caching")
    kv_cache_dtype: str | None = Field(None, description="--kv-cache-dtype (auto, fp8, …)")
    quantization: str | None = Field(None, description="--quantization (fp8, awq, …)")
    tensor_parallel_size: int | None = Field(None, ge=1, description="--tensor-parallel-size")
    num_gpu_blocks: int | None = Field(
        None, ge=1, description="the KV pool in blocks (--num-gpu-blocks-override)"
    )
    model: str | None = Field(None, description="the model served (free text)")
    device: str | None = Field(
        None,
        description="the GPU, e.g. H100-80GB (a size in the name, or a known GPU, "
        "gives its memory)",
    )


class TargetConfig(Strict):
    """One vLLM server to scrape."""

    name: str = Field(description="letters, digits and _.:@- ; unique among targets")
    url: str = Field(description="the /metrics URL to scrape")
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="free-form, shown in the API; `role` (prefill, decode or both) places the "
        "replica in a P/D fleet's pool",
    )
    server: TargetServerConfig | None = Field(
        None, description="the server's engine settings its /metrics does not show"
    )

    @field_validator("name")
    @classmethod
    def _name_ok(cls, v: str) -> str:
        if not NAME_RE.match(v):
            raise ValueError("must be 1-128 characters of letters, digits and _.:@-")
        return v

    @field_validator("url")
    @classmethod
    def _url_ok(cls, v: str) -> str:
        if not re.match(r"^(https?://[^\s/]+.*|file://.+)$", v):
            raise ValueError("must be an http(s):// URL")
        return parsable_url(v) if v.startswith("http") else v
