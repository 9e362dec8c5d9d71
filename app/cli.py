"""The ``phasewatch`` command line: one sub-command per entry point.

Each sub-command lives in the module that owns it and registers itself here through a
``register(subparsers)`` function that sets ``func`` on its parser; ``func(args)`` returns
the process exit code.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    from app.commands import register_all

    parser = argparse.ArgumentParser(
        prog="phasewatch",
        description="Watch vLLM servers and explain why they are slow.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    register_all(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
