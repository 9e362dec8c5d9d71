"""The incident model against the simulator's own replay of each answer.

For every case: one simulated replica serves a surge (its scenario's traffic × ``surge``
from ``SURGE_AT`` s) and is recorded until the queue has grown for ``GROWN`` s — the
moment an on-call engineer asks. The incident model (``app.twin.incident``) reads that
recording as ``phasewatch whatif`` does (30-second tiles) and answers: the replicas
needed, and for N replicas the time the backlog drains and the time from which TTFT p99
is under the SLO. The truth: the same simulated replica goes on from that moment with
N − 1 fresh replicas beside it, under the routing the model assumes — its queued
requests stay on it, new arrivals (the same Poisson traffic) go round-robin — for
``HORIZON`` s:

* **growth ended** — the first replica's queue at the horizon is below the backlog at
  the change (it shrinks); ``needed`` is the smallest N that ends it;
* **drain** — the first time its queue is empty;
* **under SLO** — the start of the first 10-second bucket of arrivals (all replicas)
  from which every bucket's TTFT p99 is under the SLO (all but 5 % of the later ones: a
  queue near its limit spills over now and then).

Targets (issue: right during the incident): the replicas needed equal the simulated
smallest N in every case; the time back under the SLO within 30 % of the simulated one.

Reproduce: ``.venv/bin/python bench/incident.py [--jobs 2] [--seed 3]`` (progress on
stderr, the table on stdout).
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.read.whatif import from_scrapes  # noqa: E402
from app.sim.scale_out import record_until, scale_out  # noqa: E402
from app.sim.scenario import from_tree, read_tree  # noqa: E402
from app.sources.recording import read_scrapes  # noqa: E402
from app.twin.incident import incident_of  # noqa: E402

SURGE_AT = 120.0
GROWN = 120.0
HORIZON = 900.0
SLO_TTFT = 2.0
# (surge ×, base load): the base load is the scenario's share of the replica's capacity.
CASES: tuple[tuple[float, float], ...] = ((2.0, 0.6), (3.0, 0.6), (4.0, 0.4), (6.0, 0.4))
REPLICAS = (1, 2, 3, 4, 5)


def _tree(surge: float, load: float) -> dict[str, Any]:
    t = copy.deepcopy(read_tree("incident"))
    t["workload"]["load"] = load
    t["phases"] = [
        {"at_s": SURGE_AT, "name": "spike", "expect": "queue_bound",
         "set": {"workload.rate_multiplier": surge}},
    ]  # fmt: skip
    t["duration_s"] = SURGE_AT + GROWN + HORIZON
    t.pop("loop_s", None)
    return t


def run_case(args: tuple[float, float, int]) -> dict[str, Any]:
    surge, load, seed = args
    started = time.perf_counter()
    sc = from_tree(_tree(surge, load))
    at = SURGE_AT + GROWN
    with tempfile.TemporaryDirectory() as tmp:
        record_until(sc, seed, at, Path(tmp) / "rec")
        span = from_scrapes(read_scrapes(Path(tmp) / "rec"))
    inc = incident_of(span.tiles, SLO_TTFT, span.whole)
    rows = []
    for n in REPLICAS:
        pred = inc.drain(n) if inc.growing else None
        rows.append((n, pred, scale_out(sc, seed, at, n, horizon=HORIZON, slo_ttft=SLO_TTFT)))
    return {
        "surge": surge,
        "load": load,
        "incident": inc,
        "rows": rows,
        "seconds": time.perf_counter() - started,
    }


def _fmt(v: float | None) -> str:
    return "never" if v is None else f"{v:.0f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=2, help="cases run at once (2)")
    ap.add_argument("--seed", type=int, default=3)
    args = ap.parse_args()
    work = [(s, load, args.seed) for s, load in CASES]
    out = []
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for k, r in enumerate(pool.map(run_case, work), 1):
            print(f"[{time.perf_counter() - t0:6.1f} s] {k}/{len(work)} ×{r['surge']:g}",
                  file=sys.stderr, flush=True)  # fmt: skip
            out.append(r)
    print(f"incident model against the simulator's replay (SLO TTFT p99 {SLO_TTFT:g} s, "
          f"seed {args.seed}; routing: queued stay, new arrivals round-robin)")  # fmt: skip
    print()
    print(f"{'surge':<8}{'λ/μ (fitted)':<22}{'backlog':>8}{'needed':>8}{'sim':>5}   "
          f"{'N':>2} {'drain pred/sim s':>18} {'under SLO pred/sim s':>22} {'err':>6}")  # fmt: skip
    right, errs = 0, []
    for r in out:
        inc = r["incident"]
        sim_needed = next((n for n, _, t in r["rows"] if t.ended), None)
        ok = inc.replicas_needed == sim_needed
        right += ok
        lam, mu = inc.arrival_rate, inc.completion_rate
        fitted = "steady" if lam is None or mu is None else f"{lam.mid:.3g}/{mu.mid:.3g}"
        for n, pred, t in r["rows"]:
            if pred is None or n < (sim_needed or 99):
                continue
            p_u, s_u = pred.under_slo_after_s, t.under_slo_s
            err = None
            if p_u is not None and s_u is not None:
                err = abs(p_u - s_u) / max(s_u, 30.0)
                errs.append(err)
            print(f"×{r['surge']:<7g}{fitted:<22}{inc.backlog:>8.0f}"
                  f"{inc.replicas_needed or 0:>8}{sim_needed or 0:>5}{'' if ok else ' ✗'}   "
                  f"{n:>2} {_fmt(pred.drain_s) + ' / ' + _fmt(t.drain_s):>18} "
                  f"{_fmt(p_u) + ' / ' + _fmt(s_u):>22} "
                  f"{'n/a' if err is None else f'{err:.0%}':>6}")  # fmt: skip
    within = sum(e <= 0.30 for e in errs)
    print()
    print(f"replicas needed right: {right}/{len(out)}; time under SLO within 30 %: "
          f"{within}/{len(errs)} (error ÷ max(simulated, 30 s))")  # fmt: skip
    print(f"[{time.perf_counter() - t0:.0f} s]", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
