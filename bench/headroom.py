"""Headroom against the simulator's own breaking point.

For each scenario (its base phase at the absolute rate its load stands for): record
300 s at today's traffic, compute the twin's headroom as ``phasewatch whatif --headroom``
does (SLO 2 s / 100 ms, the scenario's engine settings given as ``--server`` would give
them), then sweep the simulator itself — traffic × k, the median of three seeded runs of
300 s per k, halving or doubling and then bisecting to 5 % — and print both breaking
points (the geometric middle of each last bracket) and their ratio.

Reproduce: ``.venv/bin/python bench/headroom.py [SCENARIO …]`` (about a minute each).
"""

from __future__ import annotations

import copy
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.diagnose.server import ServerSettings  # noqa: E402
from app.read.whatif import from_scrapes  # noqa: E402
from app.sim.record import record  # noqa: E402
from app.sim.scenario import from_tree, read_tree  # noqa: E402
from app.sources.recording import read_scrapes  # noqa: E402
from app.twin.fit import fit  # noqa: E402
from app.twin.headroom import headroom  # noqa: E402
from app.twin.whatif import calibrate, measured  # noqa: E402

SLO_TTFT, SLO_ITL = 2.0, 0.1
SCENARIOS = ("healthy", "decode_heavy", "queue_overload", "prefill_interference")


def tree_of(name: str) -> dict[str, Any]:
    tree = read_tree(name)
    tree.pop("phases", None)
    tree["name"] = name
    rate = from_tree(tree).base.workload.rate
    tree["workload"].pop("load", None)
    tree["workload"]["rate"] = rate
    return tree


def server_of(tree: dict[str, Any]) -> ServerSettings:
    e = from_tree(tree).base.engine
    return ServerSettings(
        max_num_seqs=e.max_num_seqs,
        max_num_batched_tokens=e.max_num_batched_tokens,
        max_model_len=e.max_model_len,
    )


def sim_breaks(tree: dict[str, Any], k: float, root: Path) -> bool:
    scaled = copy.deepcopy(tree)
    scaled["workload"]["rate"] *= k
    ttft, itl = [], []
    for seed in (50, 51, 52):
        rec = record(from_tree(scaled), root / f"k{k:.4f}-{seed}", duration=300, seed=seed)
        f = measured(from_scrapes(read_scrapes(rec)).whole)
        ttft.append(f.value("ttft_p99") or 0.0)
        itl.append(f.value("itl_p99") or 0.0)
    return statistics.median(ttft) > SLO_TTFT or statistics.median(itl) > SLO_ITL


def sim_point(tree: dict[str, Any], root: Path) -> float:
    good: float | None
    bad: float | None
    good, bad = (None, 1.0) if sim_breaks(tree, 1.0, root) else (1.0, None)
    while good is None or bad is None:
        k = bad / 2 if good is None else good * 2  # type: ignore[operator]
        if k < 0.02 or k > 64:
            return k
        if sim_breaks(tree, k, root):
            bad = k
        else:
            good = k
    while bad / good > 1.05:
        mid = math.sqrt(good * bad)
        if sim_breaks(tree, mid, root):
            bad = mid
        else:
            good = mid
    return math.sqrt(good * bad)


def main() -> int:
    names = sys.argv[1:] or list(SCENARIOS)
    print(f"{'scenario':<22} {'twin':>6} {'simulator':>9} {'twin/sim':>8}  twin says")
    for name in names:
        t0 = time.perf_counter()
        tree = tree_of(name)
        with tempfile.TemporaryDirectory() as tmp:
            rec = record(from_tree(tree), Path(tmp) / "a", duration=300, seed=7)
            span = from_scrapes(read_scrapes(rec), server=server_of(tree))
            room = headroom(calibrate(fit(span), span.whole), SLO_TTFT, SLO_ITL)
            truth = sim_point(tree, Path(tmp))
        twin = (
            room.rate_scale
            if room.breaks_at is None
            else math.sqrt(max(room.rate_scale, 1e-3) * room.breaks_at)
        )
        print(
            f"{name:<22} {twin:>6.3g} {truth:>9.3g} {twin / truth:>8.2f}  {room.text()}"
            f"  [{time.perf_counter() - t0:.0f} s]",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
