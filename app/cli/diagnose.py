"""``phasewatch diagnose URL``: one-shot triage of a live server.

It and ``replay`` share the diagnosis options (:func:`add_diagnosis_options`): the SLOs
(``--slo-ttft-p99``, ``--slo-itl-p99``, or a ``--config`` file's ``slo`` section with
its per-target/model overrides) and, optionally, a GPU and a model for the decode
roofline (``--gpu`` preset or ``--bandwidth-gbs``; ``--weight-bytes``, ``--params``
with ``--dtype``, or ``--model-config config.json``).

The server's engine settings that /metrics does not show (``max_num_seqs``,
``max_num_batched_tokens``, ``max_model_len``, the model, the device…) come from the
``--config`` file's targets (their ``server:`` blocks) and ``--server KEY=VALUE``
(repeatable, every stream; it wins over a target's block): the hints start from them,
and say "assumed vLLM default" where they had to guess.

A problem window says what changed against the stream's healthy past when there is one
to read (``app.evaluate.baseline.history_for_url``): a Prometheus source, or the store
of a phasewatch service that scrapes this URL (``--config``, or the environment);
otherwise its summary says there is no baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from app.cli.config import load_config
from app.config import ConfigError, Settings, TargetServerConfig
from app.diagnose.config import DEFAULT_CONFIG, DiagnosisConfig
from app.diagnose.render import render
from app.diagnose.roofline import DEVICE_BANDWIDTH_GBS, Hardware
from app.diagnose.server import SERVER_KEYS, ServerSettings
from app.evaluate.baseline import history_for_url, no_history
from app.evaluate.replay import diagnose_observed
from app.evaluate.settings import server_settings, with_servers, with_slo
from app.redact import redact_url
from app.sources.watch import failures, nothing_to_judge, observe


def add_server_option(p: argparse.ArgumentParser) -> None:
    """``--server KEY=VALUE`` (repeatable): the server's engine settings for the hints."""
    p.add_argument(
        "--server",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a vLLM engine setting the page does not show, for the hints (repeatable; "
        f"over the config's server: blocks): {', '.join(SERVER_KEYS)}",
    )


def parse_server(flags: list[str]) -> ServerSettings:
    """``--server`` flags → the settings; ValueError naming the flag when one is bad."""
    values: dict[str, str] = {}
    for flag in flags:
        key, sep, value = flag.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ValueError(f"--server {flag!r}: expected KEY=VALUE")
        if key not in SERVER_KEYS:
            raise ValueError(
                f"--server {flag!r}: unknown key {key!r} (known: {', '.join(SERVER_KEYS)})"
            )
        values[key] = value.strip()
    try:
        return server_settings(TargetServerConfig.model_validate(values))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"--server {where}={values.get(where, '')}: {first['msg']}") from None


def add_diagnosis_options(p: argparse.ArgumentParser) -> None:
    """``--json``, the SLO flags, ``--server`` and the roofline group, as ``diagnose`` and
    ``replay`` take."""
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--slo-ttft-p99", type=float, metavar="S", help="TTFT p99 SLO, s (default 2)")
    p.add_argument("--slo-itl-p99", type=float, metavar="S", help="ITL p99 SLO, s (default 0.1)")
    p.add_argument(
        "--config", metavar="FILE", help="YAML configuration (its slo section, targets' server:)"
    )
    add_server_option(p)
    g = p.add_argument_group("roofline (optional): a GPU and a model")
    g.add_argument("--gpu", choices=sorted(DEVICE_BANDWIDTH_GBS), help="device preset")
    g.add_argument("--bandwidth-gbs", type=float, help="memory bandwidth, GB/s")
    g.add_argument("--weight-bytes", type=float, help="bytes of weights read per decode step")
    g.add_argument("--params", type=float, help="parameter count (e.g. 8e9)")
    g.add_argument("--dtype", help="weight dtype for --params/--model-config (default 16 bit)")
    g.add_argument("--model-config", type=Path, metavar="JSON", help="the model's config.json")


def register(sub: Any) -> None:
    d: argparse.ArgumentParser = sub.add_parser(
        "diagnose",
        help="scrape a vLLM /metrics URL for a while and say why it is slow",
        description="One-shot triage: scrape URL every --interval seconds for --duration "
        "seconds, then print each stream's diagnosis, its evidence and what to change.",
    )
    d.add_argument("url", metavar="URL", help="a vLLM /metrics URL")
    d.add_argument("--duration", type=float, default=60.0, help="seconds to watch (default 60)")
    d.add_argument("--interval", type=float, default=5.0, help="seconds between scrapes")
    d.add_argument("--timeout", type=float, default=4.0, help="per-scrape timeout, s")
    d.add_argument("--quiet", action="store_true", help="no progress dots on stderr")
    d.add_argument("--verbose", action="store_true", help="the evidence of every rule")
    add_diagnosis_options(d)
    d.set_defaults(func=run_diagnose)


def config_from(args: argparse.Namespace) -> DiagnosisConfig:
    """SLOs (flags over the config file over the defaults), the servers' settings (the
    file's targets, ``--server`` over them) and the optional roofline."""
    config = DEFAULT_CONFIG
    if args.config:
        loaded = load_config(args.config)
        config = with_servers(with_slo(config, loaded.slo), loaded.targets)
    config = dataclasses.replace(config, server=parse_server(getattr(args, "server", [])))
    if args.slo_ttft_p99 is not None:
        config = dataclasses.replace(config, slo_ttft_p99=args.slo_ttft_p99)
    if args.slo_itl_p99 is not None:
        config = dataclasses.replace(config, slo_itl_p99=args.slo_itl_p99)
    model = json.loads(args.model_config.read_text()) if args.model_config else None
    hardware = Hardware.resolve(
        device=args.gpu,
        bandwidth_gbs=args.bandwidth_gbs,
        weight_bytes=args.weight_bytes,
        params=args.params,
        dtype=args.dtype,
        config=model,
    )
    return dataclasses.replace(config, hardware=hardware)


def fail(message: object) -> int:
    """Print ``phasewatch: message`` on stderr; exit status 2."""
    print(f"phasewatch: {message}", file=sys.stderr)
    return 2


def run_diagnose(args: argparse.Namespace) -> int:
    try:
        config = config_from(args)
        settings: Settings = load_config(args.config)
    except (ConfigError, OSError, ValueError) as exc:
        return fail(exc)

    def progress(elapsed: float, ok: bool) -> None:
        if not args.quiet and not args.json:
            print("." if ok else "x", end="", file=sys.stderr, flush=True)

    scrapes = asyncio.run(
        observe(
            args.url,
            duration=args.duration,
            interval=args.interval,
            timeout=args.timeout,
            on_scrape=progress,
        )
    )
    if not args.quiet and not args.json:
        print(file=sys.stderr)
    try:
        compare = asyncio.run(
            history_for_url(
                settings,
                args.url,
                before=scrapes.start,
                length=settings.window.length,
                step=settings.window.step,
                config=config,
            )
        )
    except (OSError, ValueError, RuntimeError) as exc:  # PrometheusError is a RuntimeError
        compare = no_history(f"could not read the stream's history: {exc}")
    # Nothing to judge (refused, no vLLM metrics, one scrape): say why, not an empty block.
    error = nothing_to_judge(scrapes)
    errors = failures(scrapes)
    diagnoses = [] if error else diagnose_observed(scrapes, config, compare=compare)
    ok = sum(1 for r in scrapes.records if r.ok)
    if args.json:
        out = {
            "url": redact_url(args.url),
            "start": scrapes.start,
            "end": scrapes.end,
            "scrapes": len(scrapes.records),
            "failed_scrapes": len(scrapes.records) - ok,
            "error": None if error is None else {"kind": error.kind, "message": error.text()},
            "errors": [e.to_dict() for e in errors],
            "diagnoses": [d.to_dict() for d in diagnoses],
        }
        print(json.dumps(out, indent=2))
    else:
        span = scrapes.end - scrapes.start
        n = len(scrapes.records)
        usable = f"{ok} ok" if ok else "none usable"
        plural = "" if n == 1 else "s"
        print(f"{redact_url(args.url)}: {n} scrape{plural} ({usable}) over {span:.0f} s")
        if error is not None:
            print(f"cannot diagnose: {error.text()}")
        for e in errors:
            if error is None or e.kind != error.kind:
                print(f"  {e.count} of {n} scrapes failed, {e.kind}: {e.message}")
        for d in diagnoses:
            print()
            print(render(d, verbose=args.verbose))
    return 1 if error else 0
