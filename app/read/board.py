"""The overview's board: every stream's card, computed in the background and read by the
page's requests, which never compute it.

Every stream's latest window and diagnosis is a pass over all of them: inside the service
it reads the evaluation rounds' latest windows (``UiData.cards``), but before the first
round, or over a fixed source, it windows and diagnoses each stream — at 1,000 streams
tens of seconds of CPU, which a request used to spend while the page's refresh ticks
sent the same request again and again (``bench/ui.py`` showed eight of them computing the
same cards at once). So the board is computed by one thread at a time:

* :meth:`Board.read` answers the last board at once. When a newer window end has passed
  since, it starts one computation in the background (none while one runs) and the page
  shows the previous board until the next refresh; before the first, it answers None
  and the page says the board is being computed.
* :meth:`Board.start` computes the first board as the app starts, so the first view
  after a start finds it, or finds it under way.

The fleets' list (replicas, who is imbalanced) is computed with it, from the same
windows. The board holds the cards without their firing alerts (they change between windows and
cost nothing to attach: :func:`with_firing`), and the class strips of the first
``strips`` problem cards (the overview's first page), so a page's strips are read too.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from app.diagnose.classes import DiagnosisClass
from app.diagnose.records import Diagnosis
from app.model import Window
from app.pacing import BACKGROUND_SHARE, Pacer, Stopped, paced
from app.read.fleetpage import FleetData
from app.read.fleetpoints import FleetSummary
from app.read.points import Card, Point, card_rank
from app.read.target import UiData

log = logging.getLogger(__name__)

FINE = (DiagnosisClass.HEALTHY.value, DiagnosisClass.IDLE.value)
STRIPS = 24  # the class strips kept computed: the problem cards of the overview's first page


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Every stream's card as of the window end ``end``; computed at ``at`` (the source's
    clock) in ``took_s`` seconds; ``strips``: the class strips computed with it; the
    fleets' summaries with the budgets counted by then (the page reads newer ones)."""

    cards: tuple[Card, ...]
    end: float
    at: float
    took_s: float
    strips: Mapping[tuple[str, str], tuple[Point, ...]] = field(default_factory=dict)
    # The fleets (replicas, who is imbalanced), from the same windows as the cards.
    fleets: tuple[FleetSummary, ...] = ()


def with_firing(cards: Sequence[Card], firing: Mapping[tuple[str, str], list[str]]) -> list[Card]:
    """``cards`` with their firing alerts (a target's alert without a model counts on each
    of its streams), in the overview's order (:func:`~app.read.points.card_rank`)."""
    out = [
        c
        if not (got := firing.get((c.target, c.model_name), []) + firing.get((c.target, ""), []))
        else replace(c, firing=tuple(got))
        for c in cards
    ]
    out.sort(key=card_rank)
    return out


class Board:
    """The overview's cards, kept by a thread of their own (module docstring)."""

    def __init__(
        self, data: UiData, *, fleets: FleetData | None = None, strips: int = STRIPS
    ) -> None:
        self.data = data
        self.fleets = fleets
        self.strips = strips
        self._snapshot: Snapshot | None = None
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.computed = 0  # boards computed (tests and the bench read it)
        self.failed: str | None = None  # why the last computation failed, if it did

    @property
    def computing(self) -> bool:
        with self._lock:
            return self._thread is not None and self._thread.is_alive()

    def read(self) -> Snapshot | None:
        """The last board (None: none yet); a newer window end starts the next one."""
        snap = self._snapshot
        if snap is None or snap.end < self.data.aligned_end(self.data.now()):
            self.start()
        return snap

    def start(self) -> None:
        """Compute the next board in the background, unless one is being computed."""
        with self._lock:
            if self._stop.is_set() or (self._thread is not None and self._thread.is_alive()):
                return
            self._thread = threading.Thread(
                target=self._run, name="phasewatch-ui-board", daemon=True
            )
            self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def wait(self, timeout: float) -> Snapshot | None:
        """The board once one is computed (at most ``timeout`` seconds: tests, the CLI)."""
        deadline = time.monotonic() + timeout
        while self._snapshot is None and time.monotonic() < deadline:
            with self._lock:
                thread = self._thread
            if thread is None:
                self.start()
                continue
            thread.join(max(0.0, min(0.5, deadline - time.monotonic())))
        return self._snapshot

    def _run(self) -> None:
        try:
            # The requests keep half the interpreter; a stop ends it between streams.
            with paced(Pacer(BACKGROUND_SHARE, stop=self._stop)):
                self.refresh()
        except Stopped:
            return  # the app stops: its store is about to close
        except Exception as exc:  # the next read tries again; the page says why
            self.failed = f"{type(exc).__name__}: {exc}"
            log.exception("the overview's board could not be computed")

    def refresh(self) -> Snapshot:
        """Compute the board now, in the caller's thread (the background thread's body)."""
        t0 = time.perf_counter()
        end = self.data.aligned_end(self.data.now())
        judged: list[tuple[Window, Diagnosis]] = []
        cards = self.data.cards(judged=judged)
        problems = [c for c in cards if c.cls not in FINE][: self.strips]
        strips = {(c.target, c.model_name): c.recent for c in self.data.with_recent(problems)}
        fleets = () if self.fleets is None else self.fleets.summaries(wait=False, judged=judged)
        took = time.perf_counter() - t0
        snap = Snapshot(tuple(cards), end, self.data.now(), took, strips, tuple(fleets))
        self._snapshot = snap
        self.failed = None
        self.computed += 1
        return snap


def stripped(
    data: UiData, snap: Snapshot, cards: Sequence[Card], *, compute: bool = True
) -> list[Card]:
    """``cards`` with their class strips: the board's, else (``compute``) computed now —
    only a page past the first, or a card the firing alerts moved onto the first."""
    out, missing = [], []
    for c in cards:
        got = snap.strips.get((c.target, c.model_name))
        if got is None and c.model_name:
            missing.append(c)
        out.append(c if got is None else replace(c, recent=got))
    if not missing or not compute:
        return out
    done = {(c.target, c.model_name): c for c in data.with_recent(missing)}
    return [done.get((c.target, c.model_name), c) for c in out]
