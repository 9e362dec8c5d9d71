"""``source``: scrape the targets, or read the vLLM series from a Prometheus API."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from app.config.checks import Strict, parsable_url

_SELECTOR_RE = re.compile(r"^\s*(\{.*\})?\s*$", re.S)


class BasicAuth(Strict):
    username: str = Field(description="the basic-auth user name")
    password: str = Field("", description="the basic-auth password (never logged)")


class SourceConfig(Strict):
    """Where the signals come from: scraping ``targets`` (default) or a Prometheus API.

    With ``kind: prometheus`` phasewatch reads the vLLM series another Prometheus (or
    Thanos, Mimir, VictoriaMetrics) already scrapes; every stream is one value of
    ``target_label`` (``instance``) and ``model_name``. ``source: prometheus`` is short
    for ``source: {kind: prometheus}``.
    """

    kind: Literal["scrape", "prometheus"] = Field(
        "scrape", description="scrape the targets, or read a Prometheus-compatible API"
    )
    url: str | None = Field(
        None, description="Prometheus base URL; /api/v1/... is appended (Mimir: .../prometheus)"
    )
    bearer_token: str | None = Field(None, description="sent as Authorization: Bearer")
    basic_auth: BasicAuth | None = Field(None, description="username and password")
    tls_verify: bool = Field(True, description="verify the server's TLS certificate")
    headers: dict[str, str] = Field(
        default_factory=dict, description="extra request headers, e.g. X-Scope-OrgID"
    )
    selector: str = Field(
        "", description='label matchers every vLLM series must match, e.g. {job="vllm"}'
    )
    target_label: str = Field("instance", description="the label that names a target")
    mode: Literal["range", "raw"] = Field(
        "range", description="query_range at `step`, or the raw stored samples"
    )
    step: float | None = Field(
        None, gt=0, description="query_range resolution, seconds (default scrape.interval)"
    )
    lag: float = Field(
        5.0, ge=0, description="read only data older than this, seconds (ingestion delay)"
    )
    timeout: float = Field(30.0, gt=0, le=600, description="per-request timeout, seconds")

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"^https?://[^\s/]+", v):
            raise ValueError("must be an http(s):// URL")
        return None if v is None else parsable_url(v).rstrip("/")

    @field_validator("selector")
    @classmethod
    def _selector_ok(cls, v: str) -> str:
        if not _SELECTOR_RE.match(v):
            raise ValueError('must be label matchers in braces, e.g. {job="vllm"}')
        return v.strip()

    @model_validator(mode="after")
    def _complete(self) -> SourceConfig:
        if self.kind == "prometheus" and not self.url:
            raise ValueError("source.url is required with kind: prometheus")
        if self.bearer_token and self.basic_auth:
            raise ValueError("give bearer_token or basic_auth, not both")
        return self
