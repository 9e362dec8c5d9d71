"""The evaluation rounds' latest results, kept by a stopping service for the next start.

Inside the service the overview orders its 1,000 cards by the last round's windows,
draws their strips from the rounds' classes and shows the fleets' error budgets from the
last SLO evaluation (``Evaluator.latest_streams``, ``Evaluator.recent``,
``Evaluator.tracker.last``); a fresh process has none of them until its rounds have
run, and computing them itself takes it 1.5 s for the cards and some 17 s for the
budgets of 1,000 fleets. So a service that stops keeps all three in the store (as
Prometheus' ``memory-snapshot-on-shutdown`` keeps its head), and the next start takes
them back — once: the row is deleted as it is read.

They are taken back only as they were meant: from the same phasewatch version and the
same diagnosis configuration, SLOs, fleet grouping and window length (a fingerprint of
them; an SLO changed over the restart and the old diagnoses and budgets are not shown),
and not older than what the strips keep (``RecentClasses.keep_s``). The UI still shows a
latest window only while it is fresh (``app.read.points.FRESH_STEPS``) and budgets while
they are (``app.read.fleetpage.TRACKER_FRESH_S``): after a long stop it computes them
itself. Anything that does not read back whole is dropped with a log line; the service
then starts as it would without it.
"""

from __future__ import annotations

import hashlib
import logging
import pickle
import zlib
from dataclasses import fields
from typing import Any

from app import __version__
from app.diagnose import Diagnosis
from app.evaluate.round import Evaluator
from app.fleet.tracker import SloStatus
from app.model import Window
from app.store.resume import ResumeState, ResumeStore

__all__ = ["NAME", "fingerprint", "keep", "resume"]

log = logging.getLogger(__name__)

NAME = "evaluation"


def fingerprint(evaluator: Evaluator) -> str:
    """What the kept results depend on: the code's version, the diagnosis configuration
    (thresholds and SLOs), the error-budget SLOs and how fleets are grouped, and the
    window length."""
    tracker = evaluator.tracker
    text = (
        f"{__version__}|{evaluator.length!r}|{evaluator.config!r}|"
        f"{tracker.specs!r}|{tracker.group_by!r}"
    )
    return hashlib.sha256(text.encode()).hexdigest()


def keep(evaluator: Evaluator, now: float) -> int:
    """Store the last round's windows, the rounds' recent classes and the last SLO
    evaluation; how many streams."""
    streams = list(evaluator.latest_streams)
    rings = evaluator.recent.rings()
    statuses = list(evaluator.tracker.last)
    if not streams and not rings and not statuses:
        return 0
    kept = (streams, rings, statuses)
    payload = zlib.compress(pickle.dumps(kept, pickle.HIGHEST_PROTOCOL), 1)
    ResumeStore(evaluator.store).put(NAME, ResumeState(now, fingerprint(evaluator), payload))
    return len(streams)


def resume(evaluator: Evaluator, now: float) -> int:
    """Take back what a stopped service kept, if it fits; how many streams it gave."""
    state = ResumeStore(evaluator.store).take(NAME)
    if state is None:
        return 0
    age = now - state.taken
    if state.fingerprint != fingerprint(evaluator):
        log.info("not resuming the last rounds: another version or configuration kept them")
        return 0
    if not 0.0 <= age <= evaluator.recent.keep_s:
        log.info("not resuming the last rounds: kept %.0f s ago", age)
        return 0
    try:
        streams, rings, statuses = _read(state.payload)
    except Exception as exc:  # a payload that does not read back whole is not used
        log.warning("not resuming the last rounds: %s: %s", type(exc).__name__, exc)
        return 0
    if not evaluator.latest_streams:
        evaluator.latest_streams = streams
    evaluator.recent.restore(rings, now)
    if not evaluator.tracker.last:  # the UI's budgets while fresh (``TRACKER_FRESH_S``)
        evaluator.tracker.last = statuses
    log.info("resumed the last round of %d stream(s), kept %.0f s ago", len(streams), age)
    return len(streams)


def _read(
    payload: bytes,
) -> tuple[list[tuple[Window, Diagnosis]], dict[tuple[str, str], tuple[Any, ...]], list[SloStatus]]:
    streams, rings, statuses = pickle.loads(zlib.decompress(payload))  # noqa: S301 - ours
    if not all(isinstance(x, t) for x, t in ((streams, list), (rings, dict), (statuses, list))):
        raise TypeError("unexpected layout")
    for st in statuses:
        if not isinstance(st, SloStatus):
            raise TypeError("unexpected SLO status")
        for f in fields(st):
            getattr(st, f.name)
        for f in fields(st.budget):  # a budget kept before a field was added raises here
            getattr(st.budget, f.name)
    for w, d in streams:
        if not isinstance(w, Window) or not isinstance(d, Diagnosis):
            raise TypeError("unexpected stream entry")
        for f in fields(w):  # every field present (a class changed since raises here)
            getattr(w, f.name)
        d.to_dict()
    for key, judged in rings.items():
        if not (isinstance(key, tuple) and all(isinstance(j, tuple) for j in judged)):
            raise TypeError("unexpected strip entry")
    return streams, rings, statuses
