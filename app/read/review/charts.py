"""The review's charts: each stream's timeline over the reviewed range, read the way the
pages read it (``app.read.target``), for ``phasewatch review --html``."""

from __future__ import annotations

from collections.abc import Mapping

from app.diagnose.config import DiagnosisConfig
from app.read.points import Timeline
from app.read.review.report import Review
from app.read.source import load_history
from app.read.target import UiData
from app.sources.prometheus import TargetHistory


def review_timelines(
    history: Mapping[str, TargetHistory],
    review: Review,
    config: DiagnosisConfig,
    *,
    length: float,
    step: float,
    label: str,
    limit: int,
) -> dict[tuple[str, str], Timeline]:
    """The timelines of the review's first ``limit`` streams, from the history it read
    (``label`` names its source)."""
    stored = load_history(history, start=review.start, end=review.end, label=label)
    data = UiData(stored, config, length=length, step=step)
    return {
        (s.target, s.model_name): data.timeline(s.target, s.model_name, review.start, review.end)
        for s in review.streams[:limit]
    }
