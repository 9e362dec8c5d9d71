"""``phasewatch rules check|replay``: alert rule files, checked or tried on a recording.

* ``rules check FILE…`` validates rule files (like ``promtool check rules``): exit 0 and
  one line per file, or exit 2 with the error naming file, line, column and rule.
* ``rules replay DIR`` evaluates rules over a recording: "which alerts would have
  fired?" — for post-incident review and to try a rule file before deploying it.

:func:`replayed` evaluates the rules over a recording: ``rules replay`` prints it, and
``replay DIR --json`` adds its ``alerts`` (transitions with ``alertname``, ``state``,
``at``…) to the diagnosis timeline.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.alerts.rules import Rule, RuleError, combine, default_rules, load_rule_file
from app.cli.config import load_config
from app.cli.diagnose import add_server_option, parse_server
from app.config import ConfigError, Settings
from app.evaluate.replay import DEFAULT_UI_BASE_URL, replay
from app.evaluate.settings import diagnosis_config
from app.fleet.specs import slo_specs
from app.sources.recording import read_scrapes


def register(sub: Any) -> None:
    rules: argparse.ArgumentParser = sub.add_parser(
        "rules", help="check alert rule files, or try them on a recording"
    )
    actions = rules.add_subparsers(dest="rules_action", required=True, metavar="ACTION")
    check = actions.add_parser("check", help="validate rule files and exit")
    check.add_argument("files", nargs="+", metavar="FILE", help="rule files to validate")
    check.set_defaults(func=run_check)
    try_ = actions.add_parser("replay", help="evaluate rules over a recording folder")
    _replay_args(try_)
    try_.set_defaults(func=run_rules_replay)


def _replay_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", metavar="DIR", help="folder of <unix-seconds>.prom pages")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--config", metavar="FILE", help="YAML configuration (SLOs, alerts, rules)")
    p.add_argument("--rules", metavar="FILE", help="a rule file (instead of alerts.rules_file)")
    p.add_argument(
        "--no-default-rules", action="store_true", help="leave the shipped rule pack out"
    )
    p.add_argument("--window", type=float, default=None, help="window length, s (default 60)")
    p.add_argument("--step", type=float, default=None, help="step between windows, s (default 15)")
    p.add_argument("--target", help="target name (default: the folder's name)")
    add_server_option(p)


def run_check(args: argparse.Namespace) -> int:
    for path in args.files:
        try:
            rules = load_rule_file(path)
        except RuleError as exc:
            print(exc, file=sys.stderr)
            return 2
        print(f"{path}: ok — {len(rules)} rule(s): {', '.join(r.name for r in rules)}")
    return 0


def _settings(args: argparse.Namespace) -> Settings:
    return load_config(getattr(args, "config", None))


def _rules(args: argparse.Namespace, settings: Settings) -> list[Rule]:
    packs = [] if getattr(args, "no_default_rules", False) else [default_rules()]
    path = getattr(args, "rules", None) or settings.alerts.rules_file
    if path is not None:
        packs.append(load_rule_file(path))
    return combine(*packs)


def replayed(args: argparse.Namespace, folder: Path) -> tuple[dict[str, Any], list[Any]]:
    """(the replay's summary and alerts as JSON, the diagnoses) — errors propagate.

    ``args`` may come from ``rules replay`` or from ``replay``, which has no ``--rules``
    or ``--no-default-rules``: what is missing takes its default.
    """
    settings = _settings(args)
    rules = _rules(args, settings)
    scrapes = read_scrapes(folder, getattr(args, "target", None))
    length = getattr(args, "window", None) or 60.0
    step = getattr(args, "step", None) or 15.0
    result = replay(
        scrapes,
        rules,
        length=length,
        step=step,
        config=dataclasses.replace(
            diagnosis_config(settings), server=parse_server(getattr(args, "server", []))
        ),
        ui_base_url=settings.ui_base_url or DEFAULT_UI_BASE_URL,
        resolved_retention=settings.alerts.resolved_retention,
        slos=slo_specs(settings),
        fire_on_unproven=settings.alerts.fire_on_unproven,
    )
    summary = {
        "target": scrapes.target,
        "start": scrapes.start,
        "end": scrapes.end,
        "window": length,
        "step": step,
        "rules": [r.name for r in rules],
        "alerts": [t.to_dict() for t in result.transitions],
    }
    return summary, result.diagnoses


def _fail(exc: Exception) -> int:
    print(exc if isinstance(exc, ConfigError | RuleError) else f"error: {exc}", file=sys.stderr)
    return 2


def _ts(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _print_alerts(alerts: list[dict[str, Any]]) -> None:
    if not alerts:
        print("no alert would have fired")
        return
    for a in alerts:
        where = a["labels"].get("model_name") or a["labels"].get("target", "")
        print(f"{_ts(a['at'])}  {a['state']:<8}  {a['alertname']:<32}  {where}")
        if a["state"] == "firing" and a["annotations"].get("summary"):
            print(f"{'':31}{a['annotations']['summary']}")


def run_rules_replay(args: argparse.Namespace) -> int:
    try:
        summary, _ = replayed(args, Path(args.dir))
    except (ConfigError, RuleError, OSError, ValueError) as exc:
        return _fail(exc)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        _print_alerts(summary["alerts"])
    return 0
