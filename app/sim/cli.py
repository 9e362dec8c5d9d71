"""``phasewatch sim``: the vLLM simulator (placeholder until the simulator lands)."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("sim", help="run the vLLM simulator")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    return 2
