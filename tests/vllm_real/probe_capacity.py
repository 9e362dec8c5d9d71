"""How many requests per second a running vLLM serves of a load mix, measured today.

The pairs of record_pairs.sh size their loads as a share of this (A's capacity), so that a
pair means the same on a fast and on a slow machine: "A at 0.4 of capacity, B at 0.8" and
not "11 req/s", which queued a little on one day and overflowed on the next.

The probe sends the mix open loop at ``--rate``, well above what the server serves, for
``--warmup`` + ``--duration`` seconds (the queue fills during the warm-up, so every slot is
busy after it) and counts the requests that *ended* in the measured part: at saturation
that is the service rate. The requests still queued at the end are cancelled (vLLM aborts
them when their connection closes). Prints one JSON object and writes it to ``--out``::

    {"capacity_rps": 13.6, "completed": 408, "seconds": 30.0, "probe_rate": 25.0, ...}

Reproduce::

    python tests/vllm_real/probe_capacity.py http://127.0.0.1:8000 --rate 25 \\
        --class 8:80:128 --class 2:320:512 --warmup 15 --duration 30
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from loadgen import run_load, spec_from_args  # noqa: E402


def served_count(records: list[dict[str, Any]], start: float, warmup: float, end: float) -> int:
    """How many requests ended well (``ok``) between ``start + warmup`` and ``end``."""
    lo = start + warmup
    return sum(
        1
        for r in records
        if r.get("outcome") == "ok" and lo <= float(r["send"]) + float(r["total"]) <= end
    )


async def probe(args: argparse.Namespace) -> dict[str, Any]:
    spec = spec_from_args(args)
    records: list[dict[str, Any]] = []
    summary = await run_load(args.base, spec, model=args.model, on_record=records.append, drain=0.0)
    end = summary.start + spec.duration
    done = served_count(records, summary.start, spec.warmup, end)
    dropped = sum(1 for r in records if r.get("outcome") == "dropped")
    return {
        "capacity_rps": round(done / args.duration, 3),
        "completed": done,
        "seconds": args.duration,
        "probe_rate": args.rate,
        "warmup": args.warmup,
        "dropped": dropped,
        "classes": [c.__dict__ for c in spec.classes],
        "at": round(time.time(), 3),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("base", help="vLLM base URL, e.g. http://127.0.0.1:8000")
    p.add_argument("--rate", type=float, required=True, help="arrivals per second (overload)")
    p.add_argument("--class", dest="classes", action="append", default=[], metavar="W:P:O")
    p.add_argument("--warmup", type=float, default=15.0, help="the queue fills, s")
    p.add_argument("--duration", type=float, default=30.0, help="measured part, s")
    p.add_argument("--seed", type=int, default=2)
    p.add_argument("--max-in-flight", type=int, default=4096)
    p.add_argument("--prompt-words", type=int, default=80, help="one class (no --class)")
    p.add_argument("--output-tokens", type=int, default=64, help="one class (no --class)")
    p.add_argument("--model", help="model name (default: the first of /v1/models)")
    p.add_argument("--out", type=Path, help="write the JSON here too")
    args = p.parse_args()
    result = asyncio.run(probe(args))
    text = json.dumps(result)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    if result["completed"] == 0:
        print("probe: no request ended in the measured part", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
