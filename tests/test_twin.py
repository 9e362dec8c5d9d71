"""The what-if twin: length fits, the step-time fit, and fit → replay → predict on
simulator recordings (the fit check proper is ``bench/whatif.py``)."""

from __future__ import annotations

import dataclasses
import math
import random
import re
from pathlib import Path

import pytest

from app.model import HistogramDelta
from app.read.whatif import from_scrapes
from app.sim.record import record
from app.sources.recording import read_scrapes
from app.twin.engine import Knobs, run
from app.twin.fit import FitError, fit
from app.twin.lengths import fit_lengths
from app.twin.steptime import Observation, StepModel, fit_step
from app.twin.steptime import predict as predict_step
from app.twin.whatif import ChangeError, knobs_for, parse_change, predict

TOKENS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)


def _hist(values: list[int]) -> HistogramDelta:
    buckets: dict[int, float] = {}
    for v in values:
        i = next((k for k, b in enumerate(TOKENS) if v <= b), len(TOKENS))
        buckets[i] = buckets.get(i, 0.0) + 1
    return HistogramDelta(TOKENS, buckets, float(sum(values)), float(len(values)))


def test_fixed_lengths_stay_fixed() -> None:
    fitted = fit_lengths(_hist([128] * 500))
    assert fitted is not None
    assert fitted.sigma == 0.0 and fitted.median == pytest.approx(128)


def test_a_lognormal_is_found_from_coarse_buckets() -> None:
    rng = random.Random(3)
    values = [max(1, round(300 * math.exp(0.6 * rng.gauss(0, 1)))) for _ in range(5000)]
    fitted = fit_lengths(_hist(values))
    assert fitted is not None
    assert fitted.mean == pytest.approx(sum(values) / len(values))
    assert fitted.sigma == pytest.approx(0.6, abs=0.1)
    assert fitted.median == pytest.approx(300, rel=0.1)
    # Its own histogram does not reject it: the lengths stay the lognormal's.
    assert fitted.pieces == ()


def test_two_kinds_of_request_are_drawn_from_the_buckets_not_one_lognormal() -> None:
    """70 % chat prompts of 64 tokens, 30 % documents of 900: the best lognormal (σ 1.15,
    median 162) spreads the prompts over every length between and past the two; the
    buckets reject it, and the lengths are drawn from them with the exact mean, none in
    the empty buckets between (app.twin.lengths)."""
    from app.twin.engine import _lengths

    values = [64] * 700 + [900] * 300
    fitted = fit_lengths(_hist(values))
    assert fitted is not None and len(fitted.pieces) == 2
    assert [round(w, 2) for w, _, _ in fitted.pieces] == [0.7, 0.3]
    assert sum(w * (lo + hi) / 2 for w, lo, hi in fitted.pieces) == pytest.approx(314.8)
    assert "2 buckets" in fitted.shape() and fitted.to_dict()["buckets"][1]["share"] == 0.3
    assert fitted.quantile(0.5) < 120 < 500 < fitted.quantile(0.8)
    rng = random.Random(5)
    draws = [_lengths(fitted, 1.0).sample(rng) for _ in range(20000)]
    assert sum(draws) / len(draws) == pytest.approx(314.8, rel=0.02)
    assert max(draws) <= 1.3 * 900 and not any(120 < d < 500 for d in draws)
    # The knobs scale every length.
    half = [_lengths(fitted, 0.5).sample(rng) for _ in range(20000)]
    assert sum(half) / len(half) == pytest.approx(157.4, rel=0.02)


def test_a_fitted_mean_is_a_samples_within_its_standard_error() -> None:
    """The histogram's mean is exact for the requests that finished, and a sample's mean
    of the lengths sent: its relative standard error is the lengths' spread over √n, the
    lognormal's or the buckets' (app.twin.lengths)."""
    rng = random.Random(9)
    means = []
    for _ in range(40):
        values = [max(1, round(3000 * math.exp(0.5 * rng.gauss(0, 1)))) for _ in range(230)]
        means.append(sum(values) / len(values))
    fitted = fit_lengths(_hist(values))
    assert fitted is not None and fitted.pieces == ()
    # σ fitted on the coarse buckets, near 0.5.
    assert fitted.mean_error() == pytest.approx(math.sqrt(math.expm1(0.25)) / math.sqrt(230),
                                                rel=0.2)  # fmt: skip
    truth = 3000 * math.exp(0.125)
    spread = math.sqrt(sum((m / truth - 1) ** 2 for m in means) / len(means))
    assert spread == pytest.approx(fitted.mean_error(), rel=0.35)
    pieces = fit_lengths(_hist([64] * 700 + [900] * 300))
    assert pieces is not None and pieces.pieces
    # Two kinds of request 14× apart: a coefficient of variation near 1.2, over √1,000.
    assert 0.9 / math.sqrt(1000) < pieces.mean_error() < 1.5 / math.sqrt(1000)


def test_no_requests_no_fit() -> None:
    assert fit_lengths(HistogramDelta(TOKENS, {}, 0.0, 0.0)) is None


PRIORS = {
    "base": (0.01, "test"),
    "per_seq": (0.0, "flat"),
    "per_token": (1e-5, "ridge"),
    "per_context": (0.0, "free"),
    "compute_base": (0.0, "none"),
}


def _decode(m: StepModel, run: float, ctx: float, share: float, chunk: float) -> Observation:
    memory = m.base + m.per_context * ctx
    y = memory + m.per_seq * run + share * max(0.0, m.per_token * (chunk + run - 1) - memory)
    return Observation("decode", y, 10.0, run, ctx, prompt=chunk, others=run - 1, chunk_share=share)


def test_the_step_roofline_is_recovered_from_varied_windows() -> None:
    truth = StepModel(0.02, 2e-4, 8e-5, 1.5e-7)
    rng = random.Random(1)
    obs = []
    for _ in range(30):
        run = rng.uniform(4, 120)
        ctx = run * rng.uniform(300, 1500)
        obs.append(_decode(truth, run, ctx, rng.uniform(0.05, 0.6), rng.uniform(600, 2100)))
    fitted = fit_step(obs, PRIORS)
    assert fitted is not None
    m = fitted.model
    assert m.base == pytest.approx(truth.base, rel=0.05)
    assert m.per_token == pytest.approx(truth.per_token, rel=0.05)
    assert m.per_context == pytest.approx(truth.per_context, rel=0.1)
    assert m.per_seq == pytest.approx(truth.per_seq, rel=0.1)
    assert m.compute_base == pytest.approx(0.0, abs=1e-3)
    assert all(fitted.sources[t] == "data" for t in ("base", "per_seq", "per_token", "per_context"))


def test_one_load_level_leaves_the_batch_slope_to_its_prior() -> None:
    truth = StepModel(0.02, 2e-4, 8e-5, 0.0)
    obs = [_decode(truth, 32.0, 20000.0, 0.3, 1000.0) for _ in range(10)]
    fitted = fit_step(obs, PRIORS)
    assert fitted is not None
    assert fitted.sources["per_seq"].startswith("prior")
    assert fitted.model.per_seq == 0.0


def test_one_prompt_mix_prices_its_tokens_not_a_fixed_charge_on_every_step() -> None:
    # One load level and one prompt mix, as in a CPU vLLM's windows: the prefill step's
    # cost cannot be split between a fixed compute charge and a price per token. The
    # price per token is kept (physics: a compute-bound step costs its tokens); a fixed
    # charge over the memory floor would make every decode step compute-bound too, and
    # the fit would miss the prefill time by half.
    truth = StepModel(0.001, 0.0, 2.2e-5, 7.4e-7)
    lengths = (0.30, 0.43, 0.52, 0.61, 0.70, 0.80, 0.91, 1.03, 1.19, 1.39, 1.70, 2.41)
    rng = random.Random(2)
    obs = []
    for _ in range(9):
        run = rng.uniform(1.2, 2.3)
        ctx = run * rng.uniform(300, 480)
        prompt = rng.uniform(110, 140)
        for kind, weight in (("decode", 100.0), ("prefill", 13.0)):
            share = 0.011 if kind == "decode" else 0.0
            o = Observation(kind, 1.0, weight, run, ctx, prompt, run - 1, share, 2048.0, lengths)
            y = predict_step(o, truth) * rng.uniform(0.92, 1.08)
            obs.append(dataclasses.replace(o, y=y))
    fitted = fit_step(obs, PRIORS)
    assert fitted is not None
    assert fitted.sources["per_token"] == "data"
    assert fitted.model.per_token == pytest.approx(truth.per_token, rel=0.15)
    assert fitted.model.compute_base == 0.0
    for kind in ("decode", "prefill"):
        mine = [o for o in obs if o.kind == kind]
        predicted = sum(predict_step(o, fitted.model) for o in mine)
        assert predicted == pytest.approx(sum(o.y for o in mine), rel=0.05), kind


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record("healthy", tmp_path_factory.mktemp("twin") / "healthy", duration=300, seed=4)


def test_fit_replay_predict_on_a_simulator_recording(healthy: Path) -> None:
    span = from_scrapes(read_scrapes(healthy))
    twin = fit(span)
    assert twin.rate_mean == pytest.approx(span.whole.derived.completion_rate, rel=0.15)
    assert twin.engine.num_gpu_blocks > 0 and twin.sources["num_gpu_blocks"] == "cache_config_info"
    assert any("max_num_seqs not known" in w for w in twin.warnings)
    changes = {"rate_scale": 2.0}
    knobs, notes = knobs_for(twin, changes)
    w = predict(twin, span.whole, changes, knobs, notes=notes, seeds=2)
    assert w.replay_error is not None and w.replay_error < 0.35
    out = w.to_dict()
    assert set(out) == {
        "changes", "baseline", "predicted", "effect", "interval", "fit", "warnings",
        "replay_error", "reliable", "unreliable",
    }  # fmt: skip
    assert out["reliable"] is (out["unreliable"] is None)
    assert out["effect"]["itl_p99"] is not None and out["effect"]["itl_p99"] >= 1.0
    for name in ("ttft_p50", "ttft_p99", "itl_p50", "itl_p99", "waiting_avg", "kv_usage_max"):
        assert out["predicted"][name] is not None, name
    low, high = out["interval"]["ttft_p99"]
    assert low <= out["predicted"]["ttft_p99"] <= high
    # Twice the traffic: more running at once, so more KV in use.
    assert out["predicted"]["kv_usage_max"] > out["baseline"]["kv_usage_max"]
    assert out["fit"]["sources"]["arrival_rate"].startswith("completions")


def test_the_replay_runs_each_window_at_its_speed(healthy: Path) -> None:
    span = from_scrapes(read_scrapes(healthy))
    twin = fit(span)
    assert twin.speed and len(twin.speed) == len(span.tiles)
    assert twin.sources["speed"].startswith("each window's mean inter-token gap")
    half = twin.duration / 2
    steady = dataclasses.replace(twin, speed=((0.0, 1.0),))
    slower = dataclasses.replace(twin, speed=((0.0, 1.0), (half, 1.5)))
    bounds = {"ttft_bounds": (0.01, 0.1, 1.0, 10.0), "itl_bounds": (0.01, 0.1, 1.0)}
    a = run(steady, Knobs(), seed=0, **bounds)
    b = run(slower, Knobs(), seed=0, **bounds)
    assert a.itl_mean is not None and b.itl_mean is not None
    # Half the span at 1.5× the step. Both halves see the same arrivals, so about as many
    # gaps: their mean ≈ 1.25×, and more where the slow half's batch grows (healthy's
    # step grows with the batch).
    assert 1.2 < b.itl_mean / a.itl_mean < 1.6


def test_fewer_slots_than_the_load_needs_builds_a_queue(healthy: Path) -> None:
    span = from_scrapes(read_scrapes(healthy))
    twin = fit(span)
    knobs, _ = knobs_for(twin, {"max_num_seqs": 4})
    w = predict(twin, span.whole, {"max_num_seqs": 4}, knobs, seeds=1)
    assert w.predicted.waiting_avg is not None and w.predicted.waiting_avg > 10
    base, pred = w.baseline.value("ttft_p99"), w.predicted.value("ttft_p99")
    assert base is not None and pred is not None and pred > 10 * base


def test_an_idle_span_cannot_be_fitted(tmp_path: Path) -> None:
    rec = record("healthy", tmp_path / "idle", duration=120, overrides={"workload.rate": 0.0})
    with pytest.raises(FitError, match="no request finished"):
        fit(from_scrapes(read_scrapes(rec)))


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("rate_scale", "expected KEY=VALUE"),
        ("rate=2", "unknown key 'rate'"),
        ("rate_scale=fast", "is not a number"),
        ("max_num_seqs=2.5", "is not an integer"),
        ("max_num_seqs=0", "must be positive"),
        ("prefix_cache_hit_rate=1.5", "in [0, 1)"),
        ("rate_scale=nan", "finite"),
    ],
)
def test_bad_changes_say_why(flag: str, message: str) -> None:
    with pytest.raises(ChangeError, match=re.escape(message)):
        parse_change(flag)


def test_gpu_memory_utilization_needs_the_memory_to_convert(healthy: Path) -> None:
    twin = fit(from_scrapes(read_scrapes(healthy)))
    with pytest.raises(ChangeError, match="num_gpu_blocks"):
        knobs_for(twin, {"gpu_memory_utilization": 0.95})
    knobs, notes = knobs_for(twin, {"gpu_memory_utilization": 0.95}, 48.0, 0.9, 16.0)
    assert knobs.num_gpu_blocks is not None and knobs.num_gpu_blocks > twin.engine.num_gpu_blocks
    assert any("blocks" in n for n in notes)
    assert knobs_for(twin, {"replicas": 4})[0] == Knobs(rate_scale=0.25)


@pytest.mark.parametrize("version", ["0.33", "0.6"])
def test_the_queue_time_starts_when_the_engine_core_reads_the_request(version: str) -> None:
    """vLLM V1 times a request's queue from its QUEUED event, when the engine core reads
    it between two steps: one that arrives during a step waits for the step's end in
    neither the queue nor the prefill. V0 times it from the arrival. The simulator's
    replica books it so (docs/vllm-signals.md, "When vLLM observes")."""
    from app.sim.engine import Replica
    from app.sim.scenario import load

    replica = Replica(load("healthy", {}), seed=3, version=version)
    waits: list[float] = []
    queues: list[float] = []
    replica.on_finish = lambda r, _t: (
        waits.append(r.queued - r.arrival),
        queues.append(r.first_sched - (r.arrival if version == "0.6" else r.queued)),
    )
    replica.advance_to(120.0)
    assert len(waits) > 100 and replica.step_waits == len(waits)
    # Busy: most arrivals land in a step and wait for its end; an idle engine reads at once.
    assert sum(w > 0 for w in waits) > len(waits) / 2 and min(waits) >= 0
    assert replica.step_wait_s == pytest.approx(sum(waits))
    assert replica.metrics.queue.sum == pytest.approx(sum(queues))


def test_the_wait_for_the_step_in_flight_is_not_counted_twice(healthy: Path) -> None:
    """A simulated server has no API server of its own: on its page, e2e − queue −
    prefill − decode is only the wait for the step in flight at each arrival (vLLM's
    engine core books it in neither the queue nor the prefill). The twin's engine TTFT
    holds that wait already, so it takes the replay's own off the measured share and no
    front end is left to add (app.twin.frontend.less_step_wait)."""
    from app.twin.whatif import calibrate

    span = from_scrapes(read_scrapes(healthy))
    twin = fit(span)
    assert twin.frontend.mean > 0.002  # the page's share: the wait, a few ms here
    cal = calibrate(twin, span.whole, seeds=2)
    fe = cal.twin.frontend
    assert fe.mean < 0.25 * twin.frontend.mean, fe
    assert "less the replay's wait for the step in flight" in fe.source


def test_the_front_ends_spread_is_recovered_from_a_ttft_p99() -> None:
    """Engine TTFTs of 3 ms plus lognormal front-end delays of mean 4 ms and σ 0.5: the
    spread whose p99 matches is found again (app.twin.frontend.fit_sigma)."""
    from app.twin.frontend import FrontEnd, fit_sigma, ttft_quantiles

    bounds = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5)
    engine = [0.003] * 4000
    truth = FrontEnd(0.004, 0.5, "truth")
    measured = ttft_quantiles(engine, truth, 99, bounds)[1].value
    assert measured is not None
    runs = [(s, engine) for s in range(3)]
    fitted = fit_sigma(runs, FrontEnd(0.004, 0.7, "prior"), bounds, measured)
    assert abs(fitted.sigma - 0.5) <= 0.11
    p50, _, mean = ttft_quantiles(engine, truth, 1, bounds)
    assert mean is not None and abs(mean - 0.007) < 0.0003  # the mean is kept
    assert p50.value is not None and 0.005 < p50.value < 0.008
