"""Settings: a YAML file, then ``PHASEWATCH_*`` environment variables, then CLI flags.

This is the only module that reads the environment. Precedence, lowest first: defaults,
the YAML file, the environment (``PHASEWATCH_SCRAPE__INTERVAL=10``, nested with ``__``),
then command-line overrides. A bad value raises :class:`ConfigError` with one line that
names the field; the CLI prints it and exits 2 before anything starts.

Nothing of the domain is imported here: what only the domain can judge (a rule file's
rules) is checked where the CLI and the service start (``app.cli.config.load_config``,
``app.main.create_app``), and :func:`field_error` words its error like the others.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from app import safeyaml
from app.durations import parse_duration
from app.probeconfig import ProbeConfig, ProbingConfig

_NAME_RE = re.compile(r"^[A-Za-z0-9_.:@-]{1,128}$")


class ConfigError(ValueError):
    """A configuration that cannot be used; the message names the field."""


def _parsable_url(v: str) -> str:
    """``v`` if its host and port can be read, the port in 1-65535 (checked here, so a bad
    URL is a config error and not an error in every scrape round)."""
    try:
        port = urlsplit(v).port
    except ValueError as exc:
        raise ValueError(f"not a usable URL: {exc}") from None
    if port is not None and not 1 <= port <= 65535:
        raise ValueError(f"port {port} is not in 1-65535")
    return v


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TargetServerConfig(_Strict):
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


class TargetConfig(_Strict):
    """One vLLM server to scrape."""

    name: str
    url: str
    labels: dict[str, str] = Field(default_factory=dict)
    server: TargetServerConfig | None = Field(
        None, description="the server's engine settings its /metrics does not show"
    )

    @field_validator("name")
    @classmethod
    def _name_ok(cls, v: str) -> str:
        if not _NAME_RE.match(v):
            raise ValueError("must be 1-128 characters of letters, digits and _.:@-")
        return v

    @field_validator("url")
    @classmethod
    def _url_ok(cls, v: str) -> str:
        if not re.match(r"^(https?://[^\s/]+.*|file://.+)$", v):
            raise ValueError("must be an http(s):// URL")
        return _parsable_url(v) if v.startswith("http") else v


_LABEL_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _DiscoveryConfig(_Strict):
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
        return _parsable_url(v)


class ScrapeConfig(_Strict):
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


class WindowConfig(_Strict):
    length: float = Field(60.0, gt=0, description="default window length, seconds")
    step: float = Field(15.0, gt=0, description="default step between windows, seconds")


class SloValues(_Strict):
    ttft_p99: float = Field(2.0, gt=0, description="TTFT p99 objective, seconds")
    itl_p99: float = Field(0.1, gt=0, description="inter-token latency p99 objective, seconds")


class SloConfig(SloValues):
    """Default SLOs plus overrides keyed by target name or model name (a target key beats
    a model key; resolved per stream by ``app.evaluate.settings``)."""

    overrides: dict[str, SloValues] = Field(default_factory=dict)
    min_events_for_budget: int = Field(
        1000,
        ge=0,
        description="an error budget is judged once its period holds this many events of "
        "each objective (fewer: 'n/a'; a handful of requests is no budget)",
    )


class StorageConfig(_Strict):
    path: str = Field("phasewatch.db", description="SQLite file; ':memory:' for none")
    retention_days: float = Field(7.0, gt=0, description="history older than this is dropped")
    rollup_retention_days: float = Field(
        90.0,
        gt=0,
        description="per-minute and per-hour roll-ups older than this are dropped "
        "(never before retention_days)",
    )


class LogConfig(_Strict):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", description="log level")
    json_lines: bool = Field(False, description="one JSON object per log line")

    @field_validator("level", mode="before")
    @classmethod
    def _upper(cls, v: object) -> object:
        return v.upper() if isinstance(v, str) else v


class ServerConfig(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(8321, ge=0, le=65535)
    # Connections to the API and UI at once; never more than the file descriptors left
    # once one per scraped target is kept aside (app.api.connections).
    max_connections: int = Field(512, ge=1, le=1_000_000)
    # Seconds a connection has to send a whole request head (slow clients are closed).
    request_head_timeout: float = Field(10.0, gt=0, le=3600)


_SELECTOR_RE = re.compile(r"^\s*(\{.*\})?\s*$", re.S)


class BasicAuth(_Strict):
    username: str
    password: str = ""


class SourceConfig(_Strict):
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
        return None if v is None else _parsable_url(v).rstrip("/")

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


_HTTP_URL_RE = re.compile(r"^https?://[^\s/]+")


class ReceiversConfig(_Strict):
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
            _parsable_url(url)
        return v


class AlertsConfig(_Strict):
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
    receivers: ReceiversConfig = Field(default_factory=ReceiversConfig)


class ImbalanceConfig(_Strict):
    """When a replica departs from its peers (``app.fleet.imbalance``)."""

    min_replicas: int = Field(2, ge=2, description="fewer replicas with data: no peers")
    load_ratio: float = Field(
        1.5, gt=1, description="running (or waiting) avg >= this x the peers' mean"
    )
    load_min_delta: float = Field(
        2.0, ge=0, description="…and at least this many running requests above it"
    )
    waiting_min: float = Field(1.0, ge=0, description="a queue: waiting avg >= this")
    idle_waiting_max: float = Field(
        0.1, ge=0, description="a peer with waiting avg <= this (and fewer running) is idle"
    )
    kv_spread: float = Field(
        0.3, gt=0, le=1, description="KV usage avg max - min across replicas >= this"
    )
    latency_ratio: float = Field(
        2.0, gt=1, description="TTFT or ITL p99 >= this x the peers' median p99"
    )
    min_observations: int = Field(
        50, ge=1, description="observations each replica needs for its p99 to be compared"
    )


class FleetConfig(_Strict):
    """Replicas of one model, aggregated (``app.fleet``)."""

    group_by: list[str] = Field(
        default_factory=list,
        description="target labels that split a model's replicas into fleets, e.g. [cluster]",
    )
    imbalance: ImbalanceConfig = Field(default_factory=ImbalanceConfig)


class SloObjectConfig(_Strict):
    """A service-level objective on a fleet: latency objectives, target ratio, period."""

    name: str
    selector: dict[str, str] = Field(
        default_factory=dict,
        description="model_name and/or target labels the replicas must have; {} = every model",
    )
    ttft: float | None = Field(None, gt=0, description="a request is good if TTFT <= this, s")
    itl: float | None = Field(
        None, gt=0, description="a token gap is good if <= this, s (a share of gaps)"
    )
    tpot: float | None = Field(
        None, gt=0, description="a request is good if its time per output token <= this, s"
    )
    target: float = Field(0.99, gt=0, lt=1, description="share of good events promised")
    period: float = Field(30 * 86400.0, gt=0, description="budget period, seconds or 30d")
    bad_finish_reasons: list[str] = Field(
        default_factory=lambda: ["error"],
        description="finished_reason values that count against the SLO; [] = none",
    )

    @field_validator("name")
    @classmethod
    def _slo_name_ok(cls, v: str) -> str:
        if not _NAME_RE.match(v):
            raise ValueError("must be 1-128 characters of letters, digits and _.:@-")
        return v

    @field_validator("period", mode="before")
    @classmethod
    def _period(cls, v: object) -> object:
        return parse_duration(v) if isinstance(v, str) else v

    @model_validator(mode="after")
    def _has_objective(self) -> SloObjectConfig:
        latency = (self.ttft, self.itl, self.tpot)
        if all(v is None for v in latency) and not self.bad_finish_reasons:
            raise ValueError("an SLO needs ttft, itl, tpot or bad_finish_reasons")
        return self


class WhatIfConfig(_Strict):
    """The what-if twin in the service: the hints' predicted effects (``app.read.effects``)."""

    hint_effects: bool = Field(
        True, description="price each problem stream's hints on its twin and show the effect"
    )
    cpu_share: float = Field(
        0.02, gt=0, le=1, description="of one core, at most, on average, for that pricing"
    )


class Settings(BaseSettings):
    """Everything phasewatch can be told."""

    model_config = SettingsConfigDict(
        env_prefix="PHASEWATCH_", env_nested_delimiter="__", extra="forbid", frozen=True
    )

    targets: list[TargetConfig] = Field(default_factory=list)
    file_sd: list[FileSdConfig] = Field(
        default_factory=list, description="targets from files of target groups (Prometheus')"
    )
    http_sd: list[HttpSdConfig] = Field(
        default_factory=list, description="targets from URLs answering target groups"
    )
    scrape: ScrapeConfig = Field(default_factory=ScrapeConfig)
    window: WindowConfig = Field(default_factory=WindowConfig)
    slo: SloConfig = Field(default_factory=SloConfig)
    storage: StorageConfig = Field(default_factory=StorageConfig)
    server: ServerConfig = Field(default_factory=ServerConfig)
    log: LogConfig = Field(default_factory=LogConfig)
    source: SourceConfig = Field(default_factory=SourceConfig)
    alerts: AlertsConfig = Field(default_factory=AlertsConfig)
    fleet: FleetConfig = Field(default_factory=FleetConfig)
    whatif: WhatIfConfig = Field(default_factory=WhatIfConfig)
    probes: list[ProbeConfig] = Field(
        default_factory=list, description="requests sent to time what a client sees"
    )
    probing: ProbingConfig = Field(default_factory=ProbingConfig)
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


class _FileSource(PydanticBaseSettingsSource):
    """The YAML file's contents, as a settings source below the environment."""

    def __init__(self, settings_cls: type[BaseSettings], data: dict[str, Any]) -> None:
        super().__init__(settings_cls)
        self._data = data

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self._data)


def parse_target_flag(flag: str) -> dict[str, str]:
    """Turn ``NAME=URL`` into a target mapping."""
    name, sep, url = flag.partition("=")
    if not sep or not name or not url:
        raise ConfigError(f"--target {flag!r}: expected NAME=URL")
    return {"name": name, "url": url}


def _format_error(err: ValidationError, source: str) -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
    more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return f"config error in {source}: {loc}: {first['msg']}{more}"


def _source(path: str | Path | None) -> str:
    return "environment" if path is None else str(path)


def field_error(path: str | Path | None, loc: str, message: str) -> ConfigError:
    """The error of a check run on loaded settings by the layer that knows the field's
    meaning (the rule file: ``app.alerts.rules.check_rule_files``), worded as a check
    run while loading would be: ``config error in FILE: alerts: Value error, …``."""
    return ConfigError(f"config error in {_source(path)}: {loc}: Value error, {message}")


def load_settings(
    path: str | Path | None = None, overrides: dict[str, Any] | None = None
) -> Settings:
    """Load settings from an optional YAML file, the environment and CLI overrides."""
    data: dict[str, Any] = {}
    source = _source(path)
    if path is not None:
        try:
            raw = safeyaml.load(Path(path).read_text(encoding="utf-8"), str(path))
        except OSError as exc:
            raise ConfigError(f"config error: cannot read {path}: {exc.strerror}") from exc
        except safeyaml.YamlError as exc:  # one line: FILE:LINE:COLUMN: not valid YAML: …
            raise ConfigError(f"config error in {exc}") from None
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise ConfigError(f"config error in {path}: the top level must be a mapping")
        data = raw

    class _Loaded(Settings):
        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            # Command-line overrides, then the environment, then the file.
            return (init_settings, env_settings, _FileSource(settings_cls, data))

    try:
        loaded = _Loaded(**(overrides or {}))
    except ValidationError as exc:
        raise ConfigError(_format_error(exc, source)) from exc
    return Settings.model_construct(**dict(loaded))
