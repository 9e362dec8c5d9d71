"""``phasewatch scrape-once URL_OR_FILE``: scrape one page and print its streams as JSON."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

import httpx

from app.model import Snapshot


def register(sub: Any) -> None:
    q: argparse.ArgumentParser = sub.add_parser(
        "scrape-once", help="scrape one URL or file and print the normalised streams"
    )
    q.add_argument("source", metavar="URL_OR_FILE", help="a /metrics URL or a saved page")
    q.add_argument("--json", action="store_true", help="print JSON (the default and only form)")
    q.add_argument("--timeout", type=float, default=10.0, help="fetch timeout, seconds")
    q.set_defaults(func=run_scrape_once)


def snapshot_summary(snap: Snapshot) -> dict[str, Any]:
    """The ``scrape-once --json`` object: one entry per model, engines folded."""
    streams = []
    for name in sorted(snap.streams):
        s = snap.streams[name]
        ttft = s.histograms.get("ttft")
        itl = s.histograms.get("itl")
        streams.append(
            {
                "model_name": name,
                "running": s.gauges.get("running"),
                "waiting": s.gauges.get("waiting"),
                "kv_usage": s.gauges.get("kv_usage"),
                "ttft_count": ttft.count if ttft else None,
                "itl_count": itl.count if itl else None,
                "missing": list(s.missing),
            }
        )
    return {
        "streams": streams,
        "metrics_disabled": snap.metrics_disabled,
        "engine_kind": snap.engine_kind,
        "parse_errors": snap.parse_errors,
    }


def run_scrape_once(args: argparse.Namespace) -> int:
    from app.scrape.client import fetch, read_file
    from app.scrape.normalize import normalize
    from app.scrape.parse import looks_like_prometheus, parse

    source: str = args.source
    cap = 50_000_000
    if source.startswith(("http://", "https://")):

        async def go() -> Any:
            async with httpx.AsyncClient() as client:
                return await fetch(client, source, timeout=args.timeout, max_bytes=cap)

        result = asyncio.run(go())
    else:
        result = read_file(source, max_bytes=cap)
    if not result.ok or result.text is None:
        print(f"error ({result.error_kind}): {result.error}", file=sys.stderr)
        return 1
    if not looks_like_prometheus(result.text):
        print("error (not_prometheus): the page is not Prometheus text format", file=sys.stderr)
        return 1
    snap = normalize(parse(result.text), target=source, ts=result.started)
    print(json.dumps(snapshot_summary(snap), indent=2))
    return 0
