"""The server's speed over the span (``app.twin.speed``): what the step time leaves
unexplained window by window, and the replay that runs at it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from app.read.whatif import from_scrapes
from app.sim.record import record
from app.sources.recording import read_scrapes
from app.twin.engine import Knobs, run
from app.twin.fit import fit
from app.twin.speed import MAX_FACTOR, timeline
from app.twin.steptime import Observation, StepModel

FLAT = StepModel(0.002, 0.0, 0.0, 0.0)


def _gap(y: float, tile: int, weight: float = 10.0) -> Observation:
    return Observation("decode", y, weight, 4.0, 0.0, tile=tile)


def test_each_window_gets_its_gap_over_the_priced_one_around_a_mean_of_one() -> None:
    obs = [_gap(0.002, 0), _gap(0.0025, 1), _gap(0.0015, 2)]
    speed = timeline(obs, FLAT, [0.0, 30.0, 60.0, 90.0])
    assert [t for t, _ in speed] == [0.0, 30.0, 60.0, 90.0]
    factors = [k for _, k in speed]
    assert factors[:3] == pytest.approx([1.0, 1.25, 0.75])
    assert factors[3] == 1.0  # no inter-token gaps in that window: as the mean


def test_the_mean_is_weighted_as_the_fit_weighs_the_windows() -> None:
    obs = [_gap(0.002, 0, weight=30.0), _gap(0.004, 1, weight=10.0)]
    factors = [k for _, k in timeline(obs, FLAT, [0.0, 30.0])]
    assert 0.75 * factors[0] + 0.25 * factors[1] == pytest.approx(1.0)
    assert factors[1] / factors[0] == pytest.approx(2.0)


def test_a_stray_window_is_bounded_and_one_window_gives_no_timeline() -> None:
    obs = [_gap(0.001, 0), _gap(0.001, 1), _gap(0.001, 2), _gap(0.02, 3)]
    assert max(k for _, k in timeline(obs, FLAT, [0.0, 30.0, 60.0, 90.0])) == MAX_FACTOR
    assert timeline([_gap(0.002, 0)], FLAT, [0.0, 30.0]) == ()
    busy = Observation("busy", 0.004, 10.0, 4.0, 0.0, tile=1)
    assert timeline([_gap(0.002, 0), busy], FLAT, [0.0, 30.0]) == ()


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record("healthy", tmp_path_factory.mktemp("speed") / "healthy", duration=120, seed=3)


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
