"""The what-if twin's fit check on simulator pairs: fit on a run with setting A, predict B,
compare with the simulator's own run at B.

**What this checks**: the fitting — lengths from coarse histograms, the arrival timeline,
the step-time roofline from window means, the engine settings — not the twin's truth on
a real server. The twin runs the simulator's scheduling engine, so a pair here cannot
show where vLLM's scheduler and the simulator's differ; only real vLLM pairs can
(``bench/whatif_vllm.py``). What the twin does *not* share with the simulator is its step
time: the simulator prices a step with the roofline of a device and a model (compute,
memory, overlap), the twin with the line it fitted from the recording's windows.

For every pair: record A (``--duration`` s of a shipped scenario, its ``load`` turned into
the absolute rate it stands for, so that an engine change does not move the traffic),
fit the twin on A's recording as ``phasewatch whatif`` does (tiles of 30 s; the server
settings a user would give with ``--server``: ``max_num_seqs``,
``max_num_batched_tokens``, ``max_model_len``), predict B, record B three times (other seeds)
and compare TTFT p99 and ITL p99 with the median of the three (each by
``histogram_quantile`` over the whole run, as the service computes a window): one run's
p99 rests on its slowest 1 % of requests and scatters by itself. A is recorded three
times too: the twin is fitted on the first (a user has one recording), the measured
change is the median of B's over the median of A's.

* **relative error** ``|predicted − measured| / measured`` of B;
* **direction**: the twin's predicted effect — its prediction over its own replay of A
  (``effect`` in the JSON) — has the sign of the measured change from A to B; a measured
  change under 5 % counts as flat, and then a predicted effect under 10 % is right;
* **in interval**: the measured B lies in the predicted interval.

Target (issue: what-if, part 1): median relative error of TTFT p99 and of ITL p99
≤ 15 %, direction right in every pair.

Reproduce: ``.venv/bin/python bench/whatif.py [--duration 300] [--jobs 2] [--only KEY]``
(progress on stderr, the table on stdout; about 5 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import copy
import math
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.diagnose.server import ServerSettings  # noqa: E402
from app.read.whatif import from_scrapes  # noqa: E402
from app.sim.record import record  # noqa: E402
from app.sim.scenario import from_tree, read_tree  # noqa: E402
from app.sources.recording import read_scrapes  # noqa: E402
from app.twin.fit import fit  # noqa: E402
from app.twin.whatif import knobs_for, measured, predict  # noqa: E402

TRUTH_RUNS = 3


@dataclass(frozen=True)
class Pair:
    key: str
    value: float
    scenario: str
    # How B's scenario differs from A's, as a function of A's tree (see _b_tree).
    label: str


PAIRS: tuple[Pair, ...] = (
    Pair("rate_scale", 1.5, "healthy", "traffic ×1.5"),
    Pair("rate_scale", 2.0, "healthy", "traffic ×2"),
    Pair("rate_scale", 0.7, "decode_heavy", "traffic ×0.7"),
    Pair("rate_scale", 1.3, "decode_heavy", "traffic ×1.3"),
    Pair("rate_scale", 0.6, "queue_overload", "traffic ×0.6"),
    Pair("replicas", 2, "healthy", "2 replicas"),
    Pair("replicas", 2, "queue_overload", "2 replicas"),
    Pair("replicas", 3, "queue_overload", "3 replicas"),
    Pair("replicas", 2, "decode_heavy", "2 replicas"),
    Pair("replicas", 2, "kv_pressure", "2 replicas"),
    Pair("max_num_seqs", 64, "queue_overload", "32 → 64"),
    Pair("max_num_seqs", 16, "queue_overload", "32 → 16"),
    Pair("max_num_seqs", 24, "healthy", "256 → 24"),
    Pair("max_num_seqs", 8, "prefill_heavy", "4 → 8"),
    Pair("max_num_seqs", 48, "decode_heavy", "→ 48"),
    Pair("max_num_batched_tokens", 2048, "prefill_interference", "8192 → 2048"),
    Pair("max_num_batched_tokens", 4096, "prefill_interference", "8192 → 4096"),
    Pair("max_num_batched_tokens", 512, "healthy", "2048 → 512"),
    Pair("max_num_batched_tokens", 8192, "decode_heavy", "2048 → 8192"),
    Pair("max_num_batched_tokens", 1024, "queue_overload", "2048 → 1024"),
    Pair("num_gpu_blocks", 2.0, "kv_pressure", "pool ×2"),
    Pair("num_gpu_blocks", 4.0, "kv_pressure", "pool ×4"),
    Pair("num_gpu_blocks", 0.75, "kv_pressure", "pool ×0.75"),
    Pair("num_gpu_blocks", 0.5, "decode_heavy", "pool ×0.5"),
    Pair("num_gpu_blocks", 0.05, "healthy", "pool ×0.05"),
    Pair("prompt_scale", 2.0, "healthy", "prompts ×2"),
    Pair("prompt_scale", 0.5, "healthy", "prompts ×0.5"),
    Pair("prompt_scale", 1.5, "decode_heavy", "prompts ×1.5"),
    Pair("prompt_scale", 0.5, "prefill_heavy", "prompts ×0.5"),
    Pair("prompt_scale", 2.0, "queue_overload", "prompts ×2"),
    Pair("output_scale", 2.0, "healthy", "answers ×2"),
    Pair("output_scale", 0.5, "healthy", "answers ×0.5"),
    Pair("output_scale", 0.5, "decode_heavy", "answers ×0.5"),
    Pair("output_scale", 0.5, "queue_overload", "answers ×0.5"),
    Pair("output_scale", 0.5, "kv_pressure", "answers ×0.5"),
    Pair("prefix_cache_hit_rate", 0.0, "healthy", "reuse 100 % → 0 %"),
    Pair("prefix_cache_hit_rate", 0.5, "healthy", "reuse 100 % → 50 %"),
    Pair("prefix_cache_hit_rate", 0.0, "queue_overload", "reuse 100 % → 0 %"),
    Pair("prefix_cache_hit_rate", 0.3, "prefix_cache_collapse", "reuse 100 % → 30 %"),
    Pair("prefix_cache_hit_rate", 0.06, "prefix_cache_collapse", "reuse 100 % → 6 %"),
)


def _a_tree(name: str) -> dict[str, Any]:
    """The scenario's base phase, its load turned into the absolute rate."""
    tree = read_tree(name)
    tree.pop("phases", None)
    tree["name"] = name
    base = from_tree(tree).base
    wl = tree.setdefault("workload", {})
    wl.pop("load", None)
    wl["rate"] = base.workload.rate
    return tree


def _b_tree(pair: Pair, a: dict[str, Any]) -> dict[str, Any]:
    b = copy.deepcopy(a)
    wl, eng = b["workload"], b.setdefault("engine", {})
    v = pair.value
    if pair.key == "rate_scale":
        wl["rate"] *= v
    elif pair.key == "replicas":
        wl["rate"] /= v
    elif pair.key in ("max_num_seqs", "max_num_batched_tokens"):
        eng[pair.key] = int(v)
    elif pair.key == "num_gpu_blocks":
        blocks = from_tree(a).base.num_gpu_blocks
        eng["num_gpu_blocks_override"] = max(1, int(blocks * v))
        eng["max_model_len"] = min(eng.get("max_model_len", 8192), int(blocks * v) * 16)
    elif pair.key in ("prompt_scale", "output_scale"):
        field = "prompt_tokens" if pair.key == "prompt_scale" else "output_tokens"
        for c in wl["classes"]:
            c[field]["median"] = c[field]["median"] * v
    elif pair.key == "prefix_cache_hit_rate":
        wl["prefix_reuse"] = v  # the same prompts, fewer of them reusable
    return b


def _server(tree: dict[str, Any]) -> ServerSettings:
    e = from_tree(tree).base.engine
    return ServerSettings(
        max_num_seqs=e.max_num_seqs,
        max_num_batched_tokens=e.max_num_batched_tokens,
        max_model_len=e.max_model_len,
    )


def _value(pair: Pair, a: dict[str, Any], b_span: Any) -> float | int:
    """The ``--set`` value a user would give for B."""
    if pair.key == "num_gpu_blocks":
        return max(1, int(from_tree(a).base.num_gpu_blocks * pair.value))
    if pair.key == "prefix_cache_hit_rate":
        hit = b_span.whole.derived.prefix_cache_hit_rate or 0.0
        return round(min(hit, 0.99), 3)
    if pair.key in ("max_num_seqs", "max_num_batched_tokens", "replicas"):
        return int(pair.value)
    return pair.value


def run_pair(args: tuple[int, Pair, float]) -> dict[str, Any]:
    i, pair, duration = args
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        a = _a_tree(pair.scenario)
        b = _b_tree(pair, a)
        spans_a = []
        for k in range(TRUTH_RUNS):  # the twin fits the first; A's figure: the median
            ra = record(from_tree(a), Path(tmp) / f"a{k}", duration=duration, seed=7 + i + 1000 * k)
            spans_a.append(from_scrapes(read_scrapes(ra), server=_server(a)))
        span_a = spans_a[0]
        spans_b = []
        for k in range(TRUTH_RUNS):  # B's own spread: the median of three seeds
            rb = record(from_tree(b), Path(tmp) / f"b{k}", duration=duration, seed=7 + i + 1000 * k)
            spans_b.append(from_scrapes(read_scrapes(rb), server=_server(a)))
        span_b = spans_b[0]
    twin = fit(span_a)
    value = _value(pair, a, span_b)
    changes = {pair.key: value}
    knobs, notes = knobs_for(twin, changes)
    w = predict(twin, span_a.whole, changes, knobs, notes=notes)
    bases = [measured(sa.whole) for sa in spans_a]
    truths = [measured(sb.whole) for sb in spans_b]
    out: dict[str, Any] = {
        "pair": pair,
        "value": value,
        "replay_error": w.replay_error,
        "seconds": time.perf_counter() - t0,
    }
    for name in ("ttft_p99", "itl_p99"):
        bs = [v for t in truths if (v := t.value(name)) is not None]
        b_v = statistics.median(bs) if bs else None
        avs = [v for t in bases if (v := t.value(name)) is not None]
        a_v = statistics.median(avs) if avs else None
        p_v = w.predicted.value(name)
        lo_hi = w.interval.get(name)
        out[name] = (a_v, b_v, p_v, lo_hi, w.effect.get(name))
    return out


def _direction(a: float | None, b: float | None, effect: float | None) -> bool | None:
    """The twin's predicted effect (predicted ÷ its own replay of A) against the measured
    change B ÷ A."""
    if a is None or b is None or effect is None or a <= 0:
        return None
    mb, mp = (b - a) / a, effect - 1.0
    if abs(mb) < 0.05:
        return abs(mp) < 0.10 or mb * mp > 0
    return mb * mp > 0


def _fmt(v: float | None) -> str:
    if v is None or not math.isfinite(v):
        return "n/a"
    return f"{v:.3g}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=300.0, help="seconds per run (300)")
    ap.add_argument("--jobs", type=int, default=2, help="pairs run at once (2)")
    ap.add_argument("--only", help="only the pairs of one KEY")
    args = ap.parse_args()
    pairs = [p for p in PAIRS if args.only in (None, p.key)]
    work = [(i, p, args.duration) for i, p in enumerate(pairs)]
    rows = []
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for n, r in enumerate(pool.map(run_pair, work), 1):
            rows.append(r)
            p = r["pair"]
            elapsed = time.perf_counter() - t0
            print(
                f"[{elapsed:6.1f} s] {n}/{len(work)} {p.key} {p.scenario} {p.label}",
                file=sys.stderr,
                flush=True,
            )
    print("fit check on simulator pairs (checks the fitting, not the twin's truth on vLLM)")
    print(
        f"runs of {args.duration:g} s; err: relative error of B's predicted p99; "
        "dir: direction of the change; in: B inside the predicted interval"
    )
    print()
    head = (
        f"{'KEY':<22} {'scenario':<22} {'change':<28} {'TTFT p99 A→B (pred)':<28} "
        f"{'err':>5} {'dir':>3} {'in':>3}  {'ITL p99 A→B (pred)':<28} {'err':>5} {'dir':>3} "
        f"{'in':>3} {'replay':>6}"
    )
    print(head)
    errs: dict[str, list[float]] = {"ttft_p99": [], "itl_p99": []}
    dirs: list[bool] = []
    inside: list[bool] = []
    per_key: dict[str, list[float]] = {}
    for r in rows:
        p = r["pair"]
        cells = []
        for name in ("ttft_p99", "itl_p99"):
            a_v, b_v, p_v, lo_hi, effect = r[name]
            err = None if b_v is None or p_v is None or b_v <= 0 else abs(p_v - b_v) / b_v
            d = _direction(a_v, b_v, effect)
            hit = None if lo_hi is None or b_v is None else lo_hi[0] <= b_v <= lo_hi[1]
            if err is not None:
                errs[name].append(err)
                per_key.setdefault(p.key, []).append(err)
            if d is not None:
                dirs.append(d)
            if hit is not None:
                inside.append(hit)
            cells.append(
                f"{_fmt(a_v) + ' → ' + _fmt(b_v) + ' (' + _fmt(p_v) + ')':<28} "
                f"{'n/a' if err is None else f'{err:.0%}':>5} "
                f"{'' if d is None else ('ok' if d else 'NO'):>3} "
                f"{'' if hit is None else ('y' if hit else 'n'):>3}"
            )
        rep = r["replay_error"]
        print(
            f"{p.key:<22} {p.scenario:<22} {p.label + ' (' + str(r['value']) + ')':<28} "
            f"{cells[0]}  {cells[1]} {'n/a' if rep is None else f'{rep:.0%}':>6}"
        )
    print()
    for key, es in per_key.items():
        print(f"median_rel_error[{key}]: {statistics.median(es):.3f}")
    for name, es in errs.items():
        print(f"median_rel_error_{name}: {statistics.median(es):.3f}" if es else f"{name}: n/a")
    print(f"direction_right: {sum(dirs)}/{len(dirs)}")
    print(f"interval_holds: {sum(inside)}/{len(inside)}")
    print(f"pairs: {len(rows)}; wall_s: {time.perf_counter() - t0:.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
