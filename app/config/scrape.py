"""``scrape`` (how pages are fetched, and the caps on what a page may hold) and
``window`` (the default window length and step)."""

from __future__ import annotations

from pydantic import Field

from app.config.checks import Strict


class ScrapeConfig(Strict):
    interval: float = Field(5.0, gt=0, le=3600, description="seconds between scrapes")
    timeout: float = Field(4.0, gt=0, le=300, description="per-target timeout, seconds")
    max_body_bytes: int = Field(10_000_000, gt=0, description="larger pages are refused")
    concurrency: int = Field(1024, ge=1, le=10_000, description="scrapes in flight at once")
    max_series: int = Field(
        20_000, ge=1, description="a page with more vllm: samples is refused (too_many_series)"
    )
    max_streams_per_target: int = Field(
        64, ge=1, description="new model_name streams past this many per target are refused"
    )
    max_streams: int = Field(
        20_000, ge=1, description="new streams past this many over all targets are refused"
    )
    # Prometheus' per-scrape label limits (``app.scrape.label_limits``); 0 is no limit.
    # vLLM 0.33's cache_config_info carries 37 labels, the longest label name is 37
    # characters, and lora_requests_info lists adapter names in one value.
    label_limit: int = Field(
        64, ge=0, description="a page with a vllm: series of more labels is refused (label_limit)"
    )
    label_name_length_limit: int = Field(
        128, ge=0, description="a page with a longer label name (characters) is refused"
    )
    label_value_length_limit: int = Field(
        4096, ge=0, description="a page with a longer label value (characters) is refused"
    )


class WindowConfig(Strict):
    length: float = Field(60.0, gt=0, description="default window length, seconds")
    step: float = Field(15.0, gt=0, description="default step between windows, seconds")
