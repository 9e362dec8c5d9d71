"""``phasewatch replay DIR``: the diagnosis timeline of a recording, and its alerts.

Takes the diagnosis options of ``diagnose`` (SLOs, roofline). The text ends with, and
``--json``'s object lists under ``alerts``, the transitions the rules (the shipped pack
plus ``alerts.rules_file`` of ``--config``) would have made over the same windows, as
``rules replay`` computes them; when they cannot be evaluated, stderr says why and the
list is left out.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.alerts.rules import RuleError
from app.cli.diagnose import add_diagnosis_options, config_from, fail
from app.cli.replay_fleet import run_fleet_replay
from app.cli.rules import replayed
from app.config import ConfigError
from app.diagnose.records import PROBLEM_CLASSES, Diagnosis
from app.diagnose.render import render
from app.evaluate.fleet_replay import is_fleet_recording
from app.evaluate.replay import diagnose_scrapes
from app.sources.recording import read_scrapes


def register(sub: Any) -> None:
    r: argparse.ArgumentParser = sub.add_parser(
        "replay",
        help="diagnose a recording folder window by window (and the alerts it would fire)",
        description="A folder of <unix-seconds>.prom pages → the diagnosis timeline; a "
        "folder of such folders (one per replica: a fleet, e.g. a P/D fleet's recording) → "
        "each window's pools, client TTFT and imbalance.",
    )
    r.add_argument("dir", metavar="DIR", help="folder of <unix-seconds>.prom pages")
    r.add_argument("--window", type=float, default=60.0, help="window length, s (default 60)")
    r.add_argument("--step", type=float, default=15.0, help="step between windows, s")
    r.add_argument("--target", help="target name (default: the folder's name)")
    r.add_argument("--verbose", action="store_true", help="evidence and hints of every window")
    add_diagnosis_options(r)
    r.set_defaults(func=run_replay)


def _ts(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S")


def run_replay(args: argparse.Namespace) -> int:
    if is_fleet_recording(args.dir):  # one sub-folder per replica: a fleet (P/D pools)
        return run_fleet_replay(args)
    try:
        config = config_from(args)
        scrapes = read_scrapes(Path(args.dir), args.target)
        diagnoses = diagnose_scrapes(scrapes, length=args.window, step=args.step, config=config)
    except (ConfigError, OSError, ValueError) as exc:
        return fail(exc)
    if args.json:
        out = {
            "dir": str(args.dir),
            "target": scrapes.target,
            "start": scrapes.start,
            "end": scrapes.end,
            "window": args.window,
            "step": args.step,
            "slo": {"ttft_p99": config.slo_ttft_p99, "itl_p99": config.slo_itl_p99},
            "windows": [d.to_dict() for d in diagnoses],
        }
        try:
            out["alerts"] = replayed(args, Path(args.dir))[0]["alerts"]
        except (ConfigError, RuleError, OSError, ValueError) as exc:
            print(f"alerts not evaluated: {exc}", file=sys.stderr)
        print(json.dumps(out, indent=2))
        return 0
    width = max((len(d.model_name) for d in diagnoses), default=0)  # never cut a name
    for d in diagnoses:
        ttft = "n/a" if d.ttft_p99 is None else f"{'≥' if d.ttft_p99_ge else ''}{d.ttft_p99:.2f}s"
        itl = (
            "n/a" if d.itl_p99 is None else f"{'≥' if d.itl_p99_ge else ''}{d.itl_p99 * 1000:.0f}ms"
        )
        print(
            f"{_ts(d.end)}  {d.model_name:<{width}}  {d.label:<34} {d.confidence:4.2f}  "
            f"TTFT p99 {ttft:>8}  ITL p99 {itl:>7}"
        )
        if args.verbose:
            print(render(d, verbose=True))
    _print_hints(diagnoses)
    try:
        alerts = replayed(args, Path(args.dir))[0]["alerts"]
    except (ConfigError, RuleError, OSError, ValueError) as exc:
        print(f"alerts not evaluated: {exc}", file=sys.stderr)
    else:
        _print_alerts(alerts)
    return 0


def _print_alerts(alerts: list[dict[str, Any]]) -> None:
    """The transitions the rules would have made, oldest first; a firing one with its
    summary (a pending one has not held for its ``for`` yet: no summary claims it did)."""
    print("\nalerts the rules would have fired:" if alerts else "\nno alert would have fired")
    rows = [(a, a["labels"].get("model_name") or a["labels"].get("target", "")) for a in alerts]
    name_w = max((len(a["alertname"]) for a, _ in rows), default=0)
    for a, where in rows:
        print(f"{_ts(a['at'])}  {a['state']:<8}  {a['alertname']:<{name_w}}  {where}")
        if a["state"] == "firing" and a["annotations"].get("summary"):
            print(f"{'':21}{a['annotations']['summary']}")


def _print_hints(diagnoses: list[Diagnosis]) -> None:
    """Once per problem seen: how often, its latest summary and its top hints."""
    seen = Counter(d.label for d in diagnoses if d.cls in PROBLEM_CLASSES)
    if not seen:
        print("\nno problem class in any window")
        return
    for label, count in seen.most_common():
        last = next(d for d in reversed(diagnoses) if d.label == label)
        print(
            f"\n{label}: {count} of {len(diagnoses)} windows — e.g. {_ts(last.end)}: {last.summary}"
        )
        for i, h in enumerate(last.hints[:3], 1):
            print(f"  {i}. {h.title}: {h.action}")
            print(f"     why: {h.why}")
