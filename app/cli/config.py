"""``phasewatch config check FILE``: validate a configuration without starting anything."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from app.config import ConfigError, load_settings


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("config", help="work with configuration files")
    actions = p.add_subparsers(dest="config_action", required=True, metavar="ACTION")
    check = actions.add_parser("check", help="validate a configuration file and exit")
    check.add_argument("file", metavar="FILE")
    check.set_defaults(func=run_check)


def run_check(args: argparse.Namespace) -> int:
    try:
        settings = load_settings(args.file)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    print(
        f"{args.file}: ok — {len(settings.targets)} target(s), scrape every "
        f"{settings.scrape.interval:g} s, SLO TTFT p99 {settings.slo.ttft_p99:g} s / "
        f"ITL p99 {settings.slo.itl_p99:g} s, store {settings.storage.path}"
    )
    return 0
