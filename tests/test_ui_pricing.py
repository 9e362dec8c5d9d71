"""The twin's answers on the pages (``app.read.pricing``): read from the pricing job's
cache, never fitted for a page; a stream not priced yet is asked for and the page says
when its answer is due."""

from __future__ import annotations

from typing import Any

from app.diagnose.classify import diagnose
from app.diagnose.config import DiagnosisConfig
from app.model import IntervalDelta, Window
from app.read.effects import FIRST_GUESS_S, TwinEffects
from app.read.headroom import StreamHeadroom, _key
from app.read.pricing import PagePricer, Pending, due_text
from app.read.twincache import BUCKET_S, TwinCache, bucket_end
from tests.diagnose_windows import make_window

NOW = 1_060.0 + 3 * BUCKET_S  # 1,960: the window below ends at 1,060


def _no_history(target: str, model: str, start: float, end: float) -> list[IntervalDelta]:
    return []


class _Source:
    intervals = staticmethod(_no_history)


class _Data:
    """What the pricer reads of ``UiData``: its clock, config, source and each stream's
    latest window."""

    def __init__(self, windows: dict[str, Window]) -> None:
        self.config = DiagnosisConfig()
        self.source = _Source()
        self.windows = windows

    def now(self) -> float:
        return NOW

    def current(self, target: str, model: str, *, compare: bool = True) -> Any:
        w = self.windows.get(target)
        return None if w is None else (w, diagnose(w, self.config))


def _pricer(**windows: Window) -> tuple[PagePricer, TwinEffects, TwinCache]:
    cache = TwinCache()
    data = _Data(windows)
    job = TwinEffects(_no_history, data.config, cache, cpu_share=0.5, clock=lambda: 0.0)
    return PagePricer(data, cache, lambda: job), job, cache  # type: ignore[arg-type]


def test_a_stream_not_priced_yet_is_asked_for_and_its_answer_said_due() -> None:
    calm = make_window(target="calm", ttft=(0.2, 0.5, 120, 0.3))
    worse = make_window(target="worse", ttft=(1.0, 9.0, 120, 3.0))
    pricer, job, _ = _pricer(calm=calm, worse=worse)
    assert isinstance(pricer.headroom("worse", "llama"), Pending)
    got = pricer.headroom("calm", "llama")
    assert isinstance(got, Pending)
    assert job.queued == 2, "each page's stream is queued for the job, not fitted"
    # The stream over its SLO is priced first: the calm one waits for it and itself.
    assert got.ahead == 1
    assert got.due_at == NOW + 2 * FIRST_GUESS_S / 0.5
    assert due_text(got, NOW) == (
        "queued for the twin, due in about 6 s, 1 stream(s) with a worse problem first"
    )


def test_the_last_buckets_answer_is_shown_while_this_ones_is_asked_for() -> None:
    w = make_window(target="a")
    pricer, job, cache = _pricer(a=w)
    last = bucket_end(NOW) - BUCKET_S
    room = StreamHeadroom("a", "llama", last - 900.0, last, None, "thin history")
    cache.get(_key(DiagnosisConfig(), "a", "llama", last, {}), lambda: room)
    assert pricer.headroom("a", "llama") is room
    assert job.queued == 1, "this bucket's answer is asked for meanwhile"
    # This bucket's, once priced, is the answer; nothing more is asked.
    now_room = StreamHeadroom("a", "llama", last + BUCKET_S - 900.0, last + BUCKET_S, None, "x")
    cache.get(_key(DiagnosisConfig(), "a", "llama", bucket_end(NOW), {}), lambda: now_room)
    before = job.queued
    assert pricer.headroom("a", "llama") is now_room
    assert job.queued == before


def test_a_source_without_stored_history_says_so() -> None:
    pricer, _, _ = _pricer()
    pricer.data.source = object()  # type: ignore[assignment]
    assert pricer.headroom("a", "llama") == ("headroom: needs the stored history (not this source)")
