"""Open-loop load generator for a vLLM (OpenAI-compatible) server: Poisson arrivals.

Requests arrive at ``--rate`` per second (exponential gaps) for ``--duration`` seconds,
each a streaming ``/v1/completions`` request (``"stream": true``, ``ignore_eos``,
``max_tokens`` = the drawn output length) whose prompt is N words from a small word list
(the tiny tokenizer of tests/vllm_real/build_model.py makes about one token of each, so
the prompt's token count follows N roughly). Lengths come from one class
(``--prompt-words 80 --output-tokens 64``) or a mix of classes given as repeated
``--class WEIGHT:PROMPT_WORDS:OUTPUT_TOKENS`` (``--class 8:80:64 --class 2:400:256``: 80 %
short, 20 % long).

A phased load (``--phase SECONDS:RATE``, repeated) changes the rate at set offsets:
``--phase 60:8 --phase 90:21 --phase 150:7`` sends 8 req/s for 60 s, then 21 req/s for
90 s (a surge), then 7 req/s for 150 s; ``--duration`` is then their sum (given or not)
and ``--rate`` is ignored. Each phase draws its own Poisson arrivals from the same seeded
generator, so the schedule is as reproducible as a single rate's.

Open loop: the whole schedule (arrival times, classes, prompts) is drawn up front from one
``random.Random(seed)``, so two runs with the same seed and spec send the same requests at
the same offsets, whatever the server does. An arrival that finds ``--max-in-flight``
requests already in flight is *dropped* (counted and logged), never delayed. Requests
scheduled in the first ``--warmup`` seconds are logged with ``"warmup": true`` and left out
of the summary; ``--duration`` is the steady part after them.
After ``--duration`` the requests still in flight get ``--drain`` seconds to finish, then
are cancelled (logged as ``cancelled``, counted as failed).

The log (``--log FILE``) has one JSON object per request, written as each one ends:
``i`` (arrival index), ``class``, ``at`` (scheduled offset from the start, s), ``send``
(Unix time it was sent, or dropped), ``warmup``, ``prompt_words``, ``max_tokens``,
``outcome`` (``ok``, ``http_error``, ``error``, ``cancelled``, ``dropped``), ``status``
(HTTP status or null), ``ttft`` (first content chunk minus send, s), ``gaps`` (seconds
between successive content chunks, to 0.1 ms), ``total`` (send to end of stream, s),
``chunks`` (content chunks), ``tokens`` and ``prompt_tokens`` (the server's ``usage``),
``error``; a dropped arrival has ``in_flight`` instead of the timings. Client times
include the client's own delays: ``send`` minus ``at`` shows how late a request left.

The last line printed is the summary of the steady part (one line, wrapped here;
``late_max``: the latest a request left after its scheduled time)::

    loadgen: 180 s at 11.00 req/s seed 1: sent=2098 ok=2098 failed=0 dropped=0
        ttft_p50=0.061s ttft_p99=0.922s gap_mean=0.0020s late_max=0.004s

Reproduce (any server; the model name defaults to the first of ``/v1/models``)::

    python bench/loadgen.py http://127.0.0.1:8000 --rate 11 --duration 60 --seed 1 \\
        --class 8:80:128 --class 2:320:512 --max-in-flight 64 --log /tmp/load.jsonl

tests/vllm_real/record.py runs it while saving the server's pages (a recording), and
tests/vllm_real/make_recordings.sh runs that against a real vLLM.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

import httpx

__all__ = [
    "Arrival",
    "LoadSpec",
    "RequestClass",
    "Summary",
    "WORDS",
    "parse_class",
    "parse_phase",
    "run_load",
    "schedule",
    "summarise",
]

# Words of the tiny model's tokenizer corpus (tests/vllm_real/build_model.py): each one is
# a single BPE token there, so N words make about N prompt tokens.
# fmt: off
WORDS = (
    "the", "a", "of", "to", "and", "in", "is", "it", "that", "for", "on", "with", "as", "was",
    "at", "by", "an", "be", "this", "from", "or", "are", "cache", "token", "prefill", "decode",
    "batch", "queue", "engine", "request", "stream", "latency", "metric", "server", "model",
    "block", "memory", "window", "spike", "alert", "prompt", "output", "step", "page",
    "scrape", "value", "time",
)
# fmt: on


@dataclass(frozen=True)
class RequestClass:
    """One kind of request: its share of arrivals and its lengths."""

    weight: float
    prompt_words: int
    output_tokens: int


@dataclass(frozen=True)
class LoadSpec:
    """What to send: the rate, how long, which lengths, the seed and the in-flight cap."""

    rate: float
    duration: float
    classes: tuple[RequestClass, ...]
    seed: int = 1
    max_in_flight: int = 256
    warmup: float = 0.0
    # (seconds, rate) pieces: the rate changes at their boundaries; empty: ``rate`` throughout
    phases: tuple[tuple[float, float], ...] = ()

    def rate_at(self, t: float) -> float:
        """The scheduled arrival rate at offset ``t`` (s)."""
        if not self.phases:
            return self.rate
        edge = 0.0
        for seconds, rate in self.phases:
            edge += seconds
            if t < edge:
                return rate
        return 0.0

    def describe(self) -> dict[str, Any]:
        """The spec as JSON-ready values (for a recording's meta.json)."""
        return asdict(self)


@dataclass(frozen=True)
class Arrival:
    """One scheduled request: its index, offset from the start (s), class and body."""

    index: int
    at: float
    cls: int
    prompt: str
    prompt_words: int
    max_tokens: int


def parse_class(text: str) -> RequestClass:
    """``WEIGHT:PROMPT_WORDS:OUTPUT_TOKENS`` → a class; ValueError when malformed."""
    parts = text.split(":")
    if len(parts) != 3:
        raise ValueError(f"class {text!r}: want WEIGHT:PROMPT_WORDS:OUTPUT_TOKENS")
    weight, words, tokens = float(parts[0]), int(parts[1]), int(parts[2])
    if not (weight > 0 and words >= 1 and tokens >= 1):
        raise ValueError(f"class {text!r}: weight > 0, prompt words and output tokens >= 1")
    return RequestClass(weight, words, tokens)


def parse_phase(text: str) -> tuple[float, float]:
    """``SECONDS:RATE`` → (seconds, rate); ValueError when malformed."""
    parts = text.split(":")
    if len(parts) != 2:
        raise ValueError(f"phase {text!r}: want SECONDS:RATE")
    seconds, rate = float(parts[0]), float(parts[1])
    if not (seconds > 0 and rate >= 0):
        raise ValueError(f"phase {text!r}: seconds > 0 and rate >= 0")
    return seconds, rate


def schedule(spec: LoadSpec) -> list[Arrival]:
    """Every arrival of a run, from ``random.Random(spec.seed)`` only (same seed, same list).

    Per arrival, in this order: the exponential gap, the class, then the prompt's words.
    A zero rate or duration gives no arrivals.
    """
    rng = random.Random(spec.seed)
    weights = [c.weight for c in spec.classes]
    out: list[Arrival] = []
    pieces = spec.phases or ((spec.duration, spec.rate),)
    begin = 0.0
    for seconds, rate in pieces:
        end = min(begin + seconds, spec.duration)
        t = begin
        while rate > 0:
            t += rng.expovariate(rate)  # memoryless: a phase may start its gaps afresh
            if t >= end:
                break
            k = rng.choices(range(len(spec.classes)), weights)[0]
            c = spec.classes[k]
            prompt = " ".join(rng.choice(WORDS) for _ in range(c.prompt_words))
            out.append(Arrival(len(out), t, k, prompt, c.prompt_words, c.output_tokens))
        begin += seconds
    return out


@dataclass
class Summary:
    """Counts and client-side latencies over the steady part of a run."""

    spec: LoadSpec
    start: float = 0.0  # Unix time of offset 0 (the schedule's origin)
    end: float = 0.0  # Unix time the last request ended (or was cancelled)
    sent: int = 0
    ok: int = 0
    failed: int = 0
    dropped: int = 0
    ttfts: list[float] = field(default_factory=list)
    gap_sum: float = 0.0
    gap_n: int = 0
    late_max: float = 0.0  # the latest a request was sent after its scheduled time, s

    def add(self, rec: dict[str, Any]) -> None:
        if rec.get("warmup"):
            return
        self.late_max = max(self.late_max, rec["send"] - self.start - rec["at"])
        if rec["outcome"] == "dropped":
            self.dropped += 1
            return
        self.sent += 1
        if rec["outcome"] == "ok":
            self.ok += 1
            if rec["ttft"] is not None:
                self.ttfts.append(rec["ttft"])
            self.gap_sum += sum(rec["gaps"])
            self.gap_n += len(rec["gaps"])
        else:
            self.failed += 1

    def line(self) -> str:
        s = self.spec
        steady = s.duration - s.warmup
        if s.phases:
            rates = " then ".join(f"{r:.2f} req/s for {d:g} s" for d, r in s.phases)
            head = f"loadgen: {steady:g} s at {rates} seed {s.seed}"
        else:
            head = f"loadgen: {steady:g} s at {s.rate:.2f} req/s seed {s.seed}"
        return (
            f"{head}: sent={self.sent} "
            f"ok={self.ok} failed={self.failed} dropped={self.dropped} "
            f"ttft_p50={_fmt(_quantile(self.ttfts, 0.5))} "
            f"ttft_p99={_fmt(_quantile(self.ttfts, 0.99))} "
            f"gap_mean={_fmt(self.gap_sum / self.gap_n if self.gap_n else None, 4)} "
            f"late_max={self.late_max:.3f}s"
        )


def _quantile(xs: Sequence[float], q: float) -> float | None:
    """Linear-interpolated quantile of a sample; None when it is empty."""
    if not xs:
        return None
    ys = sorted(xs)
    pos = q * (len(ys) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ys) - 1)
    return ys[lo] + (ys[hi] - ys[lo]) * (pos - lo)


def _fmt(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}s"


def summarise(records: Sequence[dict[str, Any]], spec: LoadSpec, start: float) -> Summary:
    """The summary of logged records (e.g. a load.jsonl read back; ``start``: the Unix time
    of offset 0, a recording's ``meta.json`` ``start``)."""
    summary = Summary(spec, start=start)
    for rec in records:
        summary.add(rec)
    return summary


async def _sse_data(resp: httpx.Response) -> AsyncIterator[tuple[float, bytes]]:
    """The ``data:`` payloads of a server-sent event stream, each with the time the read that
    brought it returned (``perf_counter``): events that came in one read share a time."""
    buf = b""
    async for piece in resp.aiter_bytes():
        now = time.perf_counter()
        *lines, buf = (buf + piece).split(b"\n")
        for line in lines:
            if line.startswith(b"data:"):
                yield now, line[5:].strip()


async def _one(
    client: httpx.AsyncClient,
    base: str,
    model: str,
    arr: Arrival,
    warmup: float,
    emit: Callable[[dict[str, Any]], None],
) -> None:
    """Send one streaming completion, time its chunks and ``emit`` its record (also when
    cancelled); errors are recorded, never raised."""
    body = {
        "model": model,
        "prompt": arr.prompt,
        "max_tokens": arr.max_tokens,
        "temperature": 0.0,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    send = time.time()
    rec: dict[str, Any] = {
        "i": arr.index,
        "class": arr.cls,
        "at": round(arr.at, 4),
        "send": round(send, 4),
        "warmup": arr.at < warmup,
        "prompt_words": arr.prompt_words,
        "max_tokens": arr.max_tokens,
        "outcome": "error",
        "status": None,
        "ttft": None,
        "gaps": [],
        "total": None,
        "chunks": 0,
        "tokens": None,
        "prompt_tokens": None,
        "error": None,
    }
    start = time.perf_counter()
    last: float | None = None
    gaps: list[float] = []
    try:
        async with client.stream("POST", f"{base}/v1/completions", json=body) as resp:
            rec["status"] = resp.status_code
            if resp.status_code != 200:
                rec["outcome"] = "http_error"
                rec["error"] = (await resp.aread()).decode(errors="replace")[:300]
                return
            done = False
            async for now, data in _sse_data(resp):
                if data == b"[DONE]":
                    done = True
                    break
                chunk = json.loads(data)
                usage = chunk.get("usage")
                if usage:
                    rec["tokens"] = usage.get("completion_tokens")
                    rec["prompt_tokens"] = usage.get("prompt_tokens")
                if any(ch.get("text") for ch in chunk.get("choices") or ()):
                    if last is None:
                        rec["ttft"] = round(now - start, 5)
                    else:
                        gaps.append(round(now - last, 4))
                    last = now
                    rec["chunks"] += 1
            rec["outcome"] = "ok" if done else "error"
            if not done:
                rec["error"] = "stream ended without [DONE]"
    except asyncio.CancelledError:
        rec["outcome"] = "cancelled"
        raise
    except (httpx.HTTPError, ValueError) as exc:
        rec["outcome"] = "error"
        rec["error"] = f"{type(exc).__name__}: {exc}"[:300]
    finally:
        rec["gaps"] = gaps
        rec["total"] = round(time.perf_counter() - start, 5)
        emit(rec)


async def first_model(client: httpx.AsyncClient, base: str) -> str:
    """The id of the first model the server lists at ``/v1/models``."""
    resp = await client.get(f"{base}/v1/models", timeout=10.0)
    resp.raise_for_status()
    return str(resp.json()["data"][0]["id"])


async def run_load(
    base: str,
    spec: LoadSpec,
    *,
    model: str | None = None,
    log: TextIO | None = None,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    drain: float = 60.0,
    timeout: float = 600.0,
) -> Summary:
    """Send ``spec``'s schedule to ``base`` open loop; log each request; the summary.

    Each record goes to ``log`` (one JSON line, flushed) and ``on_record`` as it ends.
    """
    base = base.rstrip("/")
    arrivals = schedule(spec)
    summary = Summary(spec)
    # Idle connections expire before uvicorn's 5 s keep-alive timeout closes them, so a
    # request never goes out on a connection the server is closing.
    limits = httpx.Limits(
        max_connections=spec.max_in_flight + 4, max_keepalive_connections=32, keepalive_expiry=2.0
    )
    async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(timeout)) as client:
        model = model or await first_model(client, base)

        def emit(rec: dict[str, Any]) -> None:
            summary.add(rec)
            if log is not None:
                log.write(json.dumps(rec, separators=(",", ":")) + "\n")
                log.flush()
            if on_record is not None:
                on_record(rec)

        tasks: set[asyncio.Task[None]] = set()

        summary.start = time.time()
        m0 = time.perf_counter()
        for arr in arrivals:
            delay = m0 + arr.at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            if len(tasks) >= spec.max_in_flight:
                now = time.time()
                emit(
                    {
                        "i": arr.index,
                        "class": arr.cls,
                        "at": round(arr.at, 4),
                        "send": round(now, 4),
                        "warmup": arr.at < spec.warmup,
                        "prompt_words": arr.prompt_words,
                        "max_tokens": arr.max_tokens,
                        "outcome": "dropped",
                        "in_flight": len(tasks),
                    }
                )
                continue
            task = asyncio.create_task(_one(client, base, model, arr, spec.warmup, emit))
            task.add_done_callback(tasks.discard)
            tasks.add(task)
        rest = m0 + spec.duration - time.perf_counter()
        if rest > 0:
            await asyncio.sleep(rest)
        if tasks:
            await asyncio.wait(set(tasks), timeout=drain)
        pending = list(tasks)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    summary.end = time.time()
    return summary


def spec_from_args(args: argparse.Namespace) -> LoadSpec:
    """The load spec of the CLI options (``--class`` wins over the single-class pair)."""
    if args.classes:
        classes = tuple(parse_class(c) for c in args.classes)
    else:
        classes = (RequestClass(1.0, args.prompt_words, args.output_tokens),)
    phases = tuple(parse_phase(p) for p in getattr(args, "phases", None) or ())
    if phases:
        return LoadSpec(
            rate=max(r for _, r in phases),
            duration=sum(d for d, _ in phases),
            classes=classes,
            seed=args.seed,
            max_in_flight=args.max_in_flight,
            warmup=args.warmup,
            phases=phases,
        )
    if args.rate is None or args.duration is None:
        raise ValueError("--rate and --duration are required without --phase")
    return LoadSpec(
        rate=args.rate,
        duration=args.warmup + args.duration,
        classes=classes,
        seed=args.seed,
        max_in_flight=args.max_in_flight,
        warmup=args.warmup,
    )


def add_load_options(p: argparse.ArgumentParser) -> None:
    """The load options, shared with tests/vllm_real/record.py."""
    p.add_argument("--rate", type=float, help="arrivals per second (without --phase)")
    p.add_argument("--duration", type=float, help="steady part, s (without --phase)")
    p.add_argument(
        "--phase",
        dest="phases",
        action="append",
        metavar="SECONDS:RATE",
        help="a piece of a phased load (repeatable, in order; replaces --rate/--duration)",
    )
    p.add_argument("--warmup", type=float, default=0.0, help="warm-up before it, s")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--prompt-words", type=int, default=80)
    p.add_argument("--output-tokens", type=int, default=64)
    p.add_argument(
        "--class",
        dest="classes",
        action="append",
        metavar="W:PROMPT_WORDS:OUTPUT_TOKENS",
        help="a class of a mix (repeatable; replaces --prompt-words/--output-tokens)",
    )
    p.add_argument("--max-in-flight", type=int, default=256)
    p.add_argument("--model", help="model name (default: the first of /v1/models)")
    p.add_argument("--drain", type=float, default=60.0, help="wait for in-flight, s")
    p.add_argument("--timeout", type=float, default=600.0, help="per request, s")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("base", help="server base URL, e.g. http://127.0.0.1:8000")
    add_load_options(p)
    p.add_argument("--log", type=Path, help="per-request JSON lines")
    args = p.parse_args(argv)
    try:
        spec = spec_from_args(args)
    except ValueError as exc:
        p.error(str(exc))
    log = args.log.open("w") if args.log else None
    try:
        summary = asyncio.run(
            run_load(
                args.base,
                spec,
                model=args.model,
                log=log,
                drain=args.drain,
                timeout=args.timeout,
            )
        )
    except httpx.HTTPError as exc:  # the server's model list could not be read
        print(f"loadgen: {args.base}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    finally:
        if log is not None:
            log.close()
    print(summary.line())
    return 0 if summary.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
