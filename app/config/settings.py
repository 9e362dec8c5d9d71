"""``Settings``: every section in one model, and the UI's address for links in alerts."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.config.alerts import AlertsConfig
from app.config.discovery import FileSdConfig, HttpSdConfig
from app.config.fleets import FleetConfig
from app.config.scrape import ScrapeConfig, WindowConfig
from app.config.service import LogConfig, ServerConfig, StorageConfig, WhatIfConfig
from app.config.slo import SloConfig, SloObjectConfig
from app.config.source import SourceConfig
from app.config.targets import TargetConfig
from app.probeconfig import ProbeConfig, ProbingConfig


class Settings(BaseSettings):
    """Everything phasewatch can be told."""

    model_config = SettingsConfigDict(
        env_prefix="PHASEWATCH_", env_nested_delimiter="__", extra="forbid", frozen=True
    )

    targets: list[TargetConfig] = Field(
        default_factory=list, description="the vLLM servers to scrape"
    )
    file_sd: list[FileSdConfig] = Field(
        default_factory=list, description="targets from files of target groups (Prometheus')"
    )
    http_sd: list[HttpSdConfig] = Field(
        default_factory=list, description="targets from URLs answering target groups"
    )
    scrape: ScrapeConfig = Field(
        default_factory=ScrapeConfig,
        description="how pages are fetched, and the caps on what a page may hold",
    )
    window: WindowConfig = Field(
        default_factory=WindowConfig, description="the API's default window length and step"
    )
    slo: SloConfig = Field(
        default_factory=SloConfig, description="the latency objectives the diagnosis judges against"
    )
    storage: StorageConfig = Field(
        default_factory=StorageConfig, description="the SQLite store and how long it keeps history"
    )
    server: ServerConfig = Field(
        default_factory=ServerConfig, description="where the API and UI listen"
    )
    log: LogConfig = Field(default_factory=LogConfig, description="logging")
    source: SourceConfig = Field(
        default_factory=SourceConfig,
        description="where the signals come from: the scraped targets or a Prometheus API",
    )
    alerts: AlertsConfig = Field(
        default_factory=AlertsConfig, description="alert rules, their evaluation and delivery"
    )
    fleet: FleetConfig = Field(
        default_factory=FleetConfig, description="replicas of one model, summed into fleets"
    )
    whatif: WhatIfConfig = Field(
        default_factory=WhatIfConfig,
        description="the what-if twin inside the service: the hints' predicted effects",
    )
    probes: list[ProbeConfig] = Field(
        default_factory=list, description="requests sent to time what a client sees"
    )
    probing: ProbingConfig = Field(
        default_factory=ProbingConfig, description="what every probe shares"
    )
    slos: list[SloObjectConfig] | None = Field(
        None,
        description="SLOs with error budgets; unset: one 'default' SLO per model from `slo`",
    )
    api_token: str | None = Field(
        None, description="bearer token for the write endpoints (silences); none: they are off"
    )
    ui_base_url: str | None = Field(
        None,
        description="the UI's external address, for links in alerts (as Prometheus' "
        "--web.external-url); unset: derived from where the service listens",
    )

    def ui_url(self, hostname: str) -> str:
        """The UI's address for the links in alerts: ``ui_base_url`` when set, else where
        ``server`` listens (:func:`resolve_ui_base_url`; ``hostname``: this machine's)."""
        return resolve_ui_base_url(
            self.ui_base_url, self.server.host, self.server.port, hostname=hostname
        )

    @field_validator("source", mode="before")
    @classmethod
    def _source_shorthand(cls, v: object) -> object:
        return {"kind": v} if isinstance(v, str) else v

    @field_validator("slos")
    @classmethod
    def _unique_slos(cls, v: list[SloObjectConfig] | None) -> list[SloObjectConfig] | None:
        names = [s.name for s in v or []]
        for name in names:
            if names.count(name) > 1:
                raise ValueError(f"duplicate SLO name {name!r}")
        return v

    @field_validator("targets")
    @classmethod
    def _unique_names(cls, v: list[TargetConfig]) -> list[TargetConfig]:
        seen: set[str] = set()
        for t in v:
            if t.name in seen:
                raise ValueError(f"duplicate target name {t.name!r}")
            seen.add(t.name)
        return v

    @model_validator(mode="after")
    def _probe_names(self) -> Settings:
        """A probe's name is its stream's target: unique, and no scraped target's."""
        taken = {t.name for t in self.targets}
        for p in self.probes:
            if p.name in taken:
                raise ValueError(f"probe name {p.name!r} is already a target's or a probe's")
            taken.add(p.name)
        return self


_ALL_INTERFACES = {"", "0.0.0.0", "::", "[::]"}


def resolve_ui_base_url(configured: str | None, host: str, port: int, *, hostname: str) -> str:
    """The UI's base URL for links in notifications (no trailing slash).

    ``configured`` (``ui_base_url``) is the external URL, used as given: behind a proxy
    only the operator knows it. Unset, it is where the service listens,
    ``http://HOST:PORT/ui``; a service listening on every interface (``0.0.0.0``, ``::``)
    is named by ``hostname`` (the machine's, ``socket.gethostname()``: the caller reads
    it, this module does no I/O), which its peers can resolve, not by an address nobody
    can open. An IPv6 address is bracketed.
    """
    if configured:
        return configured.rstrip("/")
    name = host.strip()
    if name in _ALL_INTERFACES:
        name = hostname or "localhost"
    if ":" in name and not name.startswith("["):
        name = f"[{name}]"
    return f"http://{name}:{port}/ui"
