"""The overview's paging: problems first, a page of cards at most; the table has the rest."""

from __future__ import annotations

import pytest

from app.diagnose.classes import DiagnosisClass
from app.read.points import Card
from app.ui.pages import overview
from app.ui.pages.overview import link_list, page_of, split_page


class _D:
    def __init__(self, cls: DiagnosisClass) -> None:
        self.cls = cls


def _card(name: str, cls: DiagnosisClass) -> Card:
    return Card(name, "m", True, None, None, _D(cls))  # type: ignore[arg-type]


def test_a_large_overview_pages_its_problems_and_leaves_healthy_streams_to_the_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(overview, "CARDS_PER_PAGE", 3)
    cards = [_card(f"p{i}", DiagnosisClass.QUEUE_BOUND) for i in range(4)]
    cards += [_card(f"h{i}", DiagnosisClass.HEALTHY) for i in range(5)]
    shown, pages, words = split_page(cards, 1)
    assert [c.target for c in shown] == ["p0", "p1", "p2"]
    assert pages == 2 and words == "problems 1–3 of 4"
    shown, pages, words = split_page(cards, 2)
    assert [c.target for c in shown] == ["p3"]
    assert words == "problems 4–4 of 4"
    # A page past the last is the last.
    assert split_page(cards, 99)[0] == shown


def test_a_large_healthy_overview_has_no_cards(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(overview, "CARDS_PER_PAGE", 3)
    cards = [_card(f"h{i}", DiagnosisClass.HEALTHY) for i in range(5)]
    assert split_page(cards, 1) == ([], 1, "no stream with a problem")


def test_a_small_overview_is_all_cards() -> None:
    cards = [_card("a", DiagnosisClass.HEALTHY), _card("b", DiagnosisClass.IDLE)]
    shown, pages, words = split_page(cards, 1)
    assert [c.target for c in shown] == ["a", "b"] and pages == 1 and words == "0 problem(s)"


def test_page_of_reads_only_a_positive_number() -> None:
    assert page_of({}) == 1
    assert page_of({"page": "3"}) == 3
    assert page_of({"page": "0"}) == 1
    assert page_of({"page": "-2"}) == 1
    assert page_of({"page": "x"}) == 1
    assert page_of({"page": "9" * 40}) == 1_000_000


def test_link_text_cannot_break_out_of_its_link() -> None:
    out = link_list([("a](javascript:x) [b", "/ui/targets/a"), ("x`<img src=x>", "/ui/targets/b")])
    assert out == "[`a](javascript:x) [b`](</ui/targets/a>) · [``x`<img src=x>``](</ui/targets/b>)"
