"""The CLI reference, rendered from the argparse parser of ``app.cli``.

Every command of ``phasewatch`` (``COMMANDS``, in ``--help``'s order), its usage and every
argument with its default and help. An argument or a command without a help is an error:
the docs build (``mkdocs build --strict``, run by ``make lint``) fails until it has one.
Run alone, it prints the page: ``.venv/bin/python docs/gen/cli_ref.py``.
"""

from __future__ import annotations

import argparse
import os
import sys

from app.cli import build_parser

HEADER = """# CLI reference

Generated from the argparse parsers of `app/cli/` when the site is built, so it cannot
drift from the code: every command, its usage, and every argument with its default and
help. The [CLI](../cli.md) page shows the commands at work and what each prints.
"""


class MissingHelp(ValueError):
    """Commands or arguments without a help: the reference would not say what they do."""


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _name(action: argparse.Action) -> str:
    if action.option_strings:
        flags = ", ".join(action.option_strings)
        if action.nargs == 0:
            return f"`{flags}`"
        metavar = action.metavar or action.dest.upper()
        if isinstance(metavar, tuple):
            metavar = " ".join(metavar)
        return f"`{flags} {metavar}`"
    return f"`{action.metavar or action.dest}`"


def _default(action: argparse.Action) -> str:
    if not action.option_strings or action.nargs == 0:
        return ""
    if action.default is None or action.default == argparse.SUPPRESS:
        return ""
    return f"`{action.default}`"


def _command(
    parser: argparse.ArgumentParser, path: str, help_: str | None, missing: list[str]
) -> list[str]:
    text = help_ or parser.description
    if not text:
        missing.append(f"{path} (the command)")
    out = [f"## `{path}`", "", _cell(text or ""), ""]
    if parser.description and help_ and parser.description != help_:
        out += [parser.description.strip(), ""]
    out += ["```", parser.format_usage().strip(), "```", ""]
    rows = []
    children: list[tuple[str, argparse.ArgumentParser, str | None]] = []
    formatter = parser._get_formatter()
    for group in parser._action_groups:
        for action in group._group_actions:
            if isinstance(action, argparse._HelpAction):
                continue
            if isinstance(action, argparse._SubParsersAction):
                helps = {c.dest: c.help for c in action._choices_actions}
                for name, sub in action.choices.items():
                    children.append((f"{path} {name}", sub, helps.get(name)))
                continue
            if not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"{path} {_name(action)}")
                continue
            helptext = formatter._expand_help(action)
            rows.append(f"| {_name(action)} | {_default(action)} | {_cell(helptext)} |")
    if rows:
        out += ["| argument | default | help |", "|---|---|---|", *rows, ""]
    for child_path, child, child_help in children:
        out += _command(child, child_path, child_help, missing)
    return out


def render() -> str:
    """The page as Markdown; raises :class:`MissingHelp` naming every argument or
    command that has no help."""
    os.environ["COLUMNS"] = "100"  # usage lines wrapped the same on every machine
    parser = build_parser()
    missing: list[str] = []
    out = [HEADER]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {c.dest: c.help for c in action._choices_actions}
            for name, sub in action.choices.items():
                out += _command(sub, f"phasewatch {name}", helps.get(name), missing)
    if missing:
        raise MissingHelp("arguments without a help (give each a help=): " + ", ".join(missing))
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
