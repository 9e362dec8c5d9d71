"""``phasewatch replay DIR`` on a fleet recording: one sub-folder of pages per replica.

Prints, per window, each pool's class (a P/D fleet: ``prefill``, ``decode``, ``both``;
otherwise the fleet's own), the client's TTFT (measured or estimated, ``docs/pd-fleets.md``)
and the pool imbalance with the ratio to move to; then, once per problem seen, its
latest summary and top hints. ``--json``: ``{"dir", "fleet": true, "targets", "windows"}``
with every window's fleet view (``app.fleet.view.FleetView.to_dict``). Roles come from
the ``role`` labels of ``--config``'s targets (named as the sub-folders), else the pages.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.cli.config import load_config
from app.cli.diagnose import config_from, fail
from app.config import ConfigError
from app.diagnose.classes import PROBLEM_CLASSES, label
from app.diagnose.records import fmt_value
from app.evaluate.fleet_replay import replay_fleet_recording
from app.fleet.pools import roles_from_labels
from app.fleet.view import FleetView

__all__ = ["run_fleet_replay"]


def _ts(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _line(v: FleetView) -> str:
    w = v.fleet.window
    head = f"{_ts(w.end)}  {v.fleet.key.name}"
    if v.pd is None:
        d = v.diagnosis
        return f"{head}  fleet of {len(v.fleet.replicas)}: {label(d.cls, d.sub_cause)}"
    parts = [
        f"{role}({len(p.replicas)}) {label(p.diagnosis.cls, p.diagnosis.sub_cause)}"
        for role, p in v.pd.pools.items()
    ]
    c = v.pd.client
    if c.measured:
        parts.append(f"client TTFT {fmt_value(c.probe_mean, 's')} (probe)")
    else:
        parts.append(
            f"client TTFT ≈ {fmt_value(c.mean, 's')} (estimate), ≤ {fmt_value(c.upper, 's')} p99"
        )
    if v.pd.imbalance is not None:
        parts.append(f"pools: move to {v.pd.imbalance.ratio}")
    return f"{head}  " + " · ".join(parts)


def _summary(views: list[FleetView]) -> None:
    seen: Counter[str] = Counter()
    last: dict[str, Any] = {}
    for v in views:
        if v.pd is None:  # replicas that each serve both phases: the fleet's own class
            if v.diagnosis.cls in PROBLEM_CLASSES:
                key = f"fleet: {label(v.diagnosis.cls, v.diagnosis.sub_cause)}"
                seen[key] += 1
                last[key] = (v, v.diagnosis)
            continue
        for role, p in v.pd.pools.items():
            if p.diagnosis.cls in PROBLEM_CLASSES:
                key = f"{role} pool: {label(p.diagnosis.cls, p.diagnosis.sub_cause)}"
                seen[key] += 1
                last[key] = (v, p.diagnosis)
        if v.pd.imbalance is not None:
            key = f"pool imbalance: move to {v.pd.imbalance.ratio}"
            seen[key] += 1
            last[key] = (v, v.pd.imbalance)
        if v.pd.client.mismatch:
            seen["TTFT mismatch"] += 1
            last["TTFT mismatch"] = (v, v.pd.client)
    if not seen:
        print("\nno problem in any window")
        return
    for key, count in seen.most_common():
        v, what = last[key]
        when = _ts(v.fleet.window.end)
        if key == "TTFT mismatch":
            print(f"\n{key}: {count} of {len(views)} windows — e.g. {when}: {what.mismatch}")
            continue
        if key.startswith("pool imbalance"):
            print(f"\n{key}: {count} of {len(views)} windows — e.g. {when}: {what.outlier.summary}")
            hints = what.outlier.hints
        else:
            print(f"\n{key}: {count} of {len(views)} windows — e.g. {when}: {what.summary}")
            hints = what.hints
        for i, h in enumerate(hints[:3], 1):
            print(f"  {i}. {h.title}: {h.action}")
            print(f"     why: {h.why}")


def run_fleet_replay(args: argparse.Namespace) -> int:
    """The fleet replay (module docstring)."""
    try:
        config = config_from(args)
        roles = roles_from_labels(
            {t.name: t.labels for t in load_config(args.config).targets} if args.config else {}
        )
        replay = replay_fleet_recording(
            Path(args.dir), length=args.window, step=args.step, config=config, roles=roles
        )
    except (ConfigError, OSError, ValueError) as exc:
        return fail(exc)
    views = list(replay.views)
    if args.json:
        out = {
            "dir": str(args.dir),
            "fleet": True,
            "targets": list(replay.targets),
            "start": replay.start,
            "end": replay.end,
            "window": args.window,
            "step": args.step,
            "windows": [v.to_dict() for v in views],
        }
        print(json.dumps(out, indent=2, allow_nan=False))
        return 0
    print(f"fleet recording: {', '.join(replay.targets)}")
    for v in views:
        print(_line(v))
        if args.verbose and v.pd is not None:
            for role, p in v.pd.pools.items():
                print(f"    {role}: {p.diagnosis.summary}")
            print(f"    {v.pd.client.text()}")
            if v.pd.client.mismatch:
                print(f"    mismatch: {v.pd.client.mismatch}")
    _summary(views)
    return 0
