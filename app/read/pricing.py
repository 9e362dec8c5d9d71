"""The what-if twin's answers as the pages show them — a stream's headroom and its hints'
predicted effects — read from the pricing job's cache, never computed in a request.

A twin is seconds of CPU (26 s on a busy machine): a page that fitted one when asked sat
at "computing…" that long after every 5-minute boundary. Here a page reads what the job
(:class:`~app.read.effects.TwinEffects`: the service's, or — where the service runs
none, or over a fixed source — one of the pages' own, worked by a thread) has priced:
this 5-minute bucket's answer, else the previous bucket's (the answer's ``end`` says
which), and asks the job for the stream, queued by how far it is over its SLO, so the
problem streams come first. While nothing is priced it says when the next answer is due
(:meth:`TwinEffects.due_in`), and the page asks again at its next refresh.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from app.diagnose.records import Diagnosis
from app.evaluate.effects import attach, settings_of
from app.model import Window
from app.read.effects import PRICING_SHARE, TwinEffects, cached_effects, rebased
from app.read.headroom import StreamHeadroom, cached_headroom
from app.read.target import UiData
from app.read.twincache import BUCKET_S, Intervals, TwinCache, bucket_end

log = logging.getLogger(__name__)

# The pages' own job prices only what a page asked, at the share a pricing takes while it
# runs (``app.read.effects.PRICING_SHARE``): the pages' requests keep the rest; a larger
# ``whatif.cpu_share`` configured for the service is theirs too.
OWN_SHARE = PRICING_SHARE
OWN_EVERY_S = 2.0
NEEDS_HISTORY = "needs the stored history (not this source)"


@dataclass(frozen=True, slots=True)
class Pending:
    """Nothing priced yet for the stream: when the job expects to have it (``due_at``,
    the source's clock; None: not known), and how many streams it prices first."""

    due_at: float | None
    ahead: int = 0


class PagePricer:
    """The pages' side of the pricing job (module docstring)."""

    def __init__(
        self,
        data: UiData,
        cache: TwinCache,
        job: Callable[[], TwinEffects | None] | None = None,
        share: Callable[[], float] | None = None,
    ) -> None:
        self.data = data
        self.cache = cache
        self._job = job
        # The configured pricing share (``whatif.cpu_share``), where more than OWN_SHARE.
        self._share = share
        self._own: TwinEffects | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def intervals(self) -> Intervals | None:
        found: Intervals | None = getattr(self.data.source, "intervals", None)
        return found

    def job(self) -> TwinEffects | None:
        """The service's job, else the pages' own (started on first use); None without
        the stored history a twin is fitted on."""
        shared = self._job() if self._job is not None else None
        if shared is not None:
            return shared
        intervals = self.intervals
        if intervals is None:
            return None
        with self._lock:
            if self._own is None:
                share = OWN_SHARE if self._share is None else max(OWN_SHARE, self._share())
                self._own = TwinEffects(
                    intervals, self.data.config, self.cache, cpu_share=share, stop=self._stop
                )
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(
                    target=self._run, name="phasewatch-ui-pricing", daemon=True
                )
                self._thread.start()
            return self._own

    def _run(self) -> None:
        while not self._stop.is_set():
            own = self._own
            try:
                if own is not None:
                    own.work()
            except Exception:  # the next ask queues it again; the page says it is due
                log.exception("the pages' twin pricing failed")
            self._stop.wait(OWN_EVERY_S)

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _ask(self, job: TwinEffects, window: Window, d: Diagnosis) -> Pending:
        """Queue the stream (unless priced for this bucket) and say when it is due."""
        job.effects(window, settings_of(d))
        due = job.due_in(window.target, window.model_name)
        if due is None:  # priced since the page looked, or being priced now
            return Pending(self.data.now() + OWN_EVERY_S)
        return Pending(self.data.now() + due[0], due[1])

    def headroom(self, target: str, model: str) -> StreamHeadroom | Pending | str:
        """The stream's headroom, priced (this bucket's, else the last one's, while this
        one's is asked for); else when it is due; a sentence where none can be priced."""
        intervals = self.intervals
        if intervals is None:
            return f"headroom: {NEEDS_HISTORY}"
        now = self.data.now()
        found = cached_headroom(
            intervals, target, model, now=now, config=self.data.config, cache=self.cache
        )
        pending = Pending(None)
        if found is None or found.end < bucket_end(now):
            current = self.data.current(target, model, compare=False)
            job = self.job()
            if current is not None and job is not None:
                pending = self._ask(job, *current)
        return pending if found is None else found

    def effects(self, target: str, model: str) -> Diagnosis | Pending | str | None:
        """The stream's latest diagnosis with its hints' priced effects (this bucket's,
        else the last one's for those not priced yet); when none is, when they are due;
        None: no hint the twin models; a sentence where none can be priced."""
        found = self.data.current(target, model)
        if found is None:
            return None
        window, d = found
        settings = settings_of(d)
        if not settings:
            return None
        if self.intervals is None:
            return f"predicted effects: {NEEDS_HISTORY}"
        config, end = self.data.config, bucket_end(window.end)
        job = self.job()
        if job is not None:  # the job's own reading: rebased, or in the incident's terms
            priced = dict(job.effects(window, settings))
        else:
            priced = rebased(
                cached_effects(self.cache, config, target, model, end, settings), window
            )
        if len(priced) < len(settings) and all(e.backlog is None for e in priced.values()):
            last = cached_effects(self.cache, config, target, model, end - BUCKET_S, settings)
            priced = {**rebased(last, window), **priced}
        if not priced:
            due = None if job is None else job.due_in(target, model)
            return Pending(None) if due is None else Pending(self.data.now() + due[0], due[1])
        return attach(d, priced)


def due_text(p: Pending, now: float | None = None) -> str:
    """``due in about 40 s (3 streams first)`` — or that it is queued, when not known."""
    if p.due_at is None:
        return "queued for the twin"
    wait = max(0.0, p.due_at - (time.time() if now is None else now))
    first = f", {p.ahead} stream(s) with a worse problem first" if p.ahead else ""
    return f"queued for the twin, due in about {wait:.0f} s{first}"
