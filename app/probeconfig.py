"""The ``probes:`` and ``probing:`` settings: requests phasewatch sends to time an answer.

A probe sends one small streaming request every ``interval`` to an OpenAI-compatible
server (``openai_completions``: ``/v1/completions``, ``openai_chat``:
``/v1/chat/completions``) or to Ollama (``ollama_generate``: ``/api/generate``), and
times what a client sees (``app.sources.probe``). Every probe spends tokens on the
server it probes, so the defaults are small: one request every 30 s, a prompt of eight
words, 16 tokens out.

Headers and the bearer token are credentials: never logged (``app.logs`` collects every
value under ``headers`` and ``bearer_token`` for its filter) and never shown (the API
names the headers, not their values). Like :mod:`app.config`, nothing of the domain is
imported here.
"""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from app.durations import parse_duration

__all__ = [
    "PROBE_LABEL",
    "PROBE_OF_LABEL",
    "PROBE_PATHS",
    "ProbeConfig",
    "ProbeKind",
    "ProbingConfig",
]

ProbeKind = Literal["openai_completions", "openai_chat", "ollama_generate"]

# The path each kind posts to, appended to the probe's base URL.
PROBE_PATHS: dict[str, str] = {
    "openai_completions": "/v1/completions",
    "openai_chat": "/v1/chat/completions",
    "ollama_generate": "/api/generate",
}

# The labels a probe's target carries: its kind, and the scraped target it probes. A
# target labelled ``probe`` is a probe's: no replica of its model's fleet.
PROBE_LABEL = "probe"
PROBE_OF_LABEL = "probe_of"

_NAME_RE = re.compile(r"^[A-Za-z0-9_.:@-]{1,128}$")
_HEADER_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")  # an HTTP token (RFC 9110)
# Headers the probe sets itself: a user's value would break the request or its timing.
_OWN_HEADERS = {"content-length", "content-type", "host", "transfer-encoding", "connection"}


class ProbeConfig(BaseModel):
    """One probe: what to ask, where, how often."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="the probe's name: its stream's target; unique")
    kind: ProbeKind = Field(description="openai_completions, openai_chat or ollama_generate")
    url: str = Field(description="the server's base URL; the kind's path is appended")
    model: str = Field(description="the model asked for (vLLM's served name, Ollama's tag)")
    prompt: str | None = Field(None, description="the prompt text")
    prompt_words: int | None = Field(
        None, ge=1, le=4096, description="instead of a prompt: this many random words"
    )
    max_tokens: int = Field(16, ge=1, le=4096, description="tokens asked for (Ollama num_predict)")
    ignore_eos: bool = Field(
        False, description="ask vLLM to generate all max_tokens (vLLM's own request field)"
    )
    interval: float = Field(30.0, ge=1, le=86400, description="seconds between probes")
    timeout: float = Field(20.0, gt=0, le=600, description="a probe's whole answer, seconds")
    headers: dict[str, str] = Field(
        default_factory=dict, description="extra request headers (credentials: never logged)"
    )
    bearer_token: str | None = Field(None, description="sent as Authorization: Bearer")
    tls_verify: bool = Field(True, description="verify the server's TLS certificate")
    target: str | None = Field(
        None, description="the scraped target this server is (its /metrics beside the probe)"
    )
    labels: dict[str, str] = Field(default_factory=dict, description="free-form, shown in the API")
    device: str | None = Field(
        None, description="the device, a preset (cpu, a10g, l40s, …): decode roofline"
    )
    model_params_b: float | None = Field(
        None, gt=0, le=10_000, description="the model's parameters, billions: decode roofline"
    )
    weight_bits: int = Field(16, description="bits per weight (16, 8 or 4): decode roofline")

    @field_validator("name")
    @classmethod
    def _name_ok(cls, v: str) -> str:
        if not _NAME_RE.match(v):
            raise ValueError("must be 1-128 characters of letters, digits and _.:@-")
        return v

    @field_validator("url")
    @classmethod
    def _url_ok(cls, v: str) -> str:
        if not re.match(r"^https?://[^\s/?#]+(/[^\s?#]*)?$", v):
            raise ValueError("must be an http(s):// base URL without a query")
        try:
            port = urlsplit(v).port
        except ValueError as exc:
            raise ValueError(f"not a usable URL: {exc}") from None
        if port is not None and not 1 <= port <= 65535:
            raise ValueError(f"port {port} is not in 1-65535")
        return v.rstrip("/")

    @field_validator("interval", "timeout", mode="before")
    @classmethod
    def _duration(cls, v: object) -> object:
        return parse_duration(v) if isinstance(v, str) else v

    @field_validator("headers")
    @classmethod
    def _headers_ok(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if not _HEADER_RE.match(key):
                raise ValueError(f"header name {key!r} is not an HTTP token")
            if key.lower() in _OWN_HEADERS:
                raise ValueError(f"header {key!r} is set by the probe itself")
            if "\r" in value or "\n" in value:
                raise ValueError(f"header {key!r}: a value cannot hold a line break")
        return v

    @field_validator("weight_bits")
    @classmethod
    def _bits_ok(cls, v: int) -> int:
        if v not in (4, 8, 16, 32):
            raise ValueError("must be 4, 8, 16 or 32")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> ProbeConfig:
        if self.prompt is not None and self.prompt_words is not None:
            raise ValueError("give prompt or prompt_words, not both")
        if self.prompt is not None and not self.prompt.strip():
            raise ValueError("prompt is empty")
        if self.timeout > self.interval:
            raise ValueError("timeout must not exceed interval (one probe in flight at a time)")
        if self.bearer_token and any(k.lower() == "authorization" for k in self.headers):
            raise ValueError("give bearer_token or an Authorization header, not both")
        return self

    @property
    def endpoint(self) -> str:
        """The URL the probe posts to."""
        return self.url + PROBE_PATHS[self.kind]

    @property
    def words(self) -> int:
        """Random words in the prompt (0 when a prompt text is given)."""
        if self.prompt is not None:
            return 0
        return self.prompt_words if self.prompt_words is not None else 8


class ProbingConfig(BaseModel):
    """What every probe shares: how many run at once, and when the gap between what a
    client sees and what the server reports names the frontend (``frontend_bound``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    concurrency: int = Field(4, ge=1, le=256, description="probes in flight at once")
    frontend_gap_min: float = Field(
        0.1, ge=0, description="client TTFT − the server's own TTFT over this, seconds…"
    )
    frontend_gap_share: float = Field(
        0.5, gt=0, le=1, description="…and over this share of the client TTFT: frontend_bound"
    )
