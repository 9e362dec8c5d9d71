"""``phasewatch serve``: the service in the foreground, until interrupted."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
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
    discovered = settings.file_sd or settings.http_sd
    if not settings.targets and not discovered and settings.source.kind == "scrape":
        print(
            "config error: no targets: give --target NAME=URL or a config file with targets, "
            "file_sd or http_sd",
            file=sys.stderr,
        )
        return 2
    return serve(settings, reload_config=lambda: settings_from_args(args))


def configure_logging(settings: Settings) -> None:
    """The root logger for ``settings.log``, every configured secret scrubbed."""
    setup_logging(
        settings.log.level,
        json_lines=settings.log.json_lines,
        secrets=collect_secrets(settings.model_dump()),
    )


def serve(settings: Settings, reload_config: Callable[[], Settings] | None = None) -> int:
    """Run the service in the foreground until interrupted; ``reload_config`` reads the
    configuration again on ``SIGHUP`` and ``POST /-/reload``."""
    import uvicorn

    from app.api.connections import BACKLOG, ConnectionGuard, raise_descriptor_limit
    from app.main import create_app
    from app.store.sqlite import StoreError

    configure_logging(settings)
    if settings.server.port == 0:
        settings = settings.model_copy(
            update={"server": settings.server.model_copy(update={"port": free_port()})}
        )
    port = settings.server.port

    def reload() -> Settings:  # port 0 again means the port chosen at start-up
        assert reload_config is not None
        new = reload_config()
        if new.server.port == 0:
            new = new.model_copy(update={"server": new.server.model_copy(update={"port": port})})
        return new

    raise_descriptor_limit()
    guard = ConnectionGuard(
        max_connections=settings.server.max_connections,
        head_timeout=settings.server.request_head_timeout,
    )
    try:
        app = create_app(
            settings,
            reload_config=reload if reload_config is not None else None,
            configure_logging=configure_logging,
            reload_on_sighup=True,
            connections=guard,
        )
        print(
            f"phasewatch: {len(settings.targets)} target(s)"
            f"{_discovery_note(settings)}, API on "
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
            http=guard.protocol(),
            backlog=BACKLOG,
        )
    except StoreError as exc:
        print(f"store error: {exc}", file=sys.stderr)
        return 2
    return 0


def _discovery_note(settings: Settings) -> str:
    n = len(settings.file_sd) + len(settings.http_sd)
    return f" and {n} discovery config(s)" if n else ""


def free_port() -> int:
    """A port free on 127.0.0.1 now, for a server asked to listen on port 0."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
