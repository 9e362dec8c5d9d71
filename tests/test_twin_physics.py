"""The twin's step time by its tokens on the roofline (issue #45 items 1–3): the overlap of
its two sides and attention's pairs, a K/V read tied to the weights' where the span does
not price it, the compute side tuned on the replay's prefill time, and a prediction past
the steps the span showed saying so with a wider interval."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from app.diagnose.server import ServerSettings
from app.read.whatif import from_scrapes
from app.sim.record import record
from app.sim.scenario import from_tree, read_tree
from app.sources.recording import read_scrapes
from app.twin.fit import fit
from app.twin.frontend import MAX_SIGMA, PRIOR_SIGMA, FrontEnd, fit_sigma
from app.twin.stepobs import priors
from app.twin.steptime import Observation, StepModel, fit_step
from app.twin.steptime import predict as predict_step
from app.twin.whatif import knobs_for, predict

START = 1_764_403_200.0


def test_a_step_pays_its_larger_side_and_a_share_of_the_smaller() -> None:
    m = StepModel(0.02, 1e-5, 8e-5, 1e-7, overlap=0.25, attention=1 / 24576)
    # A decode of 10 sequences over 50,000 cached tokens: memory-bound, its tokens' compute
    # a quarter paid.
    decode = m.step_time(10, 50_010, 50_000, 10)
    assert decode == pytest.approx(0.02 + 0.005 + 0.25 * 8e-4 + 1e-4)
    # A chunk of 2,048 tokens at the start of its prompt: compute-bound; its pairs
    # (n²/2) counted at 1/24,576 of a token each here, the weights' read a quarter paid.
    pairs = 2048 * 2049 / 2
    chunk = m.step_time(2048, pairs, 0, 1)
    compute = 8e-5 * (2048 + pairs / 24576)
    assert chunk == pytest.approx(compute + 0.25 * 0.02 + 1e-5)
    # A step near the ridge costs more than its larger side: a mixed step pays both.
    ridge = m.step_time(250, 250 * 251 / 2, 0, 1)
    assert ridge > max(8e-5 * 250, 0.02) * 1.2


def test_the_equations_price_a_step_as_the_engine_does() -> None:
    truth = StepModel(0.015, 0.0, 6e-5, 2e-7, overlap=0.25, attention=1 / 24576)
    o = Observation("decode", 1.0, 1.0, 12.0, 30_000.0, prompt=600.0, others=11.0,
                    chunk_share=0.2)  # fmt: skip
    decode = truth.step_time(12, 30_012, 30_000, 12)
    chunk = truth.step_time(611, 30_011 + 600 * 600 / 2, 30_000, 12)
    assert predict_step(o, truth) == pytest.approx(0.8 * decode + 0.2 * chunk, rel=0.02)


def _flat(m: StepModel, ctx: float) -> list[Observation]:
    rng = random.Random(3)
    out = []
    for _ in range(12):
        run = rng.uniform(20, 22)
        o = Observation("decode", 1.0, 10.0, run, ctx, prompt=800, others=run - 1,
                        chunk_share=rng.uniform(0.1, 0.3))  # fmt: skip
        out.append(Observation("decode", predict_step(o, m), 10.0, run, ctx, 800, run - 1,
                               o.chunk_share))  # fmt: skip
    return out


def test_a_kv_read_the_span_cannot_price_is_tied_to_the_weights_read() -> None:
    """A pool held full in every window (KV pressure) gives no slope of the K/V read: it
    is a share of the base — a full pool's read a weight read — not free, so a larger
    pool's longer contexts make a slower step."""
    pool = 86_000.0
    truth = StepModel(0.02, 0.0, 7e-5, 1.6e-7, overlap=0.25, attention=1 / 24576)
    obs = _flat(truth, 0.99 * pool)
    fitted = fit_step(obs, priors(obs, pool))
    assert fitted is not None
    m = fitted.model
    assert fitted.sources["per_context"].startswith("prior: a full KV pool's read")
    assert m.per_context == pytest.approx(m.base / pool, rel=1e-6)
    # The decode step the span shows is kept; a pool 1.5× as full reads more.
    at = 0.99 * pool
    assert m.step_time(21, at + 21, int(at), 21) == pytest.approx(
        truth.step_time(21, at + 21, int(at), 21), rel=0.05
    )
    assert m.step_time(32, 1.5 * at, int(1.5 * at), 32) > 1.2 * m.step_time(21, at, int(at), 21)


@pytest.fixture(scope="module")
def budget256(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Short chats and 800-token prompts at a chunk budget of 256 tokens."""
    tree = read_tree("healthy")
    tree.pop("phases", None)
    tree["name"] = "budget256"
    tree["engine"]["max_num_batched_tokens"] = 256
    tree["workload"] = {
        "rate": 6.0,
        "classes": [
            {"name": "chat", "weight": 0.7, "prompt_tokens": {"median": 120, "sigma": 0.4},
             "output_tokens": {"median": 150, "sigma": 0.4}, "max_tokens": 512},
            {"name": "long", "weight": 0.3, "prompt_tokens": {"median": 800, "sigma": 0.05},
             "output_tokens": {"median": 60, "sigma": 0.3}, "max_tokens": 256},
        ],
    }  # fmt: skip
    root = tmp_path_factory.mktemp("budget")
    return record(from_tree(tree), root / "a", duration=180, seed=5, start_unix=START)


def test_a_budget_past_every_chunk_seen_says_it_extrapolates(budget256: Path) -> None:
    server = ServerSettings(max_num_seqs=256, max_num_batched_tokens=256, max_model_len=8192)
    span = from_scrapes(read_scrapes(budget256), server=server)
    twin = fit(span)
    assert twin.seen is not None and twin.seen.tokens < 400
    assert len(twin.alternatives) >= 3
    changes = {"max_num_batched_tokens": 2048}
    knobs, notes = knobs_for(twin, changes)
    w = predict(twin, span.whole, changes, knobs, notes=notes, seeds=2)
    note = [n for n in w.notes if "extrapolates the step time" in n]
    assert note and "steps of up to" in note[0] and "the span's up to" in note[0]
    low, high = w.interval["itl_p99"] or (0.0, 0.0)
    value = w.predicted.value("itl_p99") or 0.0
    assert high / low > 1.6 and low <= value <= high
    # The compute side was tuned on the replay's prefill time, which now matches.
    measured = span.whole.means["prefill_time"] or 0.0
    assert w.replay.prefill_time_mean == pytest.approx(measured, rel=0.1)
    # Within the steps seen (a smaller budget, same traffic): no such note.
    same = predict(twin, span.whole, {"rate_scale": 0.9}, knobs_for(twin, {"rate_scale": 0.9})[0],
                   seeds=2)  # fmt: skip
    assert not any("extrapolates" in n for n in same.notes)


@pytest.fixture(scope="module")
def pressured(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """kv_pressure: the KV pool full in every window, requests preempted and recomputed."""
    root = tmp_path_factory.mktemp("kv")
    return record("kv_pressure", root / "kv", duration=240, seed=3, start_unix=START)


def test_a_larger_pool_on_a_pressured_server_costs_its_reads_and_drains_the_queue(
    pressured: Path,
) -> None:
    span = from_scrapes(read_scrapes(pressured), server=ServerSettings(max_model_len=16384))
    twin = fit(span)
    # The pool is the page's, and its read is the prior's: a pool full in every window
    # cannot price it.
    assert twin.sources["num_gpu_blocks"] == "cache_config_info"
    assert twin.sources["step.per_context"].startswith("prior: a full KV pool's read")
    pool = twin.engine.num_gpu_blocks * twin.engine.block_size
    assert twin.step.per_context == pytest.approx(twin.step.base / pool, rel=0.01)
    changes = {"num_gpu_blocks": twin.engine.num_gpu_blocks * 2}
    knobs, notes = knobs_for(twin, changes)
    w = predict(twin, span.whole, changes, knobs, notes=notes, seeds=2)
    # The replay preempts (and recomputes) as the server did; the larger pool less often
    # and with a shorter queue.
    assert (w.replay.preemptions_per_s or 0.0) > 0.5
    assert (w.predicted.preemptions_per_s or 0.0) < (w.replay.preemptions_per_s or 0.0)
    assert (w.predicted.waiting_avg or 0.0) < (w.replay.waiting_avg or 0.0)
    effect = w.effect["ttft_p99"]
    assert effect is not None and effect < 0.9
    # Each step reads the larger context: the inter-token gap does not fall with it.
    itl = w.effect["itl_p50"]
    assert itl is not None and itl > 0.9


def test_traffic_past_the_batches_seen_widens_the_interval_to_hold_the_server(
    tmp_path: Path,
) -> None:
    """One load level pins no batch slope; ×2.5 the traffic runs batches the span never
    took: the prediction says so, and its interval (the alternative fits' physics) holds
    what the simulator measures there."""
    tree = read_tree("healthy")
    tree.pop("phases", None)
    tree["name"] = "healthy"
    tree["workload"].pop("load", None)
    tree["workload"]["rate"] = 2.0
    server = ServerSettings(max_num_seqs=256, max_num_batched_tokens=2048, max_model_len=8192)
    a = record(from_tree(tree), tmp_path / "a", duration=180, seed=21, start_unix=START)
    tree["workload"]["rate"] = 5.0
    b = record(from_tree(tree), tmp_path / "b", duration=180, seed=22, start_unix=START)
    span = from_scrapes(read_scrapes(a), server=server)
    twin = fit(span)
    knobs, notes = knobs_for(twin, {"rate_scale": 2.5})
    w = predict(twin, span.whole, {"rate_scale": 2.5}, knobs, notes=notes, seeds=2)
    assert any("batches of up to" in n for n in w.notes)
    truth = from_scrapes(read_scrapes(b), server=server).whole
    for name in ("ttft_p99", "itl_p99"):
        low, high = w.interval[name] or (0.0, 0.0)
        measured = truth.quantiles[name.split("_")[0]]["p99"].value
        assert measured is not None and low <= measured <= high, (name, low, measured, high)


def test_a_ttft_tail_past_any_api_servers_spread_is_left_to_the_engine() -> None:
    """A queue-free span whose TTFT p99 asks for a front-end spread over σ 0.8 has a tail
    the engine's part misses: the spread stays at the prior rather than carry that tail
    into every prediction."""
    fe = FrontEnd(0.004, PRIOR_SIGMA, "measured")
    engine = [(0, [0.008] * 2000)]
    bounds = (0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32)
    near = fit_sigma(engine, fe, bounds, 0.03)
    assert near.sigma <= MAX_SIGMA and "fitted" in near.source
    far = fit_sigma(engine, fe, bounds, 0.15)
    assert far.sigma == PRIOR_SIGMA and "the tail is the engine's" in far.source
