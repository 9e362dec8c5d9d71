"""Settings: a YAML file, then ``PHASEWATCH_*`` environment variables, then CLI flags.

This is the only package that reads the environment. Precedence, lowest first: defaults,
the YAML file, the environment (``PHASEWATCH_SCRAPE__INTERVAL=10``, nested with ``__``),
then command-line overrides. A bad value raises :class:`ConfigError` with one line that
names the field; the CLI prints it and exits 2 before anything starts.

Nothing of the domain is imported here: what only the domain can judge (a rule file's
rules) is checked where the CLI and the service start (``app.cli.config.load_config``,
``app.main.create_app``), and :func:`field_error` words its error like the others.

One module per section: ``targets``, ``discovery`` (``file_sd``, ``http_sd``),
``scrape`` (and ``window``), ``slo`` (and ``slos``), ``source``, ``alerts``, ``fleets``,
``service`` (``storage``, ``log``, ``server``, ``whatif``); ``settings`` puts them in
one model, ``loading`` reads it; ``checks`` has what they share. Every name is imported
from here: ``from app.config import Settings, load_settings``.
"""

from __future__ import annotations

from app.config.alerts import AlertsConfig, ReceiversConfig
from app.config.checks import ConfigError
from app.config.discovery import FileSdConfig, HttpSdConfig
from app.config.fleets import FleetConfig, ImbalanceConfig
from app.config.loading import field_error, load_settings, parse_target_flag
from app.config.scrape import ScrapeConfig, WindowConfig
from app.config.service import LogConfig, ServerConfig, StorageConfig, WhatIfConfig
from app.config.settings import Settings, resolve_ui_base_url
from app.config.slo import SloConfig, SloObjectConfig, SloValues
from app.config.source import BasicAuth, SourceConfig
from app.config.targets import TargetConfig, TargetServerConfig

__all__ = [
    "AlertsConfig",
    "BasicAuth",
    "ConfigError",
    "FileSdConfig",
    "FleetConfig",
    "HttpSdConfig",
    "ImbalanceConfig",
    "LogConfig",
    "ReceiversConfig",
    "ScrapeConfig",
    "ServerConfig",
    "Settings",
    "SloConfig",
    "SloObjectConfig",
    "SloValues",
    "SourceConfig",
    "StorageConfig",
    "TargetConfig",
    "TargetServerConfig",
    "WhatIfConfig",
    "WindowConfig",
    "field_error",
    "load_settings",
    "parse_target_flag",
    "resolve_ui_base_url",
]
