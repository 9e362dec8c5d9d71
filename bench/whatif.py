"""The what-if twin's fit check on simulator pairs: fit on a run with setting A, predict B,
compare with the simulator's own run at B.

**What this checks**: the fitting — lengths from coarse histograms, the arrival timeline,
the step-time roofline from window means, the engine settings — not the twin's truth on
a real server. The twin runs the simulator's scheduling engine, so a pair here cannot
show where vLLM's scheduler and the simulator's differ; only real vLLM pairs can
(``bench/whatif_vllm.py``). What the twin does *not* share with the simulator is its step
time: the simulator prices a step with the roofline of a device and a model (compute,
memory, overlap), the twin with the line it fitted from the recording's windows.

The pairs (``bench/whatif_pairs.py``): the 40 the twin was developed on (``--pairs base``:
five per key, the scenarios' own rates, seeds from 7, ``--duration`` s) and 14 wide ones
(``--pairs wide``: other rates, seeds 9101–9231, 360–600 s, at least one per key whose
change moves a p99 by 10 % or more, among them issue #45's misses — a pressured KV pool
×1.5 and gpu_memory_utilization 0.6 → 0.8, traffic ×1.7, a decode-heavy budget cut to 512,
a chunk budget raised 256 → 2,048 on short chats and 800-token prompts).

For every pair: record A (a shipped scenario, its ``load`` turned into the absolute rate
it stands for — or the pair's own rate — so that an engine change does not move the
traffic), fit the twin on A's recording as ``phasewatch whatif`` does (tiles of 30 s; the
server settings a user would give with ``--server``: ``max_num_seqs``,
``max_num_batched_tokens``, ``max_model_len``; for ``gpu_memory_utilization`` the device's
memory and the weights' size), predict B, record B three times (other seeds; ``--truth-runs``)
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

The summary gives each figure's median and worst error, direction and interval over the
figures whose measured p99 moves by 10 % or more (``moves 10%+``: a change that moves
nothing is easy to predict and pulls a median down) and over all of them.

Target (issue #45): over the figures that move, median relative error of TTFT p99 and of
ITL p99 ≤ 15 %, none worse than 35 %, direction right in every pair, the interval holding
the measured value in 85 % of them.

Reproduce: ``.venv/bin/python bench/whatif.py [--pairs all|base|wide] [--jobs 2]
[--only KEY] [--scenario NAME]`` (progress on stderr, the table on stdout; about 15
minutes for the 54 pairs on 2 cores).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.diagnose.server import resolve  # noqa: E402
from app.read.whatif import from_scrapes  # noqa: E402
from app.sim.record import record  # noqa: E402
from app.sim.scenario import from_tree  # noqa: E402
from app.sources.recording import read_scrapes  # noqa: E402
from app.twin.fit import fit  # noqa: E402
from app.twin.whatif import knobs_for, measured, predict  # noqa: E402
from bench.whatif_pairs import PAIRS, WIDE, Pair, a_tree, b_tree, hardware, server, value  # noqa: E402

TRUTH_RUNS = 3
SETS = {"base": PAIRS, "wide": WIDE, "all": PAIRS + WIDE}
# A measured change of at least this much (B over A) is a pair that moves.
MOVES = 0.10


def run_pair(args: tuple[int, Pair, float, int]) -> dict[str, Any]:
    i, pair, duration, truth_runs = args
    duration = pair.duration or duration
    seed = pair.seed if pair.seed is not None else 7 + i
    t0 = time.perf_counter()
    a = a_tree(pair)
    b = b_tree(pair, a)
    with tempfile.TemporaryDirectory() as tmp:
        spans_a, spans_b = [], []
        for k in range(truth_runs):  # the twin fits A's first; each side's figure: the median
            ra = record(from_tree(a), Path(tmp) / f"a{k}", duration=duration, seed=seed + 1000 * k)
            spans_a.append(from_scrapes(read_scrapes(ra), server=server(a)))
            rb = record(from_tree(b), Path(tmp) / f"b{k}", duration=duration, seed=seed + 1000 * k)
            spans_b.append(from_scrapes(read_scrapes(rb), server=server(a)))
    span_a = spans_a[0]
    twin = fit(span_a)
    v = value(pair, a, spans_b[0].whole.derived.prefix_cache_hit_rate)
    changes = {pair.key: v}
    memory_gb, weight_gb = hardware(a)
    gmu = resolve(span_a.server, span_a.info).gpu_memory_utilization.value
    knobs, notes = knobs_for(twin, changes, memory_gb, gmu, weight_gb)
    w = predict(twin, span_a.whole, changes, knobs, notes=notes)
    bases = [measured(sa.whole) for sa in spans_a]
    truths = [measured(sb.whole) for sb in spans_b]
    out: dict[str, Any] = {
        "pair": pair,
        "value": v,
        "duration": duration,
        "replay_error": w.replay_error,
        "seconds": time.perf_counter() - t0,
    }
    for name in ("ttft_p99", "itl_p99"):
        bs = [x for t in truths if (x := t.value(name)) is not None]
        avs = [x for t in bases if (x := t.value(name)) is not None]
        out[name] = (
            statistics.median(avs) if avs else None,
            statistics.median(bs) if bs else None,
            w.predicted.value(name),
            w.interval.get(name),
            w.effect.get(name),
        )
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


def _cells(r: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """The pair's two figures: their table cells, and their scores (err, direction,
    inside the interval, whether the measured p99 moved by ``MOVES``)."""
    cells, scores = [], []
    for name in ("ttft_p99", "itl_p99"):
        a_v, b_v, p_v, lo_hi, effect = r[name]
        err = None if b_v is None or p_v is None or b_v <= 0 else abs(p_v - b_v) / b_v
        d = _direction(a_v, b_v, effect)
        hit = None if lo_hi is None or b_v is None else lo_hi[0] <= b_v <= lo_hi[1]
        moves = a_v is not None and b_v is not None and a_v > 0 and abs(b_v / a_v - 1) >= MOVES
        scores.append({"name": name, "err": err, "dir": d, "in": hit, "moves": moves})
        cells.append(
            f"{_fmt(a_v) + ' → ' + _fmt(b_v) + ' (' + _fmt(p_v) + ')':<28} "
            f"{'n/a' if err is None else f'{err:.0%}':>5} "
            f"{'' if d is None else ('ok' if d else 'NO'):>3} "
            f"{'' if hit is None else ('y' if hit else 'n'):>3}"
        )
    return cells, scores


def _summary(scores: list[dict[str, Any]], what: str) -> None:
    for name in ("ttft_p99", "itl_p99"):
        es = [s["err"] for s in scores if s["name"] == name and s["err"] is not None]
        if es:
            print(
                f"median_rel_error_{name}[{what}]: {statistics.median(es):.3f} "
                f"(worst {max(es):.2f}, {len(es)} figures)"
            )
    dirs = [s["dir"] for s in scores if s["dir"] is not None]
    inside = [s["in"] for s in scores if s["in"] is not None]
    print(f"direction_right[{what}]: {sum(dirs)}/{len(dirs)}")
    print(f"interval_holds[{what}]: {sum(inside)}/{len(inside)}")


def report(rows: list[dict[str, Any]]) -> None:
    """The table, then the medians over the figures that move and over all."""
    head = (
        f"{'KEY':<22} {'scenario':<22} {'change':<30} {'s':>4} {'TTFT p99 A→B (pred)':<28} "
        f"{'err':>5} {'dir':>3} {'in':>3}  {'ITL p99 A→B (pred)':<28} {'err':>5} {'dir':>3} "
        f"{'in':>3} {'replay':>6}"
    )
    print(head)
    every: list[dict[str, Any]] = []
    per_key: dict[str, list[float]] = {}
    for r in rows:
        p = r["pair"]
        cells, scores = _cells(r)
        every += scores
        per_key.setdefault(p.key, []).extend(s["err"] for s in scores if s["err"] is not None)
        rep = r["replay_error"]
        print(
            f"{p.key:<22} {p.scenario:<22} {p.label + ' (' + str(r['value']) + ')':<30} "
            f"{r['duration']:>4.0f} {cells[0]}  {cells[1]} "
            f"{'n/a' if rep is None else f'{rep:.0%}':>6}"
        )
    print()
    for key, es in per_key.items():
        if es:
            print(f"median_rel_error[{key}]: {statistics.median(es):.3f}")
    _summary([s for s in every if s["moves"]], f"moves {MOVES:.0%}+")
    _summary(every, "all")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=300.0, help="seconds per run (300)")
    ap.add_argument("--jobs", type=int, default=2, help="pairs run at once (2)")
    ap.add_argument("--only", help="only the pairs of one KEY")
    ap.add_argument("--pairs", choices=sorted(SETS), default="all", help="which pairs (all)")
    ap.add_argument("--scenario", help="only the pairs of one scenario")
    ap.add_argument("--truth-runs", type=int, default=TRUTH_RUNS, help="runs of A and B (3)")
    args = ap.parse_args()
    pairs = [
        p
        for p in SETS[args.pairs]
        if args.only in (None, p.key) and args.scenario in (None, p.scenario)
    ]
    # A pair's seeds by its place in its set, not in the filtered list: --only and
    # --scenario run a pair as the whole table does.
    work = [(SETS[args.pairs].index(p), p, args.duration, args.truth_runs) for p in pairs]
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
        f"runs of {args.duration:g} s unless the pair says (s); err: relative error of B's "
        "predicted p99; dir: direction of the change; in: B inside the predicted interval"
    )
    print()
    report(rows)
    print(f"pairs: {len(rows)}; wall_s: {time.perf_counter() - t0:.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
