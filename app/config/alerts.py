"""``alerts``: rules, their evaluation, and delivery to the receivers."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from app.config.checks import Strict, parsable_url

_HTTP_URL_RE = re.compile(r"^https?://[^\s/]+")


class ReceiversConfig(Strict):
    """Where alerts go. URLs are secrets (Slack's carry a key): never logged."""

    alertmanager: list[str] = Field(
        default_factory=list, description="Alertmanager base URLs; /api/v2/alerts is appended"
    )
    webhook: list[str] = Field(
        default_factory=list, description="URLs that get the Alertmanager webhook payload"
    )
    slack: list[str] = Field(default_factory=list, description="Slack incoming-webhook URLs")

    @field_validator("alertmanager", "webhook", "slack")
    @classmethod
    def _urls_ok(cls, v: list[str]) -> list[str]:
        for url in v:
            if not _HTTP_URL_RE.match(url):
                raise ValueError("each receiver must be an http(s):// URL")
            parsable_url(url)
        return v


class AlertsConfig(Strict):
    """Alert rules, their evaluation, and delivery through the outbox."""

    enabled: bool = Field(True, description="evaluate rules and send notifications")
    default_rules: bool = Field(True, description="load the shipped rule pack")
    rules_file: str | None = Field(None, description="a YAML rule file, added to the pack")
    evaluation_interval: float = Field(15.0, gt=0, le=3600, description="seconds")
    fire_on_unproven: bool = Field(
        False,
        description="the default TTFT/ITL over-SLO rules also fire on an unproven breach "
        "(the p99 in a histogram bucket around the SLO, more likely than not over it)",
    )
    slo_evaluation_interval: float = Field(
        60.0,
        ge=0,
        le=3600,
        description="seconds between SLO burn-rate and budget evaluations (Prometheus' "
        "default rule interval); the alert rounds in between reuse the last one",
    )
    resend_interval: float = Field(
        60.0, gt=0, description="re-send firing alerts to Alertmanager this often, seconds"
    )
    resolved_retention: float = Field(
        900.0, ge=0, description="keep resolved alerts (and re-send them) this long, seconds"
    )
    send_interval: float = Field(1.0, gt=0, le=60, description="outbox poll period, seconds")
    send_timeout: float = Field(10.0, gt=0, le=300, description="per-request timeout, seconds")
    retry_initial: float = Field(1.0, gt=0, description="first retry delay, seconds")
    retry_max: float = Field(300.0, gt=0, description="longest retry delay, seconds")
    give_up_after: float = Field(86400.0, gt=0, description="drop undelivered rows this old")
    max_silences: int = Field(
        1000,
        ge=1,
        description="silences not yet ended (active, pending) kept at most; a new one past "
        "it is refused 400, as Alertmanager's --silences.max-silences",
    )
    max_silence_bytes: int = Field(
        16384,
        ge=1024,
        description="the largest silence (matchers, createdBy and comment), bytes; a larger "
        "one is refused 422, as Alertmanager's --silences.max-silence-size-bytes",
    )
    receivers: ReceiversConfig = Field(
        default_factory=ReceiversConfig,
        description="where notifications go: URL lists by kind (secrets: never logged)",
    )
