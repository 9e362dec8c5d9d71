"""Probe a real, idle vLLM server and check what a client sees against what it reports.

Run with the project's Python against a server started by ``run.sh`` (which serves with
``--enable-per-request-metrics``), before any other load::

    python tests/vllm_real/probe_check.py http://127.0.0.1:PORT MODEL

1. Read the page's TTFT histogram.
2. Send ``--probes`` probes of each OpenAI kind (``openai_completions``,
   ``openai_chat``) one after the other, through the service's own probe source
   (``app.sources.probe``), 16 tokens each (``ignore_eos``).
3. Read the page again, then probe twice more through the source's rounds, so the
   probes' own streams are stored and diagnosed. Fail unless every probe answered whole
   with its 16 tokens and vLLM's per-request timings; each probe's client TTFT is at
   least the server's own TTFT for the same request (queue + its time to first token);
   the page counted exactly the probes' first tokens meanwhile, and the probes' mean
   TTFT is at least the page's (vLLM times a request from its arrival in the API
   server); the probes' windows are diagnosed (not ``insufficient_data``).

Exit status 0 on success, 1 with the reason on failure.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

import httpx

from app.diagnose import diagnose
from app.model import Histogram
from app.probeconfig import ProbeConfig, ProbingConfig
from app.scrape.client import fetch
from app.sources.probe import ProbeSource
from app.sources.process import PageFeed
from app.store.sqlite import Store
from app.windows.aggregate import window

KINDS = ("openai_completions", "openai_chat")
TOKENS = 16


async def page_ttft(url: str, model: str) -> Histogram:
    async with httpx.AsyncClient() as client:
        result = await fetch(client, url, timeout=10.0, max_bytes=50_000_000)
    snap = PageFeed("vllm", url)(time.time(), result).snapshot
    if snap is None or model not in snap.streams or "ttft" not in snap.streams[model].histograms:
        raise SystemExit(f"FAIL: the page has no TTFT histogram for {model!r}")
    return snap.streams[model].histograms["ttft"]


def fail(msg: str) -> int:
    print(f"FAIL: {msg}", file=sys.stderr)
    return 1


async def main_async(args: argparse.Namespace) -> int:
    base = args.base.rstrip("/")
    probes = [
        ProbeConfig(
            name=f"probe-{kind}",
            kind=kind,
            url=base,
            model=args.model,
            max_tokens=TOKENS,
            ignore_eos=True,
            interval=60,
            timeout=60,
        )
        for kind in KINDS
    ]
    store = Store(":memory:")
    source = ProbeSource(probes, ProbingConfig(concurrency=1), store, max_bytes=10_000_000)
    before = await page_ttft(f"{base}/metrics", args.model)
    t0 = time.time()
    answers = []
    try:
        for p in probes:
            for _ in range(args.probes):
                answers.append((p.name, await source.probe(p.name)))
        after = await page_ttft(f"{base}/metrics", args.model)
        for _ in range(2):  # the probes' own streams, stored and diagnosed below
            await source.run_once(timeout=120)
    finally:
        await source.aclose()
    t1 = time.time()

    for name, r in answers:
        s = r.server
        print(
            f"{name}: ok={r.ok} tokens={r.tokens} connect={r.connect} ttfb={r.ttfb} "
            f"ttft={r.ttft} server_ttft={None if s is None else s.ttft} "
            f"decode_tok_s={r.decode_tokens_per_s}"
        )
        if not r.ok:
            return fail(f"{name} failed: {r.error_kind}: {r.error}")
        if r.tokens != TOKENS:
            return fail(f"{name} answered {r.tokens} tokens, not {TOKENS}")
        if s is None or s.ttft is None or r.ttft is None:
            return fail(f"{name}: no per-request metrics (is --enable-per-request-metrics on?)")
        if r.ttft < s.ttft:
            return fail(f"{name}: client TTFT {r.ttft:.4f} s < the server's {s.ttft:.4f} s")
    sent = len(answers)
    counted = after.count - before.count
    if counted != sent:
        return fail(f"the page counted {counted:.0f} first tokens, the probes sent {sent}")
    page_mean = (after.sum - before.sum) / counted
    client_mean = sum(r.ttft or 0.0 for _, r in answers) / len(answers)
    print(f"page TTFT mean {page_mean:.4f} s, probes' client TTFT mean {client_mean:.4f} s")
    if client_mean < page_mean:
        return fail("the probes' TTFT is below the page's TTFT for the same requests")
    for p in probes:
        deltas = store.intervals(p.name, p.model, t0 - 1, t1 + 1)
        w = window(deltas, start=t0 - 1, end=t1 + 1, target=p.name, model_name=p.model)
        d = diagnose(w)
        print(f"{p.name}: {d.label}: {d.summary}")
        if d.cls.value == "insufficient_data":
            return fail(f"{p.name}'s window is insufficient_data: {d.summary}")
    store.close()
    print("OK: every probe answered; client TTFT >= the server's own for each request")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("base", help="vLLM base URL, e.g. http://127.0.0.1:8000")
    p.add_argument("model", help="served model name")
    p.add_argument("--probes", type=int, default=5, help="probes of each kind")
    return asyncio.run(main_async(p.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
