"""The ``phasewatch`` command line: every entry point, and the only place that prints.

One module per command. Each has ``register(subparsers)``, which adds its own
sub-command and sets ``func`` on its parser; ``func(args)`` returns the process exit
code. :data:`COMMANDS` lists them in the order ``phasewatch --help`` shows them.
Modules here may import any layer of ``app``; nothing outside ``app.cli`` imports them.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any, Protocol

from app.cli import (
    config,
    demo,
    diagnose,
    kv,
    replay,
    review,
    rules,
    scrape_once,
    serve,
    sim,
    ui,
    whatif,
)


class Command(Protocol):
    """A command module: adds its sub-command to an argparse sub-parsers action."""

    def register(self, sub: Any) -> None: ...


COMMANDS: tuple[Command, ...] = (
    serve,
    scrape_once,
    demo,
    config,
    sim,
    review,
    kv,
    diagnose,
    replay,
    whatif,
    rules,
    ui,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="phasewatch",
        description="Watch vLLM servers and explain why they are slow.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except BrokenPipeError:
        # The reader went away (``phasewatch replay --json | head``): as a Unix tool does,
        # stop quietly; stdout is pointed at /dev/null so the interpreter's final flush
        # does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a tool killed by it
    return code
