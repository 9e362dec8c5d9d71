"""Evaluate the diagnosis against the simulator's ground truth.

For every shipped scenario × seeds × variations (device preset, model size, request
rate, vLLM 0.6 metric names, and a low-traffic lead-in that makes a phase onset), record
a run with the simulator's Python API into a temporary folder, replay it exactly as
``phasewatch replay`` does (60 s windows every 15 s, the default ``DiagnosisConfig`` for
every run), and compare each window with the truth.

**A window's truth** is the simulator's own rule applied to the sum of the per-interval
accounts (``truth.jsonl`` rows) inside the window — ``app.sim.truth.window_truth`` — so
"TTFT p99 over SLO" means "more than 1 % of the window's requests over the SLO", the
same statement the window's histogram p99 makes. Windows that straddle a phase change
(rows of two phases) are left out of the accuracy but used for the detection delay.

**Detection delay**: for each phase onset whose phase (judged by the truth of the
windows wholly inside it) has a problem class different from the phase before, the
number of window steps from the first window ending after the onset to the first
window diagnosed with that class. Returns to healthy are reported apart (recovery).

**Healthy false alerts**: of the windows whose truth is healthy, the share given a
problem class (kv_pressure, queue_bound, prefill_bound, decode_bound) — in the runs of
the ``healthy`` scenario (every variation), and in all runs.

**What changed** (the scenarios whose phase declares a ``cause``: a healthy baseline of
15 minutes, then one change): the truth of a window also has a ``sub_cause`` (the
declared one when the window shows the declared class; for any ``decode_bound`` window,
prefill interference or bandwidth, from where its slow gaps came) and a
``headline_change`` (the canonical name of what the change moved, on every window that
is not healthy or idle). Per scenario: the class accuracy, the sub-cause accuracy over
the windows whose truth has one (the diagnosis' ``sub_cause``), and the headline-change
accuracy over the windows whose truth has one (the diagnosis' ``changes[0]["signal"]``
when that change explains any of the symptom, its ``share``; the drafter's acceptance
counts under either measure, per draft token or per draft; "n/a" while the diagnosis
has no ``changes``). A window whose diagnosis says its page lacks the change's measure
(``app.diagnose.changes.attach.UNTOLD``: a stall on a page that counts no engine steps,
as SGLang's) is no hit, and is counted apart as "cannot tell", with the accuracy over
the windows where the diagnosis told. These scenarios run the default variation and
SGLang's pages only: each is tuned to its device, model and rate, and has its own
baseline.

**Disaggregated prefill/decode fleets** (``app/sim/scenarios/pd/``, default variation
only): each run is recorded as a fleet (one folder per replica) and replayed as
``phasewatch replay`` replays one (``app.evaluate.fleet_replay``); every window is
scored per pool — the pool's diagnosis against the truth of its replicas' summed
accounts (``app.sim.pd.pool_truth``) — into the same confusion table (rows of
``transfer_bound`` come from them). Beside it: the client-TTFT estimate against the
clients' true mean TTFT of the window (``client.jsonl``), and the pool imbalance against
the truth's (one pool's truth a capacity class while the other's is healthy or idle
and its load — engine busy share for prefill, KV usage over 0.9 for decode — under 0.5).

Beside them, issue #44's cases (``bench/diagnosis_cases.py``, ``--case``): a hang with
moving gauges, a hang after a long step, a recovery followed by 10 healthy minutes (no
alert still firing) and a healthy P/D fleet over the seeds (no replica imbalanced).

Prints ``name: value`` lines; the last is the headline. ``--quick`` runs fewer variations.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.diagnose.changes.attach import UNTOLD  # noqa: E402
from app.diagnose.classes import PROBLEM_CLASSES  # noqa: E402
from app.evaluate.fleet_replay import replay_fleet_recording  # noqa: E402
from app.evaluate.replay import diagnose_recording  # noqa: E402
from app.sim.pd import pool_truth  # noqa: E402
from app.sim.pd_record import read_fleet, record_pd  # noqa: E402
from app.sim.pd_scenario import available_pd  # noqa: E402
from app.sim.record import record  # noqa: E402
from app.sim.scenario import available, from_tree, read_tree  # noqa: E402
from app.sim.truth import account_from_row, merge, window_truth  # noqa: E402
from bench.diagnosis_cases import (  # noqa: E402
    CASES,
    evaluate_recovery,
    report_hangs,
    report_pd,
    report_pd_healthy,
    report_recovery,
)

CLASSES = (
    "healthy",
    "idle",
    "stalled",
    "insufficient_data",
    "prefill_bound",
    "decode_bound",
    "queue_bound",
    "kv_pressure",
    "transfer_bound",
)
PROBLEMS = {str(c) for c in PROBLEM_CLASSES}
WINDOW, STEP = 60.0, 15.0
DURATION = 600.0  # when a scenario gives none
LEAD_IN_S = 180.0
_RS = ("rs_slot", "rs_kv", "rs_prefill", "rs_decode", "ttft_over", "ttft_ok", "itl_over", "itl_n")
SUB_CAUSE_TARGET = HEADLINE_TARGET = 0.85
CLASS_TARGET = 0.95


@dataclass(frozen=True)
class Run:
    scenario: str
    seed: int
    variation: str
    overrides: tuple[tuple[str, Any], ...] = ()
    lead_in: bool = False
    version: str = "0.33"


def variations(quick: bool) -> list[Run]:
    """The variations of one (scenario, seed); ``scenario`` and ``seed`` are filled later."""
    out = [Run("", 0, "default"), Run("", 0, "lead-in", lead_in=True)]
    if quick:
        return out
    out += [
        Run("", 0, "a100", (("device", "a100-80gb"),)),
        Run("", 0, "h100", (("device", "h100-sxm"),)),
        Run("", 0, "3b", (("model.preset", "llama-3.2-3b"),)),
        Run("", 0, "14b", (("model.preset", "qwen2.5-14b"),)),
        Run("", 0, "cpu-3b", (("device", "cpu"), ("model.preset", "llama-3.2-3b"))),
        Run("", 0, "rate-0.8", (("workload.rate_multiplier", 0.8),)),
        Run("", 0, "rate-1.2", (("workload.rate_multiplier", 1.2),)),
        # V0 page names: no queue/prefill/step histograms, the prefix-cache gauge.
        Run("", 0, "vllm-0.6", version="0.6"),
        # SGLang's pages of the same replicas (docs/sglang.md): the same scores expected.
        Run("", 0, "sglang", version="sglang"),
    ]
    return out


def declares_change(name: str) -> bool:
    """Whether a scenario's phases declare what they change (a ``cause``)."""
    if name in available_pd():
        return False
    return any("cause" in ph for ph in read_tree(name).get("phases") or [])


def runs_of(name: str, quick: bool) -> list[Run]:
    """The variations a scenario runs: all of them, or only the default for a scenario
    that declares its change (tuned to its setup, with its own baseline; and SGLang's
    pages of it) or is a P/D fleet."""
    if name in available_pd():
        return [Run("", 0, "default")]
    if declares_change(name):
        return [Run("", 0, "default"), Run("", 0, "sglang", version="sglang")]
    return variations(quick)


# Names of one change measured another way: the drafter's acceptance per draft token
# (vLLM's counters) or per draft (SGLang's accept length).
SAME_CHANGE = {"spec_decode_accepted_per_draft": "spec_decode_acceptance"}


def first_change(d: Any) -> str | None:
    """The signal of a diagnosis' headline change (its first change, when that explains
    any of the symptom: ``app.diagnose.changes.headline``), if it has one."""
    changes = getattr(d, "changes", None)
    if not changes:
        return None
    first = changes[0]
    get = first.get if isinstance(first, Mapping) else lambda k: getattr(first, k, None)
    signal, share = get("signal"), get("share")
    if signal is None or not share:
        return None
    return SAME_CHANGE.get(str(signal), str(signal))


def cannot_tell(d: Any) -> bool:
    """The diagnosis says its page lacks the measure of the change (``UNTOLD``)."""
    return any(str(n).startswith(UNTOLD) for n in getattr(d, "notes", ()) or ())


def _scenario(run: Run) -> Any:
    tree = read_tree(run.scenario)
    tree.setdefault("name", run.scenario)
    tree.pop("loop_s", None)
    if run.lead_in:
        # A quiet start, then the scenario's own traffic: a phase onset to detect.
        phases = [{**ph, "at_s": float(ph["at_s"]) + LEAD_IN_S} for ph in tree.get("phases") or []]
        tree["phases"] = [
            {
                "at_s": 0.0,
                "name": "quiet",
                "expect": "healthy",
                "set": {"workload.rate_multiplier": 0.25},
            },
            {
                "at_s": LEAD_IN_S,
                "name": "onset",
                "expect": tree.get("expect"),
                "set": {"workload.rate_multiplier": 1.0},
            },
            *phases,
        ]
        tree["duration_s"] = float(tree.get("duration_s", DURATION)) + LEAD_IN_S
    return from_tree(tree, dict(run.overrides))


def _pool_load(rows: list[dict[str, Any]], role: str) -> float:
    """The truth's load of a pool over a window's rows (module docstring)."""
    acct = merge(account_from_row(r) for r in rows)
    replicas = max(1, len({r["replica"] for r in rows}))
    seconds = acct.duration_s / replicas
    if role == "prefill":
        return acct.busy_s / replicas / seconds if seconds else 0.0
    return acct.kv_usage_s / replicas / seconds / 0.9 if seconds else 0.0


def _truth_imbalance(pools: dict[str, Any], loads: dict[str, float]) -> str | None:
    capacity = {"queue_bound", "prefill_bound", "decode_bound", "kv_pressure"}
    for busy, quiet in (("prefill", "decode"), ("decode", "prefill")):
        if (
            pools[busy].cls in capacity
            and pools[quiet].cls in ("healthy", "idle")
            and loads[quiet] < 0.5
        ):
            return busy
    return None


def evaluate_pd(run: Run) -> dict[str, Any]:
    """Record a P/D fleet, replay it as a fleet, score every pool window."""
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pw-bench-pd-") as tmp:
        folder = Path(tmp)
        try:
            record_pd(run.scenario, folder, seed=run.seed, version=run.version)
        except Exception as exc:  # reported, not fatal
            return {"run": run, "error": f"{type(exc).__name__}: {exc}"}
        fleet = read_fleet(folder) or {}
        roles = {r["name"]: r["role"] for r in fleet.get("replicas", [])}
        rows: dict[str, list[dict[str, Any]]] = {}
        for name in roles:
            text = (folder / name / "truth.jsonl").read_text()
            rows[name] = [{**json.loads(line), "replica": name} for line in text.splitlines()]
        client = [json.loads(line) for line in (folder / "client.jsonl").read_text().splitlines()]
        replay = replay_fleet_recording(folder, length=WINDOW, step=STEP)
    some = next(iter(rows.values()))
    onsets = [
        r["t0"] for prev, r in zip(some, some[1:], strict=False) if r["phase"] != prev["phase"]
    ]
    windows = []
    fleet_windows = []
    for view in replay.views:
        w = view.fleet.window
        if view.pd is None:
            continue
        truths: dict[str, Any] = {}
        loads: dict[str, float] = {}
        for role in ("prefill", "decode"):
            members = [rows[n] for n, r in roles.items() if r == role]
            inside = [r for rs in members for r in rs if r["t0"] >= w.start and r["t1"] <= w.end]
            if not inside:
                continue
            truth = pool_truth(members, w.start, w.end)
            truths[role], loads[role] = truth, _pool_load(inside, role)
            pool = view.pd.pools.get(role)
            if pool is None:
                continue
            d = pool.diagnosis
            windows.append(
                {
                    "end": w.end,
                    "pool": role,
                    "truth": truth.cls,
                    "truth_sub": truth.sub_cause,
                    "truth_headline": None,
                    "ambiguous": truth.ambiguous,
                    "pred": str(d.cls),
                    "sub": None if d.sub_cause is None else str(d.sub_cause),
                    "has_changes": False,
                    "headline": None,
                    "cannot_tell": False,
                    "straddles": len({r["phase"] for r in inside}) > 1,
                    "phase": inside[-1]["phase"],
                    "confidence": d.confidence,
                    "facts": d.facts,
                    "why": truth.reason,
                    "truth_rs": {},
                }
            )
        if len(truths) < 2:
            continue
        inside_c = [c for c in client if c["t0"] >= w.start and c["t1"] <= w.end]
        n = sum(c["first_tokens"] for c in inside_c)
        fleet_windows.append(
            {
                "end": w.end,
                "client_true": sum(c["ttft_sum_s"] for c in inside_c) / n if n else None,
                "client_est": view.pd.client.mean,
                "imbalance_truth": _truth_imbalance(truths, loads),
                "imbalance_pred": None
                if view.pd.imbalance is None
                else view.pd.imbalance.saturated,
                "ratio": None if view.pd.imbalance is None else view.pd.imbalance.ratio,
                "outliers": [o.replica for o in view.imbalance.outliers if o.kind != "pool"],
            }
        )
    return {
        "run": run,
        "windows": windows,
        "onsets": onsets,
        "pd": fleet_windows,
        "seconds": time.perf_counter() - t0,
    }


def evaluate(run: Run) -> dict[str, Any]:
    """Record, replay, compare; returns per-window (truth, predicted, phase info)."""
    if run.scenario in available_pd():
        return evaluate_pd(run)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pw-bench-") as tmp:
        folder = Path(tmp)
        try:
            record(_scenario(run), folder, seed=run.seed, version=run.version)
        except Exception as exc:  # a variation the simulator refuses is reported, not fatal
            return {"run": run, "error": f"{type(exc).__name__}: {exc}"}
        rows = [json.loads(line) for line in (folder / "truth.jsonl").open()]
        diagnoses = diagnose_recording(folder, length=WINDOW, step=STEP)
    onsets = [
        r["t0"] for prev, r in zip(rows, rows[1:], strict=False) if r["phase"] != prev["phase"]
    ]
    windows = []
    for d in diagnoses:
        inside = [r for r in rows if r["t0"] >= d.start and r["t1"] <= d.end]
        if not inside:
            continue
        truth = window_truth(rows, d.start, d.end)
        phases = {r["phase"] for r in inside}
        windows.append(
            {
                "end": d.end,
                "truth": truth.cls,
                "truth_sub": truth.sub_cause,
                "truth_headline": truth.headline_change,
                "ambiguous": truth.ambiguous,
                "pred": str(d.cls),
                "sub": None if d.sub_cause is None else str(d.sub_cause),
                "has_changes": hasattr(d, "changes"),
                "headline": first_change(d),
                "cannot_tell": cannot_tell(d),
                "hints": [h.id for h in d.hints],
                "straddles": len(phases) > 1,
                "phase": inside[-1]["phase"],
                "confidence": d.confidence,
                "facts": d.facts,
                "why": truth.reason,
                "truth_rs": {k: sum(r[k] for r in inside) for k in _RS},
            }
        )
    return {"run": run, "windows": windows, "onsets": onsets, "seconds": time.perf_counter() - t0}


def _delays(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One record per phase onset that changes the class: delays in window steps.

    ``from_onset`` counts from the first window ending after the onset to the first one
    diagnosed with the new phase's class; ``behind_truth`` counts from the first window
    whose truth has that class (the physics may take a while: a queue must build).
    """
    ws = result["windows"]
    out = []
    for onset in result["onsets"]:
        after = [w for w in ws if w["end"] > onset]
        clean_after = [w for w in after if not w["straddles"]]
        clean_before = [w for w in ws if w["end"] <= onset and not w["straddles"]]
        if not clean_after or not clean_before:
            continue
        new_phase, old_phase = clean_after[0]["phase"], clean_before[-1]["phase"]
        inside = [w["truth"] for w in clean_after if w["phase"] == new_phase]
        before = [w["truth"] for w in clean_before if w["phase"] == old_phase]
        target = Counter(inside).most_common(1)[0][0]
        if target == Counter(before).most_common(1)[0][0]:
            continue
        hit = next((i for i, w in enumerate(after) if w["pred"] == target), len(after))
        seen = next((i for i, w in enumerate(after) if w["truth"] == target), len(after))
        run: Run = result["run"]
        out.append(
            {
                "target": target,
                "from_onset": hit,
                "behind_truth": max(0, hit - seen),
                "where": f"{run.scenario}/{run.variation}/seed{run.seed}@{onset:.0f}",
            }
        )
    return out


def report(results: list[dict[str, Any]], elapsed: float) -> None:
    confusion: dict[str, Counter[str]] = defaultdict(Counter)
    amb_ok = amb_n = 0
    onsets: list[dict[str, Any]] = []
    healthy_runs_windows = healthy_runs_alerts = healthy_windows = healthy_alerts = 0
    errors = [r for r in results if "error" in r]
    subs: dict[str, Counter[str]] = defaultdict(Counter)
    per_scenario: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    # scenario -> [correct, judged] for the sub-cause and the headline change
    sub_ok: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    head_ok: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    # scenario -> windows whose diagnosis says its page cannot tell the change
    untold: Counter[str] = Counter()
    has_changes = False
    for res in results:
        if "error" in res:
            continue
        run: Run = res["run"]
        for w in res["windows"]:
            if w["straddles"]:
                continue
            confusion[w["truth"]][w["pred"]] += 1
            per_scenario[run.scenario][0] += w["truth"] == w["pred"]
            per_scenario[run.scenario][1] += 1
            has_changes = has_changes or w["has_changes"]
            if w["truth_sub"] is not None:
                sub_ok[run.scenario][0] += w["sub"] == w["truth_sub"]
                sub_ok[run.scenario][1] += 1
            if w["truth_headline"] is not None:
                head_ok[run.scenario][0] += w["headline"] == w["truth_headline"]
                head_ok[run.scenario][1] += 1
                if w["cannot_tell"]:
                    untold[run.scenario] += 1
            if w["ambiguous"]:
                amb_n += 1
                amb_ok += w["truth"] == w["pred"]
            if w["pred"] == "decode_bound":
                subs[run.scenario][w["sub"]] += 1
            if w["truth"] == "healthy":
                healthy_windows += 1
                healthy_alerts += w["pred"] in PROBLEMS
                if run.scenario == "healthy":
                    healthy_runs_windows += 1
                    healthy_runs_alerts += w["pred"] in PROBLEMS
        if "pd" in res:
            for role in ("prefill", "decode"):
                pool_res = {**res, "windows": [w for w in res["windows"] if w["pool"] == role]}
                onsets += _delays(pool_res)
        else:
            onsets += _delays(res)
    total = sum(sum(c.values()) for c in confusion.values())
    correct = sum(confusion[c][c] for c in confusion)
    labels = [c for c in CLASSES if c in confusion or any(c in row for row in confusion.values())]
    print(f"runs: {len(results)} ({len(errors)} refused by the simulator)")
    for e in errors:
        print(
            f"run_error: {e['run'].scenario}/{e['run'].variation}/seed{e['run'].seed}: {e['error']}"
        )
    print(
        f"windows_scored: {total} (window {WINDOW:g} s, step {STEP:g} s; "
        "windows straddling a phase change excluded)"
    )
    print("confusion (rows truth, columns diagnosed):")
    width = max(len(c) for c in labels) + 1
    print(" " * width + "".join(f"{c[:10]:>11}" for c in labels))
    for t in labels:
        print(f"{t:<{width}}" + "".join(f"{confusion[t][p]:>11}" for p in labels))
    recalls = []
    for c in labels:
        tp = confusion[c][c]
        support = sum(confusion[c].values())
        predicted = sum(confusion[t][c] for t in confusion)
        precision = tp / predicted if predicted else math.nan
        recall = tp / support if support else math.nan
        if support:
            recalls.append((c, recall))
        print(f"class_{c}: precision {precision:.3f} recall {recall:.3f} support {support}")
    for name, (ok, n) in sorted(per_scenario.items()):
        print(
            f"scenario_{name}: class {ok / n:.3f} ({n} windows); "
            f"sub_cause {_share(sub_ok.get(name))}; "
            f"headline_change {_share(head_ok.get(name), has_changes)}"
            + (f", cannot tell {untold[name]}" if untold[name] else "")
        )
    for name, counter in sorted(subs.items()):
        print(f"decode_sub_causes_{name}: {dict(counter)}")
    if amb_n:
        print(f"accuracy_on_truth_marked_ambiguous: {amb_ok / amb_n:.3f} ({amb_n} windows)")
        print(f"accuracy_excluding_ambiguous: {(correct - amb_ok) / (total - amb_n):.3f}")
    detect = [o for o in onsets if o["target"] in PROBLEMS]
    recover = [o for o in onsets if o["target"] not in PROBLEMS]
    for name, group in (("detection", detect), ("recovery", recover)):
        if not group:
            continue
        delays = [o["from_onset"] for o in group]
        lags = [o["behind_truth"] for o in group]
        worst = max(group, key=lambda o: o["from_onset"])
        for o in group:
            if o["behind_truth"] > 2:
                print(f"{name}_late: {o}")
        print(
            f"{name}_delay_windows: mean {sum(delays) / len(delays):.2f} max {max(delays)} "
            f"share_within_2 {sum(d <= 2 for d in delays) / len(delays):.3f} "
            f"({len(group)} onsets; worst {worst['where']} → {worst['target']})"
        )
        print(
            f"{name}_lag_behind_truth_windows: mean {sum(lags) / len(lags):.2f} max {max(lags)} "
            f"share_within_2 {sum(d <= 2 for d in lags) / len(lags):.3f}"
        )
    if healthy_windows:
        print(
            f"false_alert_rate_all_healthy_windows: {healthy_alerts / healthy_windows:.4f} "
            f"({healthy_alerts}/{healthy_windows} windows of any run whose truth is healthy)"
        )
    if healthy_runs_windows:
        print(
            f"healthy_run_false_alert_rate: {healthy_runs_alerts / healthy_runs_windows:.4f} "
            f"({healthy_runs_alerts}/{healthy_runs_windows} healthy windows of healthy-scenario "
            "runs given a problem class)"
        )
    changed = [name for name in per_scenario if declares_change(name)]
    for what, table, target, known in (
        ("sub_cause", sub_ok, SUB_CAUSE_TARGET, True),
        ("headline_change", head_ok, HEADLINE_TARGET, has_changes),
    ):
        total_ok = [sum(table[n][0] for n in table), sum(table[n][1] for n in table)]
        print(f"{what}_accuracy: {_share(total_ok, known)} (target >= {target:.2f})")
    told = [
        sum(head_ok[n][0] for n in head_ok),
        sum(head_ok[n][1] for n in head_ok) - sum(untold.values()),
    ]
    print(
        f"headline_change_cannot_tell: {sum(untold.values())} windows whose page lacks the "
        f"change's measure, said so (not a hit); accuracy where told {_share(told, has_changes)}"
    )
    cls_changed = [
        sum(per_scenario[n][0] for n in changed),
        sum(per_scenario[n][1] for n in changed),
    ]
    print(
        f"class_accuracy_change_scenarios: {_share(cls_changed)} "
        f"(target >= {CLASS_TARGET:.2f} over all: see overall_accuracy)"
    )
    report_pd([r for r in results if "pd" in r])
    lowest = min(recalls, key=lambda cr: cr[1]) if recalls else ("-", math.nan)
    print(f"min_class_recall: {lowest[1]:.3f} ({lowest[0]})")
    print(f"elapsed_seconds: {elapsed:.1f}")
    print(f"overall_accuracy: {correct / total:.3f}")


def _share(counts: list[int] | None, known: bool = True) -> str:
    """``0.912 (137 windows)``; ``n/a`` when nothing was judged or the diagnosis does not
    say it yet."""
    if not counts or not counts[1]:
        return "n/a (0 windows)"
    if not known:
        return f"n/a (the diagnosis has no changes yet; {counts[1]} windows)"
    return f"{counts[0] / counts[1]:.3f} ({counts[1]} windows)"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="default and lead-in variations only")
    p.add_argument("--scenario", action="append", help="only these scenarios (repeatable)")
    p.add_argument("--variation", action="append", help="only these variations (repeatable)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--dump", type=Path, help="write every scored window as JSON lines here")
    p.add_argument(
        "--case",
        action="append",
        choices=[*CASES, "none"],
        help="issue #44's cases to report (repeatable; default all, 'none' for none; "
        "hang-gauges and hang-long-step need their scenarios in the run)",
    )
    args = p.parse_args(argv)
    cases = tuple(c for c in (args.case or CASES) if c != "none")
    runs = [
        dataclasses.replace(var, scenario=name, seed=seed)
        for name in (args.scenario or [*available(), *available_pd()])
        for seed in range(args.seeds)
        for var in runs_of(name, args.quick)
        if not args.variation or var.variation in args.variation
    ]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        results = list(pool.map(evaluate, runs, chunksize=1))
        seeds = range(args.seeds) if "recovery-alerts" in cases else range(0)
        recovered = list(pool.map(evaluate_recovery, seeds, chunksize=1))
    if args.dump:
        with args.dump.open("w") as fh:
            for res in results:
                for w in res.get("windows", []):
                    run = res["run"]
                    fh.write(
                        json.dumps(
                            {
                                **w,
                                "scenario": run.scenario,
                                "variation": run.variation,
                                "seed": run.seed,
                            }
                        )
                        + "\n"
                    )
    report_hangs(results, cases)
    report_recovery(recovered)
    if "pd-healthy" in cases:
        report_pd_healthy(results)
    report(results, time.perf_counter() - t0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
