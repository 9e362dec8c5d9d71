"""The evaluation round: windows of each stream → diagnose → rows → SLO → alert instances.

One round at ``now``. For every target the source knows (asked each round) and every
target with stored streams, but those the source no longer scrapes (``gone``: removed
from the list; their history stays): its latest scrape (a target instance). For every stream the
target exports: the window ``(end - window.length, end]`` diagnosed (a stream instance),
the diagnosis kept as a row to store when the verdict changes, or every minute. For
every SLO and fleet: its burn rates, budget and the fleet's last five minutes, diagnosed
(``SloInputs``). ``end`` is ``now`` minus a Prometheus source's lag (its data is not
there yet); target health is the latest scrape at ``now``.

:func:`judge` turns targets and their windows into instances and diagnoses: the service
(:class:`Evaluator`, over the store) and the replays (``app.evaluate.replay``, over a
recording) both go through it. The alert engine is handed the instances; it owns no
pipeline.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from app.alerts.fields import Instance, ScrapeStatus, reached
from app.config import Settings
from app.diagnose import Diagnosis, DiagnosisConfig, diagnose
from app.evaluate.baseline import StoreBaselines
from app.evaluate.effects import EffectSource, with_effects
from app.evaluate.instances import SloInputs, evaluate_stream, scrape_status, target_input
from app.evaluate.recent import RecentClasses
from app.evaluate.stream import with_page
from app.fleet.specs import imbalance_thresholds, slo_specs
from app.fleet.tracker import SloStatus, SloTracker
from app.model import Window
from app.pacing import BACKGROUND_SHARE, Pacer
from app.sources.base import TargetState
from app.store.diagnoses import DiagnosisRow, DiagnosisStore, should_store
from app.store.sqlite import Store
from app.windows.aggregate import window

__all__ = ["Evaluator", "Judged", "Round", "StreamWindow", "TargetRound", "judge"]

# Streams of a target with no source state (e.g. no longer configured) count as live
# while they have a delta this recent.
STREAM_LIVE_S = 600.0


@dataclass(frozen=True, slots=True)
class StreamWindow:
    """One stream's window of the round, and the target's scrapes inside it."""

    window: Window
    failed_scrapes: int
    attempted_scrapes: int


@dataclass(frozen=True, slots=True)
class TargetRound:
    """One target at the round: its labels, latest scrape and stream windows (which may
    be produced lazily, one at a time)."""

    name: str
    labels: Mapping[str, str]
    status: ScrapeStatus
    streams: Iterable[StreamWindow] = ()
    # Its own staleness, seconds (a probe answers every interval); None: the round's.
    stale_after: float | None = None


@dataclass
class Judged:
    """Every instance of a round (each target's, then its streams'), and each stream's
    window with its diagnosis."""

    instances: list[Instance] = field(default_factory=list)
    streams: list[tuple[Window, Diagnosis]] = field(default_factory=list)


def judge(
    targets: Iterable[TargetRound],
    *,
    now: float,
    config: DiagnosisConfig,
    stale_after: float,
    ui_base_url: str,
    compare: Callable[[Window, Diagnosis], Diagnosis] | None = None,
    fire_on_unproven: bool = False,
) -> Judged:
    """Diagnose every stream window (its SLOs: ``config.slo_for``) and build the target
    and stream instances; a target's scrape is stale after ``stale_after`` seconds.
    ``compare`` adds a problem window's changes against its stream's healthy baseline
    (``app.evaluate.baseline``: the store's in the service, the timeline's in replay)."""
    out = Judged()
    for t in targets:
        tgt = target_input(
            t.name,
            t.status,
            now=now,
            stale_after=stale_after if t.stale_after is None else t.stale_after,
            labels=t.labels,
            ui_base_url=ui_base_url,
        )
        out.instances.append(tgt)
        for s in t.streams:
            diagnosis, inst, _ = evaluate_stream(
                s.window,
                tgt,
                config,
                failed_scrapes=s.failed_scrapes,
                attempted_scrapes=s.attempted_scrapes,
                labels=t.labels,
                ui_base_url=ui_base_url,
                compare=compare,
                fire_on_unproven=fire_on_unproven,
            )
            out.instances.append(inst)
            out.streams.append((s.window, diagnosis))
    return out


@dataclass(frozen=True)
class Round:
    """What one evaluation round produced."""

    now: float
    end: float
    # Targets, streams, then one per SLO and fleet: what the alert rules are evaluated on.
    instances: list[Instance]
    # The diagnoses worth storing (a changed verdict, or a minute since the last row).
    diagnosis_rows: list[DiagnosisRow]
    # Every SLO on every fleet, as the tracker last evaluated them.
    slos: list[SloStatus]
    # The latest window of every live stream, diagnosed (the service's gauges).
    streams: list[tuple[Window, Diagnosis]]
    # The SLOs' first count is still under way: the round has no SLO instance yet, and
    # the SLO alerts are to be held as they are, not cleared (``AlertEngine.evaluate_once``).
    slos_pending: bool = False


class Evaluator:
    """Runs the round over the store for the service; keeps what it last produced."""

    def __init__(
        self,
        store: Store,
        config: DiagnosisConfig,
        slos: SloInputs,
        *,
        targets: Callable[[], Mapping[str, TargetState]],
        length: float,
        stale_after: float,
        closed_after: float,
        ui_base_url: str,
        lag: float = 0.0,
        fire_on_unproven: bool = False,
        gone: Callable[[str], bool] | None = None,
        stale_by_target: Mapping[str, float] | None = None,
    ) -> None:
        self.store = store
        # Thresholds and every stream's SLOs (``app.evaluate.settings.diagnosis_config``).
        self.config = config
        # SLO burn rates and budgets per fleet (shared with the service's gauges and UI).
        self.slos = slos
        self.targets = targets
        self.length = length
        self.stale_after = stale_after
        # Targets whose records come less often than the rounds (probes): their staleness.
        self.stale_by_target = dict(stale_by_target or {})
        # SLO counts of chunks ending this long ago are cached: no scrape adds to them.
        self.closed_after = closed_after
        self.ui_base_url = ui_base_url
        # ``alerts.fire_on_unproven``: the rules' ``fire_on_unproven`` field.
        self.fire_on_unproven = fire_on_unproven
        # Seconds a Prometheus source lags behind (its ingestion delay); 0 when scraping.
        self.lag = lag
        # Targets no longer scraped (removed from the list): not judged, their history kept.
        self.gone = gone
        self.diagnoses = DiagnosisStore(store)
        self._stored = self.diagnoses.latest()
        # Each problem stream's healthy baseline, for what changed (once per run).
        self.baselines = StoreBaselines(store, length=length, config=config)
        self.latest_streams: list[tuple[Window, Diagnosis]] = []
        # Whether a round is under way, and news of its windows (``wait_judged``).
        self._judging = threading.Condition()
        self._running = 0
        self._judged = 0  # rounds of this process that judged their windows
        # Each stream's classes over the last 16 minutes (the overview's strips).
        self.recent = RecentClasses()
        # Hints' predicted effects (the service sets a twin-backed source; app.evaluate.effects).
        self.effects: EffectSource | None = None

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        store: Store,
        config: DiagnosisConfig,
        *,
        targets: Callable[[], Mapping[str, TargetState]],
        ui_base_url: str,
        background_slo: bool = False,
        gone: Callable[[str], bool] | None = None,
    ) -> Evaluator:
        """The service's evaluator. ``ui_base_url``: the UI's resolved address, for links;
        ``background_slo``: refresh SLO burn rates in a thread of their own beside the
        rounds, not inside them."""
        s = settings.storage
        slos = SloInputs(
            store,
            slo_specs(settings),
            config,
            group_by=settings.fleet.group_by,
            latest_s=settings.window.length,
            thresholds=imbalance_thresholds(settings.fleet.imbalance),
            ui_base_url=ui_base_url,
            # Closed hours are counted from roll-ups, which outlive the raw deltas.
            retention_s=max(s.retention_days, s.rollup_retention_days) * 86400.0,
            refresh_s=settings.alerts.slo_evaluation_interval,
            background=background_slo,
        )
        source = settings.source
        interval = settings.scrape.interval
        return cls(
            store,
            config,
            slos,
            targets=targets,
            length=settings.window.length,
            stale_after=max(3.0 * interval, 2.0 * settings.alerts.evaluation_interval),
            closed_after=2.0 * interval,
            ui_base_url=ui_base_url,
            lag=source.lag if source.kind == "prometheus" else 0.0,
            fire_on_unproven=settings.alerts.fire_on_unproven,
            gone=gone,
            # A probe's record comes once an interval, on a round after its answer.
            stale_by_target={
                p.name: p.interval + p.timeout + 2.0 * interval for p in settings.probes
            },
        )

    @property
    def tracker(self) -> SloTracker:
        """The SLO counts cache: one for the alerts, the gauges, the API and the UI."""
        return self.slos.tracker

    def target_labels(self) -> dict[str, dict[str, str]]:
        """Every target's labels: the source's targets, then those with stored streams."""
        out = {name: dict(s.config.labels) for name, s in self.targets().items()}
        for target, _ in self.store.streams():
            out.setdefault(target, {})
        return out

    def _models(self, states: Mapping[str, TargetState], target: str, end: float) -> list[str]:
        state = states.get(target)
        if state is not None:
            return [] if state.last_ok is None else sorted(state.last_ok.streams)
        live = []
        for _, model in self.store.streams(target):
            if self.store.has_deltas(target, model, end - STREAM_LIVE_S, end):
                live.append(model)
        return live

    def _targets(self, now: float, end: float) -> Iterator[TargetRound]:
        length, stale = self.length, self.stale_after
        states = self.targets()
        pace = Pacer(BACKGROUND_SHARE)  # leave the scrape loop its share of the interpreter
        gone = self.gone
        for target, labels in self.target_labels().items():
            if gone is not None and target not in states and gone(target):
                continue
            stale = self.stale_by_target.get(target, self.stale_after)
            records = self.store.scrapes(target, min(end - length, now - stale), now)
            inside = [r for r in records if end - length < r.ts <= end]
            failed = sum(1 for r in inside if not reached(r.error_kind))
            models = self._models(states, target, end)
            streams = self._streams(
                target, models, end, failed, len(inside), pace, states.get(target)
            )
            status = scrape_status(records[-1] if records else None)
            yield TargetRound(target, labels, status, streams, stale)

    def _streams(
        self,
        target: str,
        models: list[str],
        end: float,
        failed: int,
        attempted: int,
        pace: Pacer,
        state: TargetState | None = None,
    ) -> Iterator[StreamWindow]:
        start = end - self.length
        # The server's cache_config_info from its latest page (the hints' settings).
        pages = {} if state is None or state.last_ok is None else state.last_ok.streams
        for model in models:
            pace()
            deltas = self.store.intervals(target, model, start, end)
            w = window(deltas, start=start, end=end, target=target, model_name=model)
            info = pages[model].info if model in pages else {}
            yield StreamWindow(with_page(w, info), failed, attempted)

    def wait_judged(self, timeout: float) -> bool:
        """Wait (at most ``timeout`` s) while a round is under way and none of this
        process has judged its windows yet — the first round after a start (the windows
        kept over a restart may be too old to show): a page that waits is served its
        windows rather than windowing every stream beside it. Whether one has."""
        with self._judging:
            self._judging.wait_for(lambda: self._judged or not self._running, timeout)
            return self._judged > 0

    def run(self, now: float) -> Round:
        """One round at ``now`` (blocking: store reads)."""
        with self._judging:
            self._running += 1
        try:
            return self._run(now)
        finally:
            with self._judging:
                self._running -= 1
                self._judging.notify_all()

    def _run(self, now: float) -> Round:
        end = now - self.lag
        judged = judge(
            self._targets(now, end),
            now=now,
            config=self.config,
            stale_after=self.stale_after,
            ui_base_url=self.ui_base_url,
            compare=(
                self.baselines.judge
                if self.effects is None
                else with_effects(self.effects, self.baselines.judge)
            ),
            fire_on_unproven=self.fire_on_unproven,
        )
        self.baselines.forget((w.target, w.model_name) for w, _ in judged.streams)
        if self.gone is not None:  # the last rows of removed targets' streams
            live, gone = self.targets(), self.gone
            for key in [k for k in self._stored if k[0] not in live and gone(k[0])]:
                del self._stored[key]
        rows = []
        for w, diagnosis in judged.streams:
            cls = str(diagnosis.cls)
            sub = None if diagnosis.sub_cause is None else str(diagnosis.sub_cause)
            key = (w.target, w.model_name)
            if should_store(self._stored.get(key), end, cls, sub):
                self._stored[key] = (end, cls, sub)
                rows.append(DiagnosisRow(*key, w.start, w.end, cls, diagnosis.to_dict()))
        # The pages read the round's windows from here on: a first round's SLO counts
        # (seconds at 1,000 streams after a start with nothing kept) do not hold them up.
        self.latest_streams = judged.streams
        self.recent.add(judged.streams, end)
        with self._judging:
            self._judged += 1
            self._judging.notify_all()
        # One instance per SLO and fleet; chunks are cached once no scrape can add to them.
        slo_instances = self.slos.instances(
            end,
            self.store.streams(),
            self.target_labels(),
            closed_until=end - self.closed_after,
        )
        return Round(
            now,
            end,
            [*judged.instances, *(slo_instances or [])],
            rows,
            list(self.tracker.last),
            judged.streams,
            slo_instances is None,
        )

    def save(self, done: Round) -> None:
        """Store the round's diagnosis rows."""
        self.diagnoses.add(done.diagnosis_rows)

    def stream_windows(self, now: float) -> list[tuple[Window, Diagnosis]]:
        """The latest window of every stored stream that has deltas in it, diagnosed
        (blocking: store reads), as the last round would have, without its instances."""
        length = self.length
        end = now - self.lag
        out = []
        pace = Pacer(BACKGROUND_SHARE)
        live = self.targets()
        for target, model in self.store.streams():
            if self.gone is not None and target not in live and self.gone(target):
                continue
            pace()
            deltas = self.store.intervals(target, model, end - length, end)
            if not deltas:
                continue
            w = window(deltas, start=end - length, end=end, target=target, model_name=model)
            scrapes = self.store.scrapes(target, end - length, end)
            failed = sum(1 for r in scrapes if not r.ok)
            d = diagnose(w, self.config, failed_scrapes=failed, attempted_scrapes=len(scrapes))
            out.append((w, d))
        return out

    def slo_statuses(self, now: float, *, reuse_within: float | None = None) -> list[SloStatus]:
        """Every SLO on every fleet at ``now`` (blocking: store reads; counts cached in the
        tracker); the tracker's last ones when they end within ``reuse_within`` s."""
        end = now - self.lag
        last = self.tracker.last
        if reuse_within is not None and last and end - last[0].end <= reuse_within:
            return last
        return self.tracker.evaluate(
            end,
            self.store.streams(),
            self.target_labels(),
            closed_until=end - self.closed_after,
            # A count that ends while this one waits for it (the rounds' first) serves.
            reuse_from=None if reuse_within is None else end - reuse_within,
        )
