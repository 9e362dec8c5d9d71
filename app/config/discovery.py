"""``file_sd`` and ``http_sd``: targets discovered as Prometheus discovers them, from
files or a URL of target groups."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from app.config.checks import Strict, parsable_url
from app.durations import parse_duration

_LABEL_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _DiscoveryConfig(Strict):
    """What every discovery config sets for its targets, as a Prometheus scrape config
    does: a target ``host:port`` is scraped at ``SCHEME://host:port/METRICS_PATH``
    (a group's ``__scheme__`` and ``__metrics_path__`` labels override them); a list of
    more than ``max_targets`` addresses is refused whole, the last good one kept."""

    scheme: Literal["http", "https"] = Field("http", description="scheme of the targets")
    metrics_path: str = Field("/metrics", description="path of the targets' metrics page")
    name_label: str | None = Field(
        None, description="the label whose value names a target; unset: its host:port"
    )
    max_targets: int = Field(
        10_000, ge=1, description="a list with more is refused whole (the last good one kept)"
    )

    @field_validator("metrics_path")
    @classmethod
    def _path_ok(cls, v: str) -> str:
        if not v.startswith("/") or any(c.isspace() for c in v):
            raise ValueError("must start with / and hold no spaces")
        return v

    @field_validator("name_label")
    @classmethod
    def _label_ok(cls, v: str | None) -> str | None:
        if v is not None and not _LABEL_NAME_RE.match(v):
            raise ValueError("must be a label name (letters, digits and _)")
        return v

    @field_validator("refresh_interval", mode="before", check_fields=False)
    @classmethod
    def _duration(cls, v: object) -> object:
        return parse_duration(v) if isinstance(v, str) else v


class FileSdConfig(_DiscoveryConfig):
    """Prometheus' ``file_sd``: JSON or YAML files of target groups, re-read when they
    change and every ``refresh_interval``."""

    files: list[str] = Field(
        min_length=1, description="paths; a * ? or [..] pattern in the file name part"
    )
    refresh_interval: float = Field(
        300.0, gt=0, description="re-read this often too, seconds or 5m (a missed change)"
    )


class HttpSdConfig(_DiscoveryConfig):
    """Prometheus' ``http_sd``: a URL answering a JSON list of target groups, polled; an
    answer that fails or is refused keeps the last good list. Untrusted: capped."""

    url: str = Field(description="http(s) URL answering the target groups as JSON")
    refresh_interval: float = Field(60.0, gt=0, description="poll period, seconds or 1m")
    timeout: float = Field(10.0, gt=0, le=300, description="per-request timeout, seconds")
    bearer_token: str | None = Field(None, description="sent as Authorization: Bearer")
    max_body_bytes: int = Field(1_000_000, gt=0, description="a larger answer is refused")

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str) -> str:
        if not re.match(r"^https?://[^\s/]+", v):
            raise ValueError("must be an http(s):// URL")
        return parsable_url(v)
