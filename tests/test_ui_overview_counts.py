"""The overview's count tells streams with a problem from streams it could not judge
(issue #44 item 6: "6 not healthy" when all six had insufficient data)."""

from __future__ import annotations

import dataclasses

from app.diagnose import diagnose
from app.read.points import Card
from app.ui.pages.overview import counts_text
from tests.diagnose_windows import make_window


def card(cls: str | None, firing: tuple[str, ...] = ()) -> Card:
    d = None if cls is None else dataclasses.replace(diagnose(make_window()), cls=cls)
    return Card("t", "m", True, None, None, d, firing=firing)


def test_streams_without_data_are_not_counted_as_problems() -> None:
    cards = [card(None) for _ in range(6)]
    assert (
        counts_text(cards)
        == "6 stream(s): 0 with a problem, 6 with insufficient data, 0 firing alert(s)"
    )


def test_problems_and_unknowns_are_counted_apart() -> None:
    from app.diagnose import DiagnosisClass as C

    cards = [card(C.HEALTHY), card(C.QUEUE_BOUND, ("A",)), card(C.INSUFFICIENT_DATA), card(C.IDLE)]
    assert counts_text(cards) == (
        "4 stream(s): 1 with a problem, 1 with insufficient data, 1 firing alert(s)"
    )
    assert counts_text(cards[:2]) == "2 stream(s): 1 with a problem, 1 firing alert(s)"
