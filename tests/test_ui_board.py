"""The overview's board (``app.read.board``): computed by one thread at a time and read
by the page's requests, which never compute it."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from app.diagnose.classes import DiagnosisClass
from app.read.board import Board, stripped, with_firing
from app.read.points import Card
from tests.waiting import wait_for


class _D:
    def __init__(self, cls: DiagnosisClass) -> None:
        self.cls = cls


def _card(name: str, cls: DiagnosisClass) -> Card:
    return Card(name, "m", True, None, None, _D(cls))  # type: ignore[arg-type]


class _Data:
    """What the board reads of ``UiData``: its cards (held until ``release`` is set, and
    counted), strips, clock and grid."""

    def __init__(self, cards: list[Card]) -> None:
        self.cards_out = cards
        self.release = threading.Event()
        self.calls = 0
        self.strips_for: list[str] = []
        self.t = 1000.0

    def cards(self, *, judged: Any = None) -> list[Card]:
        self.calls += 1
        self.release.wait(10)
        return list(self.cards_out)

    def with_recent(self, cards: Sequence[Card]) -> list[Card]:
        self.strips_for += [c.target for c in cards]
        return [replace(c, recent=()) for c in cards]

    def now(self) -> float:
        return self.t

    def aligned_end(self, ts: float, step: float | None = None) -> float:
        return ts // 15 * 15


def _board(cards: list[Card], **kw: Any) -> tuple[Board, _Data]:
    data = _Data(cards)
    return Board(data, **kw), data  # type: ignore[arg-type]


def test_a_request_never_waits_for_the_board_and_asks_for_it_once() -> None:
    board, data = _board([_card("a", DiagnosisClass.HEALTHY)])
    assert board.read() is None  # nothing yet: the page says it is being computed
    assert board.read() is None and board.computing
    data.release.set()
    wait_for(lambda: board.read() is not None, 10, "the board")
    assert data.calls == 1, "reads while it was computed started no other computation"
    snap = board.read()
    assert snap is not None and [c.target for c in snap.cards] == ["a"]
    assert snap.end == 990.0


def test_a_newer_window_end_starts_the_next_board_and_the_last_one_is_served_meanwhile() -> None:
    board, data = _board([_card("a", DiagnosisClass.HEALTHY)])
    data.release.set()
    first = board.wait(10)
    assert first is not None and data.calls == 1
    assert board.read() is first and data.calls == 1  # the same window end: no new board
    data.release.clear()
    data.t += 15.0
    assert board.read() is first  # the last board, while the next is computed
    data.release.set()
    wait_for(lambda: board.read() is not first, 10, "the next board")
    assert data.calls == 2


def test_the_board_keeps_the_strips_of_the_first_page_of_problems() -> None:
    cards = [_card(f"p{i}", DiagnosisClass.QUEUE_BOUND) for i in range(3)]
    cards += [_card("h", DiagnosisClass.HEALTHY)]
    board, data = _board(cards, strips=2)
    data.release.set()
    snap = board.refresh()
    assert data.strips_for == ["p0", "p1"]
    assert set(snap.strips) == {("p0", "m"), ("p1", "m")}
    # A card past them gets its strip computed when a page shows it (a second page).
    out = stripped(data, snap, [cards[2]])  # type: ignore[arg-type]
    assert data.strips_for[-1] == "p2" and out[0].recent == ()


def test_firing_alerts_are_attached_at_read_and_put_their_streams_first() -> None:
    cards = [_card("a", DiagnosisClass.QUEUE_BOUND), _card("b", DiagnosisClass.HEALTHY)]
    out = with_firing(cards, {("b", ""): ["TargetDown"], ("b", "m"): ["TTFTOverSLO"]})
    assert [c.target for c in out] == ["b", "a"]
    assert out[0].firing == ("TTFTOverSLO", "TargetDown")
    assert out[1] is cards[0]


def test_a_failed_computation_is_said_and_tried_again() -> None:
    board, data = _board([])
    data.release.set()

    def boom(**_kw: Any) -> list[Card]:
        data.calls += 1
        raise RuntimeError("store closed")

    data.cards = boom  # type: ignore[method-assign]
    board.read()
    wait_for(lambda: board.failed is not None, 10, "the failure")
    assert board.failed == "RuntimeError: store closed"
    wait_for(lambda: not board.computing, 10, "the thread's end")
    board.read()  # the next read tries again
    wait_for(lambda: data.calls == 2, 10, "a second try")
