"""Registry of sub-commands: each owning module exposes ``register(subparsers)``."""

from __future__ import annotations

from typing import Any


def register_all(sub: Any) -> None:
    """Attach every sub-command to ``sub`` (an argparse sub-parsers action)."""
    from app import config_cli, demo_cli, serve_cli
    from app.alerts import cli as alerts_cli
    from app.diagnose import cli_diagnose, cli_kv
    from app.review import cli as review_cli
    from app.sim import cli as sim_cli

    # alerts_cli last: it extends a ``replay`` registered before it (see its docstring).
    for module in (
        serve_cli,
        demo_cli,
        config_cli,
        sim_cli,
        review_cli,
        cli_kv,
        cli_diagnose,
        alerts_cli,
    ):
        module.register(sub)
    from app.ui import cli as ui_cli

    ui_cli.register(sub)
