"""Which problem streams the hints' pricing job takes first (``app.read.effects``): it
cannot price a large fleet every 5 minutes, so the worst breach of an SLO comes first."""

from __future__ import annotations

from app.diagnose.config import DiagnosisConfig
from app.model import IntervalDelta
from app.read.effects import MAX_QUEUED, TwinEffects, urgency
from app.read.twincache import TwinCache
from tests.diagnose_windows import make_window

SETTING = [("max_num_seqs", 64.0)]


def _job() -> tuple[TwinEffects, list[str]]:
    """A job whose twins fail at once (no history), recording the streams it fits."""
    fitted: list[str] = []

    def intervals(target: str, model: str, start: float, end: float) -> list[IntervalDelta]:
        # A stream's pricing reads its history more than once (its headroom, its effects):
        # the order of the streams is what counts.
        if not fitted or fitted[-1] != target:
            fitted.append(target)
        return []

    job = TwinEffects(intervals, DiagnosisConfig(), TwinCache(), cpu_share=1.0, pricing_share=1.0)
    return job, fitted


def _ask(job: TwinEffects, target: str, ttft_p99: float, itl_p99: float = 0.06) -> None:
    w = make_window(
        target=target, ttft=(0.2, ttft_p99, 120, 0.3), itl=(0.03, itl_p99, 24000, 0.032)
    )
    job.effects(w, SETTING)


def test_urgency_is_the_worst_p99_as_a_multiple_of_its_slo() -> None:
    config = DiagnosisConfig()  # TTFT p99 2 s, ITL p99 100 ms
    w = make_window(ttft=(1.0, 7.0, 120, 2.0), itl=(0.03, 0.06, 24000, 0.032))
    assert 2.5 < urgency(w, config) <= 3.75  # TTFT p99 in (5, 7.5] s / 2 s
    w = make_window(ttft=(0.1, 0.5, 120, 0.2), itl=(0.1, 0.4, 24000, 0.2))
    assert urgency(w, config) > 3.0  # ITL p99 in (0.3, 0.4] s / 0.1 s beats TTFT's < 0.25
    assert urgency(make_window(ttft=None, itl=None), config) == 0.0


def test_the_worst_breach_is_priced_first_and_the_newest_among_equals() -> None:
    job, fitted = _job()
    _ask(job, "mild", 3.0)
    _ask(job, "worst", 40.0)
    _ask(job, "older-equal", 0.5)
    _ask(job, "newer-equal", 0.5)
    _ask(job, "bad", 9.0)
    assert job.work() == 5
    assert fitted == ["worst", "bad", "mild", "newer-equal", "older-equal"]


def test_asked_again_a_stream_takes_its_new_urgency_and_is_priced_once() -> None:
    job, fitted = _job()
    _ask(job, "a", 30.0)
    _ask(job, "b", 5.0)
    _ask(job, "a", 1.0)  # a's p99 came down: now b is worse
    assert job.queued == 2
    assert job.work() == 2
    assert fitted == ["b", "a"]


def test_a_long_queue_keeps_the_most_urgent() -> None:
    job, fitted = _job()
    levels = (3.0, 6.0, 9.0, 15.0, 30.0, 60.0, 120.0)  # TTFT p99s in 7 different buckets
    n = 2 * MAX_QUEUED + 1  # the cut comes past twice the bound

    def level(target: str) -> float:
        return levels[int(target[1:]) % len(levels)]

    for i in range(n):
        _ask(job, f"t{i}", levels[i % len(levels)])
    assert job.queued == MAX_QUEUED
    job.work()
    assert len(fitted) == MAX_QUEUED
    priced = [level(t) for t in fitted]
    assert priced == sorted(priced, reverse=True)
    # What was cut were the least urgent: everything priced is at least as bad as the
    # streams dropped.
    dropped = {f"t{i}" for i in range(n)} - set(fitted)
    assert min(priced) >= max(level(t) for t in dropped)
