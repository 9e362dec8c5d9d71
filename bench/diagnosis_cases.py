"""The diagnosis benchmark's cases beyond the confusion table (issue #44), and its P/D lines.

* **hang with moving gauges** (``hang_admits``: arrivals still enter the waiting queue
  while the engine core hangs) and **hang after a long step** (``hang_after_long_step``:
  ~30 s steps for 2 minutes, then the hang): of the windows in which nothing progressed
  (no first token, token, finished request or engine step) with requests in the engine
  at their start, the share called ``stalled``, how many of those carry capacity advice,
  and how many windows with progress were called ``stalled``. Both run in the main loop
  as scenarios (``--scenario``).
* **recovery then 10 healthy minutes** (``recovery-alerts``): the demo's incident (a 5-min
  ×4 surge) followed by a quarter of an hour of normal traffic, its alerts replayed with
  the default pack; at the end no alert may be firing, and none may fire past the rule's
  ``keep_firing_for`` after the stream's last problem window.
* **healthy P/D fleet over several seeds** (``pd-healthy``): the windows of
  ``pd_healthy`` in which a replica is flagged imbalanced (a replica finding, not the
  pools'): none expected.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from app.alerts.rules import default_rules
from app.evaluate.replay import replay
from app.sim.record import record
from app.sim.scenario import from_tree, read_tree
from app.sources.recording import read_scrapes

CASES = ("hang-gauges", "hang-long-step", "recovery-alerts", "pd-healthy")
HANGS = {"hang-gauges": "hang_admits", "hang-long-step": "hang_after_long_step"}
PROBLEMS = {"stalled", "transfer_bound", "kv_pressure", "queue_bound", "prefill_bound"}
PROBLEMS |= {"decode_bound", "frontend_bound"}
CAPACITY = ("replica", "scale", "max-num-seqs", "batched-tokens", "shed", "admission")
RECOVERY_S = 900.0  # after the surge ends at 600 s: ~2.5 min of drain, then healthy
STEP_S = 15.0  # the replay's evaluation step: the first window past the last problem one


def _no_progress(facts: dict[str, Any]) -> bool:
    """Nothing progressed in the window and requests were there from its start."""
    moved = ("ttft_n", "itl_n", "step_n", "finished", "generation_tokens")
    present = (facts.get("running_first") or 0.0) + (facts.get("waiting_first") or 0.0)
    return present > 0 and all(not facts.get(k) for k in moved)


def report_hangs(results: list[dict[str, Any]], cases: tuple[str, ...]) -> None:
    """The stall lines of the hang scenarios among ``results`` (module docstring)."""
    for case in cases:
        name = HANGS.get(case)
        runs = [r for r in results if "error" not in r and r["run"].scenario == name]
        if name is None or not runs:
            continue
        still = called = advised = moved_called = 0
        for res in runs:
            for w in res["windows"]:
                if _no_progress(w["facts"]):
                    still += 1
                    called += w["pred"] == "stalled"
                    advised += any(a in h for h in w.get("hints", ()) for a in CAPACITY)
                else:
                    moved_called += w["pred"] == "stalled"
        share = called / still if still else math.nan
        print(
            f"case_{case} ({name}, {len(runs)} runs): windows without progress called "
            f"stalled {called}/{still} ({share:.3f}), of them with capacity advice "
            f"{advised}; windows with progress called stalled {moved_called}"
        )


def evaluate_recovery(seed: int) -> dict[str, Any]:
    """The incident, then ``RECOVERY_S`` of normal traffic; its alerts replayed."""
    tree = read_tree("incident")
    tree["name"] = "incident-recovery"
    tree.pop("loop_s", None)
    tree["duration_s"] = 600.0 + RECOVERY_S
    with tempfile.TemporaryDirectory(prefix="pw-bench-rec-") as tmp:
        folder = Path(tmp)
        record(from_tree(tree, {}), folder, seed=seed)
        rules = default_rules()
        out = replay(read_scrapes(folder), rules)
    keep = {r.name: r.keep_firing_for_s for r in rules}
    ds = out.diagnoses
    last_problem = max((d.end for d in ds if str(d.cls) in PROBLEMS), default=ds[0].start)
    end = ds[-1].end
    state: dict[str, str] = {}
    late: list[float] = []
    for t in out.transitions:
        state[t.fingerprint] = t.state
        if t.state == "resolved" and t.previous == "firing":
            late.append(t.at - last_problem - STEP_S - keep.get(t.alertname, 0.0))
    firing = sorted({t.alertname for t in out.transitions if state.get(t.fingerprint) == "firing"})
    summaries = [
        t.annotations.get("summary", "")
        for t in out.transitions
        if t.alertname == "PhasewatchBottleneckPersisting" and t.state != "pending"
    ]
    return {
        "seed": seed,
        "firing_at_end": firing,
        "healthy_after_s": end - last_problem,
        "resolved_late_s": max(late, default=0.0),
        "persisting": summaries[-1] if summaries else None,
    }


def report_recovery(got: list[dict[str, Any]]) -> None:
    if not got:
        return
    stuck = [g for g in got if g["firing_at_end"]]
    healthy = min(g["healthy_after_s"] for g in got) / 60.0
    late = max(g["resolved_late_s"] for g in got)
    print(
        f"case_recovery-alerts ({len(got)} seeds): alerts still firing at the end "
        f"{len(stuck)} runs {[g['firing_at_end'] for g in stuck]}; healthy after the last "
        f"problem window ≥ {healthy:.1f} min; the last resolved {late:+.0f} s from the first "
        f"window after it + keep_firing_for"
    )
    example = next((g["persisting"] for g in got if g["persisting"]), None)
    if example:
        print(f"case_recovery-alerts_persisting_text: {json.dumps(example)}")


def report_pd_healthy(results: list[dict[str, Any]]) -> None:
    """Replica findings in the healthy P/D fleet's windows, over its seeds."""
    runs = [r for r in results if "pd" in r and r["run"].scenario == "pd_healthy"]
    if not runs:
        return
    windows = sum(len(r["pd"]) for r in runs)
    flagged = Counter(
        o for r in runs for f in r["pd"] for o in f.get("outliers", ()) if f.get("outliers")
    )
    hit = sum(1 for r in runs for f in r["pd"] if f.get("outliers"))
    seeds = sorted({r["run"].seed for r in runs})
    print(
        f"case_pd-healthy (pd_healthy, seeds {seeds[0]}-{seeds[-1]}): fleet windows with a "
        f"replica flagged imbalanced {hit}/{windows} {dict(flagged)}"
    )


def report_pd(results: list[dict[str, Any]]) -> None:
    """The P/D lines: per pool and scenario, the client-TTFT estimate, the pool imbalance."""
    if not results:
        return
    pools: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    errors: list[float] = []
    imb: Counter[str] = Counter()
    ratios: dict[str, Counter[str]] = defaultdict(Counter)
    for res in results:
        name = res["run"].scenario
        for w in res["windows"]:
            if w["straddles"]:
                continue
            key = f"{name}/{w['pool']}"
            pools[key][0] += w["truth"] == w["pred"]
            pools[key][1] += 1
        for f in res["pd"]:
            if f["client_true"] and f["client_est"] is not None:
                errors.append(abs(f["client_est"] - f["client_true"]) / f["client_true"])
            t, p = f["imbalance_truth"], f["imbalance_pred"]
            imb["tp" if t and p == t else "fp" if p and p != t else "fn" if t else "tn"] += 1
            if p:
                ratios[name][f"{p}→{f['ratio']}"] += 1
    for key, (ok, n) in sorted(pools.items()):
        print(f"pd_pool_{key}: class {ok / n:.3f} ({n} windows)")
    if errors:
        errors.sort()
        mid = errors[len(errors) // 2]
        p90 = errors[min(len(errors) - 1, int(0.9 * len(errors)))]
        within = sum(e <= 0.1 for e in errors) / len(errors)
        print(
            f"pd_client_ttft_estimate_error: median {mid:.3f} p90 {p90:.3f} "
            f"share_within_10pct {within:.3f} ({len(errors)} fleet windows)"
        )
    flagged = imb["tp"] + imb["fp"]
    wanted = imb["tp"] + imb["fn"]
    precision = imb["tp"] / flagged if flagged else math.nan
    recall = imb["tp"] / wanted if wanted else math.nan
    print(
        f"pd_pool_imbalance: precision {precision:.3f} recall {recall:.3f} "
        f"(tp {imb['tp']}, fp {imb['fp']}, fn {imb['fn']}, tn {imb['tn']})"
    )
    for name, counter in sorted(ratios.items()):
        print(f"pd_pool_ratio_{name}: {dict(counter)}")
