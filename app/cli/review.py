"""``phasewatch review``: the post-incident report from an existing Prometheus.

Exit status: 0 with a report (even an empty one), 1 when Prometheus could not answer,
2 for bad arguments or configuration.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

from app.cli.config import load_config
from app.cli.diagnose import add_server_option, parse_server
from app.config import ConfigError, load_settings
from app.model import Snapshot
from app.read.review.render import to_json, to_markdown
from app.sources.promapi import PrometheusError
from app.sources.prometheus import History, PrometheusSource


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "review",
        help="post-incident review of a past range from Prometheus",
        description=(
            "Read the vLLM series of a past range from a Prometheus-compatible API, "
            "diagnose every window and print the class timeline, the p99 spikes with "
            "their evidence and hints, and the alerts that would have fired."
        ),
    )
    p.add_argument("--prometheus", metavar="URL", help="Prometheus base URL (or source.url)")
    p.add_argument("--start", required=True, help="Unix seconds, RFC 3339, or now-2h")
    p.add_argument("--end", default="now", help="as --start (default now)")
    p.add_argument("--selector", help="label matchers, e.g. '{job=\"vllm\"}'")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print JSON")
    fmt.add_argument("--markdown", action="store_true", help="print Markdown (the default)")
    p.add_argument("--diagnoses", action="store_true", help="with --json: every window too")
    p.add_argument(
        "--html",
        metavar="FILE",
        help="also write one self-contained HTML report to FILE: the five charts per stream, "
        "evidence, hints, alerts (Plotly inlined: it opens offline)",
    )
    p.add_argument("--window", type=float, help="window length, s (default window.length)")
    p.add_argument("--step", type=float, help="step between windows, s (default window.step)")
    p.add_argument("--resolution", type=float, help="query_range step, s (default 5 s or more)")
    p.add_argument("--raw", action="store_true", help="read the raw stored samples")
    p.add_argument("--spike-factor", type=float, default=3.0, help="× baseline p99 is a spike")
    p.add_argument(
        "--no-effects",
        action="store_true",
        help="do not price the findings' hints on the what-if twin (seconds each)",
    )
    p.add_argument("--target-label", help="label naming a target (default instance)")
    p.add_argument("--bearer-token-file", metavar="FILE", help="file holding a bearer token")
    p.add_argument("--basic-auth", metavar="USER:PASSWORD", help="basic auth credentials")
    p.add_argument("--insecure", action="store_true", help="do not verify TLS certificates")
    p.add_argument("--config", metavar="FILE", help="YAML configuration (SLOs, source)")
    add_server_option(p)
    p.set_defaults(func=run)


def _source_overrides(args: argparse.Namespace) -> dict[str, Any]:
    src: dict[str, Any] = {"kind": "prometheus"}
    if args.prometheus:
        src["url"] = args.prometheus
    if args.selector is not None:
        src["selector"] = args.selector
    if args.raw:
        src["mode"] = "raw"
    if args.target_label:
        src["target_label"] = args.target_label
    if args.insecure:
        src["tls_verify"] = False
    if args.bearer_token_file:
        src["bearer_token"] = Path(args.bearer_token_file).read_text(encoding="utf-8").strip()
    if args.basic_auth:
        user, _, password = args.basic_auth.partition(":")
        src["basic_auth"] = {"username": user, "password": password}
    return src


class _KeepingSource(PrometheusSource):
    """A Prometheus source that keeps what it read (the HTML report charts it)."""

    history: History | None = None

    async def read(
        self,
        start: float,
        end: float,
        *,
        step: float | None = None,
        mode: str | None = None,
        previous: dict[str, Snapshot] | None = None,
    ) -> History:
        self.history = await super().read(start, end, step=step, mode=mode, previous=previous)
        return self.history


def _write_html(
    path: str, review: Any, source: _KeepingSource, config: Any, length: float, step: float
) -> str:
    """Write the HTML report of ``review`` to ``path``; returns what was written."""
    from app.read.review.charts import review_timelines
    from app.redact import redact_url
    from app.ui.htmlreview import MAX_CHARTS, review_html

    timelines = {}
    if source.history is not None:
        timelines = review_timelines(
            source.history,
            review,
            config,
            length=length,
            step=step,
            label=f"Prometheus {redact_url(source.config.url or '')}",
            limit=MAX_CHARTS,
        )
    Path(path).write_text(review_html(review, timelines, generated_at=time.time()), "utf-8")
    return f"wrote {path} ({len(review.streams)} stream(s), {len(timelines)} chart(s))"


def run(args: argparse.Namespace) -> int:
    from app.alerts.engine import configured_rules
    from app.evaluate.settings import diagnosis_config
    from app.read.review.run import parse_time, run_review

    try:
        base = load_config(args.config)
        merged = {**base.source.model_dump(), **_source_overrides(args)}
        settings = load_settings(args.config, {"source": merged})
    except OSError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    now = time.time()
    try:
        start, end = parse_time(args.start, now), parse_time(args.end, now)
        if not end > start:
            raise ValueError("--end must be after --start")
        source = _KeepingSource(settings.source)
        rules = configured_rules(settings.alerts)
        config = dataclasses.replace(diagnosis_config(settings), server=parse_server(args.server))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    length = args.window or settings.window.length
    step = args.step or settings.window.step

    async def go() -> Any:
        try:
            return await run_review(
                source,
                start=start,
                end=end,
                length=length,
                step=step,
                resolution=args.resolution,
                config=config,
                spike_factor=args.spike_factor,
                rules=rules,
                effects=not args.no_effects,
            )
        finally:
            await source.aclose()

    try:
        review = asyncio.run(go())
    except PrometheusError as exc:
        print(f"prometheus error: {exc}", file=sys.stderr)
        return 1
    if args.html:
        try:
            written = _write_html(args.html, review, source, config, length, step)
        except OSError as exc:
            print(f"error: cannot write {args.html}: {exc}", file=sys.stderr)
            return 2
        if not (args.json or args.markdown):  # the file was asked for, not the text too
            print(written)
            return 0
    if args.json:
        print(to_json(review, with_diagnoses=args.diagnoses))
    else:
        print(to_markdown(review))
    return 0
