"""``phasewatch config check FILE``: validate a configuration without starting anything.

:func:`load_config` is how every command loads its settings: ``app.config`` reads and
validates the file, the environment and the flags; the rule file is checked here, where
the domain may be imported, and refused with the same one line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from app.alerts.rules import RuleError, check_rule_files
from app.config import ConfigError, Settings, field_error, load_settings


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("config", help="work with configuration files")
    actions = p.add_subparsers(dest="config_action", required=True, metavar="ACTION")
    check = actions.add_parser("check", help="validate a configuration file and exit")
    check.add_argument("file", metavar="FILE", help="the YAML configuration file to check")
    check.set_defaults(func=run_check)


def load_config(
    path: str | Path | None = None, overrides: dict[str, Any] | None = None
) -> Settings:
    """:func:`app.config.load_settings`, then the rule file: :class:`ConfigError`
    (``config error in FILE: alerts: Value error, RULES:LINE:COL: …``) if either is bad."""
    settings = load_settings(path, overrides)
    try:
        check_rule_files(settings.alerts)
    except RuleError as exc:
        raise field_error(path, "alerts", str(exc)) from None
    return settings


def run_check(args: argparse.Namespace) -> int:
    try:
        settings = load_config(args.file)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    print(
        f"{args.file}: ok — {len(settings.targets)} target(s), scrape every "
        f"{settings.scrape.interval:g} s, SLO TTFT p99 {settings.slo.ttft_p99:g} s / "
        f"ITL p99 {settings.slo.itl_p99:g} s, store {settings.storage.path}"
    )
    return 0
