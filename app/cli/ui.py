"""``phasewatch ui``: the UI over a recording folder or a past Prometheus range.

Either source is loaded into an in-memory store through the same path live data takes
(the sources' ``process`` for a recording, ``PrometheusSource.read`` for a range)
and served exactly as the live service serves its store: same windows, same diagnosis,
same pages; the range presets count back from the source's end. The default alert
rules (plus ``alerts.rules_file``) are replayed over a recording, so its alerts page
shows what would have fired.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

from app.cli.serve import free_port


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "ui",
        help="serve the web UI over a recording folder or a Prometheus range",
        description=(
            "Serve the Dash UI (at /ui/) over a recording — a folder of <unix-seconds>.prom "
            "pages, as `phasewatch sim --record` or a curl loop writes them — or over a "
            "past range read from a Prometheus-compatible API. For live data use "
            "`phasewatch serve` or `phasewatch demo`: they serve the UI at /ui/ too."
        ),
    )
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--recording", metavar="DIR", help="recording folder")
    what.add_argument("--prometheus", metavar="URL", help="Prometheus base URL")
    p.add_argument("--start", help="with --prometheus: Unix seconds, RFC 3339 or now-2h")
    p.add_argument("--end", default="now", help="with --prometheus: as --start (default now)")
    p.add_argument("--selector", help="with --prometheus: label matchers, e.g. '{job=\"vllm\"}'")
    p.add_argument("--config", metavar="FILE", help="YAML configuration (SLOs, window, source)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--port", type=int, default=8321, help="port (default 8321; 0 = any)")
    p.add_argument("--device", help="GPU preset for the roofline (e.g. l40s, h100-sxm)")
    p.add_argument("--model-params", type=float, metavar="B", help="model size, billions")
    p.add_argument("--dtype", default="bfloat16", help="weight dtype for the roofline")
    p.set_defaults(func=run)


def _prometheus(args: argparse.Namespace, settings: Any) -> Any:
    from app.config import load_settings
    from app.read.review.run import parse_time
    from app.read.source import load_history
    from app.redact import redact_url
    from app.sources.prometheus import PrometheusSource

    if not args.start:
        raise ValueError("--prometheus needs --start")
    src = {**settings.source.model_dump(), "kind": "prometheus", "url": args.prometheus}
    if args.selector is not None:
        src["selector"] = args.selector
    cfg = load_settings(args.config, {"source": src}).source
    now = time.time()
    start, end = parse_time(args.start, now), parse_time(args.end, now)
    if not end > start:
        raise ValueError("--end must be after --start")
    source = PrometheusSource(cfg)

    async def read() -> Any:
        try:
            return await source.read(start - settings.window.length, end)
        finally:
            await source.aclose()

    history = asyncio.run(read())
    return load_history(
        history, start=start, end=end, label=f"Prometheus {redact_url(cfg.url or '')}"
    )


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from app.alerts.engine import configured_rules
    from app.cli.config import load_config
    from app.config import ConfigError
    from app.diagnose import Hardware
    from app.evaluate.replay import replay_alerts
    from app.evaluate.settings import diagnosis_config
    from app.fleet.specs import slo_specs
    from app.read.alertfeed import AlertFeed, NoAlerts, ReplayedAlerts
    from app.read.fleetpoints import FleetOptions
    from app.read.source import load_recording
    from app.sources.promapi import PrometheusError
    from app.sources.recording import read_scrapes
    from app.ui.mount import standalone

    alerts: AlertFeed = NoAlerts()
    try:
        settings = load_config(args.config)
        config = diagnosis_config(settings)
        if args.device and args.model_params:
            hw = Hardware.resolve(
                device=args.device, params=args.model_params * 1e9, dtype=args.dtype
            )
            config = dataclasses.replace(config, hardware=hw)
        if args.recording:
            source = load_recording(args.recording)
            name = source.targets()[0].name
            transitions = replay_alerts(
                read_scrapes(Path(args.recording), target=name),
                configured_rules(settings.alerts),
                length=settings.window.length,
                step=settings.window.step,
                config=diagnosis_config(settings),
                ui_base_url="/ui",
            )
            alerts = ReplayedAlerts(transitions)
        else:
            source = _prometheus(args, settings)
    except (ConfigError, ValueError, OSError) as exc:
        print(f"phasewatch ui: {exc}", file=sys.stderr)
        return 2
    except PrometheusError as exc:
        print(f"prometheus error: {exc}", file=sys.stderr)
        return 1
    app = standalone(
        source,
        config,
        length=settings.window.length,
        step=settings.window.step,
        alert_feed=alerts,
        fleet_options=FleetOptions.from_config(
            settings.fleet, settings.storage, slo_specs(settings), settings.targets
        ),
    )
    port = args.port
    if port == 0:
        port = free_port()
    print(f"phasewatch UI ({source.label}) on http://{args.host}:{port}/ui/", flush=True)
    uvicorn.run(app, host=args.host, port=port, log_level="warning")
    return 0
