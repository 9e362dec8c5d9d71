"""Registry of sub-commands: each owning module exposes ``register(subparsers)``."""

from __future__ import annotations

from typing import Any


def register_all(sub: Any) -> None:
    """Attach every sub-command to ``sub`` (an argparse sub-parsers action)."""
    from app import config_cli, demo_cli, serve_cli
    from app.sim import cli as sim_cli

    for module in (serve_cli, demo_cli, config_cli, sim_cli):
        module.register(sub)
