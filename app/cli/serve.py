"""``phasewatch serve``: the service in the foreground, until interrupted."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from app.cli.config import load_config
from app.config import ConfigError, Settings, parse_target_flag
from app.logs import collect_secrets, setup_logging


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "serve", help="scrape vLLM targets and serve the API", description=_serve_doc()
    )
    p.add_argument("--config", metavar="FILE", help="YAML configuration file")
    p.add_argument(
        "--target",
        action="append",
        default=[],
        metavar="NAME=URL",
        help="a vLLM /metrics URL to scrape (repeatable; added to the file's targets)",
    )
    p.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port to listen on (default 8321)")
    p.add_argument("--db", metavar="PATH", help="SQLite store path (default phasewatch.db)")
    p.set_defaults(func=run_serve)


def _serve_doc() -> str:
    return (
        "Scrape the configured vLLM targets every interval, keep the history in SQLite and "
        "serve the JSON API (/api/v1, OpenAPI at /docs)."
    )


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Load the file and environment, then apply the command-line flags (the rule file
    checked too: :func:`app.cli.config.load_config`)."""
    overrides: dict[str, Any] = {}
    server: dict[str, Any] = {}
    if args.host:
        server["host"] = args.host
    if args.port is not None:
        server["port"] = args.port
    if server:
        overrides["server"] = server
    if args.db:
        overrides["storage"] = {"path": args.db}
    settings = load_config(args.config, overrides)
    if args.target:
        extra = [parse_target_flag(t) for t in args.target]
        merged = [t.model_dump() for t in settings.targets] + extra
        settings = load_config(args.config, {**overrides, "targets": merged})
    return settings


def run_serve(args: argparse.Namespace) -> int:
    try:
        settings = settings_from_args(args)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    if not settings.targets and settings.source.kind == "scrape":
        print(
            "config error: no targets: give --target NAME=URL or a config file with targets",
            file=sys.stderr,
        )
        return 2
    return serve(settings)


def serve(settings: Settings) -> int:
    """Run the service in the foreground until interrupted."""
    import uvicorn

    from app.main import create_app
    from app.store.sqlite import StoreError

    setup_logging(
        settings.log.level,
        json_lines=settings.log.json_lines,
        secrets=collect_secrets(settings.model_dump()),
    )
    if settings.server.port == 0:
        settings = settings.model_copy(
            update={"server": settings.server.model_copy(update={"port": free_port()})}
        )
    try:
        app = create_app(settings)
        print(
            f"phasewatch: {len(settings.targets)} target(s), API on "
            f"http://{settings.server.host}:{settings.server.port}/api/v1 (docs at /docs)",
            flush=True,
        )
        print(f"UI on http://{settings.server.host}:{settings.server.port}/ui/", flush=True)
        # log_config=None: uvicorn's records go through our handler (redacted, one line
        # each, JSON with log.json_lines), not through handlers of its own.
        uvicorn.run(
            app,
            host=settings.server.host,
            port=settings.server.port,
            log_level="warning",
            log_config=None,
        )
    except StoreError as exc:
        print(f"store error: {exc}", file=sys.stderr)
        return 2
    return 0


def free_port() -> int:
    """A port free on 127.0.0.1 now, for a server asked to listen on port 0."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
