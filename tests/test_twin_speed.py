"""The server's speed over the span (``app.twin.speed``): what the step time leaves
unexplained window by window (the replay that runs at it: ``test_twin.py``)."""

from __future__ import annotations

import pytest

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
