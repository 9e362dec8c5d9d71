"""A thin history is refused by the service's twin (``app.twin.history``,
``app.read.twincache``): the headroom and the hints' pricing say how much history there
is and from when they will answer, rather than fit a twin on a few windows."""

from __future__ import annotations

import pytest

from app.diagnose.config import DiagnosisConfig
from app.model import IntervalDelta
from app.read.headroom import stream_headroom
from app.read.twincache import BUCKET_S, LOOKBACK_S, MIN_HISTORY_S, fitted
from app.read.whatif import span_of
from app.sim.record import record
from app.sources.recording import read_scrapes
from app.twin.history import ThinHistory, answer_at, history_of, require

START = 1_764_403_200.0


@pytest.fixture(scope="module")
def recent(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[IntervalDelta], str, str]:
    """Two minutes of a healthy server: all the store holds of it."""
    rec = record("healthy", tmp_path_factory.mktemp("hist") / "r", duration=120, seed=4,
                 start_unix=START)  # fmt: skip
    scrapes = read_scrapes(rec)
    model = sorted(scrapes.deltas)[0]
    return list(scrapes.deltas[model]), scrapes.target, model


def test_a_mostly_empty_span_is_thin_and_says_when_it_will_answer(
    recent: tuple[list[IntervalDelta], str, str],
) -> None:
    deltas, target, model = recent
    end = START + 120
    start = end - LOOKBACK_S
    span = span_of(deltas, start=start, end=end, target=target, model=model)
    h = history_of(span.tiles, start, end)
    assert h.end - h.start == LOOKBACK_S
    assert 90 <= h.busy_s <= 120 and h.busy_s <= h.covered_s <= 125
    with pytest.raises(ThinHistory) as caught:
        require(span.tiles, start, end, MIN_HISTORY_S, BUCKET_S)
    thin = caught.value
    # Every window from now on counting, the next 5-minute span end holds enough.
    assert thin.answer_at == end + BUCKET_S
    text = str(thin)
    assert text.startswith("thin history: ") and "of the last 15 min had traffic" in text
    assert "needs 5 min" in text and "(in 5 min) if the traffic keeps up" in text
    assert thin.to_dict()["need_s"] == MIN_HISTORY_S


def test_an_empty_span_answers_a_bucket_later_or_never() -> None:
    h = history_of([], 0.0, 900.0)
    assert h.busy_s == 0.0
    assert answer_at(h, 300.0, BUCKET_S) == 900.0 + BUCKET_S
    # A span needing more than it can ever hold answers never.
    assert answer_at(h, 2000.0, BUCKET_S) is None


def test_headroom_and_pricing_refuse_it_with_the_history(
    recent: tuple[list[IntervalDelta], str, str],
) -> None:
    deltas, target, model = recent
    now = START + 120  # the bucket's end: the recording's last page is in its span
    now = (now // BUCKET_S + 1) * BUCKET_S
    calls: list[tuple[float, float]] = []

    def intervals(t: str, m: str, start: float, end: float) -> list[IntervalDelta]:
        calls.append((start, end))
        return [d for d in deltas if start < d.end <= end]

    f = fitted(intervals, target, model, now=now, config=DiagnosisConfig())
    assert f.calibration is None and f.error is not None and f.error.startswith("thin history")
    assert f.history is not None and f.history["busy_s"] < MIN_HISTORY_S
    room = stream_headroom(intervals, target, model, now=now, config=DiagnosisConfig())
    assert room.headroom is None and room.error is not None and "thin history" in room.error
    body = room.to_dict()
    assert body["history"]["need_s"] == MIN_HISTORY_S and body["history"]["answer_at"] > now
