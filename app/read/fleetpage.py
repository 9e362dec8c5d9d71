"""The pages' read side of fleets: replicas of one model → side-by-side points, imbalance, SLOs.

The same pure functions as the API (``app.fleet``): fleet windows sum the replicas'
buckets, ``find_imbalance`` names the outlier of every window, and SLO attainment and
budget come from an :class:`~app.fleet.tracker.SloTracker` — the live service's own (so
the page and the alerts read one cache) or one over the recording. Windows are on the
same grid as the target page; a range is cut into at most :data:`FLEET_BUDGET` windows
per replica, and into at most :data:`SLO_POINTS` SLO points. The records it returns are
``app.read.fleetpoints``'.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Sequence
from typing import Protocol

from app.diagnose.config import DiagnosisConfig
from app.diagnose.records import Diagnosis
from app.fleet.aggregate import FleetKey, fleet_window, group_streams
from app.fleet.deltas import DeltaSource
from app.fleet.imbalance import find_imbalance
from app.fleet.pools import imbalance_within_pools, probe_targets, roles_from_labels
from app.fleet.slo import Budget, SloSpec, attainment, window_counts
from app.fleet.tracker import SloStatus, SloTracker, matches
from app.fleet.view import FleetView, fleet_view, view_of
from app.model import Window
from app.probeconfig import PROBE_LABEL
from app.read.fleetpoints import (
    FleetBudget,
    FleetOptions,
    FleetSeries,
    FleetSummary,
    ReplicaPoint,
    SloPoint,
    SloSeries,
    replica_point,
)
from app.read.points import STEPS, fresh_rounds, resolution
from app.read.source import grid_windows

log = logging.getLogger(__name__)

FLEET_BUDGET = 360
SLO_POINTS = 120
FLEET_HISTOGRAMS = ("ttft", "itl")


class FleetSource(DeltaSource, Protocol):
    """What the fleet pages read: deltas, the streams and targets, and the clock."""

    live: bool
    settled: float

    def now(self) -> float: ...

    def streams(self) -> list[tuple[str, str]]: ...

    def targets(self) -> Sequence[object]: ...


# The tracker's own latest statuses (the service refreshes them every
# ``alerts.slo_evaluation_interval``) serve the pages while at most this old.
TRACKER_FRESH_S = 120.0
# How long a page waits for the count it started (seconds) before it answers without it.
COUNT_GRACE_S = 0.25


class FleetData:
    """Fleets over one source (one per Dash app); SLO statuses memoised per window end."""

    def __init__(
        self,
        source: FleetSource,
        config: DiagnosisConfig,
        options: FleetOptions,
        *,
        length: float = 60.0,
        step: float = 15.0,
        tracker: Callable[[], SloTracker] | None = None,
        counted_elsewhere: bool | None = None,
    ) -> None:
        self.source = source
        self.config = config
        self.options = options
        self.length = length
        self.step = step
        own: list[SloTracker] = []

        def make() -> SloTracker:
            if not own:
                own.append(
                    SloTracker(
                        source,
                        options.specs,
                        options.group_by,
                        latest_s=length,
                        retention_s=options.retention_s,
                    )
                )
            return own[0]

        self._tracker = tracker or make
        # Inside the service its jobs count the SLOs (every window step): the pages wait
        # for their count rather than run one of their own beside it (default: whenever
        # the tracker is someone else's).
        self._counted_elsewhere = (
            tracker is not None if counted_elsewhere is None else counted_elsewhere
        )
        # The P/D roles the targets' labels give (``app.fleet.pools``), once.
        self.roles = roles_from_labels(options.labels_of)
        self._lock = threading.Lock()
        self._statuses: tuple[float, list[SloStatus]] | None = None
        self._counter: threading.Thread | None = None  # ``statuses(wait=False)``'s count
        self._closing = threading.Event()
        # Inside the service: the evaluation round's latest window of every stream (as
        # ``UiData.latest``); the overview's fleet list judges imbalance on them while they
        # are fresh instead of windowing every stream again on each refresh.
        self.round_windows: Callable[[], Sequence[tuple[Window, Diagnosis]]] | None = None

    # -- fleets ---------------------------------------------------------------------------
    def groups(self) -> dict[FleetKey, list[str]]:
        """Every fleet and its replicas (live: only targets still configured)."""
        streams = self.source.streams()
        if self.source.live:
            known = {getattr(t, "name", None) for t in self.source.targets()}
            streams = [s for s in streams if s[0] in known]
        return group_streams(streams, self.options.labels_of, self.options.group_by)

    def of_model(self, model: str) -> dict[FleetKey, list[str]]:
        return {k: v for k, v in self.groups().items() if k.model_name == model}

    def specs_for(self, key: FleetKey, members: Sequence[str]) -> list[SloSpec]:
        """The SLOs that select any of the fleet's replicas."""
        labels_of = self.options.labels_of
        return [
            s
            for s in self.options.specs
            if key.model_name not in s.exclude_models
            and any(matches(s.selector, key.model_name, labels_of.get(t, {})) for t in members)
        ]

    def aligned_end(self, ts: float) -> float:
        return math.floor(ts / self.step + 1e-9) * self.step

    def latest(
        self,
        key: FleetKey,
        members: Sequence[str],
        end: float | None = None,
        *,
        diagnose_replicas: bool = True,
        streams: Sequence[tuple[str, str]] | None = None,
    ) -> FleetView:
        """The fleet's window ending at ``end`` (default: the latest one); ``streams``:
        the source's streams where the caller has them (its probes are found there)."""
        e = self.aligned_end(self.source.now()) if end is None else end
        labels_of = self.options.labels_of
        if streams is None:
            streams = self.source.streams()
        return fleet_view(
            self.source,
            key,
            members,
            start=e - self.length,
            end=e,
            config=self.config,
            thresholds=self.options.thresholds,
            diagnose_replicas=diagnose_replicas,
            # A P/D fleet: roles from the targets' labels (else the pages), and the
            # probes of its model for the client's TTFT (``app.fleet.pools``).
            roles=self.roles,
            probes=probe_targets(streams, labels_of, key),
        )

    def series(
        self, key: FleetKey, members: Sequence[str], start: float, end: float
    ) -> FleetSeries:
        """Every replica's points and the fleet's over ``(start, end]``, imbalance per
        window."""
        length, step = resolution(
            start, end, length=self.length, step=self.step, budget=FLEET_BUDGET
        )
        first = (math.floor(start / step) + 1) * step
        last = math.floor(end / step + 1e-9) * step
        per: dict[str, list[Window]] = {}
        if last >= first:
            for t in members:
                deltas = self.source.intervals(t, key.model_name, first - length, last)
                per[t] = grid_windows(
                    deltas,
                    target=t,
                    model=key.model_name,
                    first_end=first,
                    end=last,
                    length=length,
                    step=step,
                    keep=FLEET_HISTOGRAMS,
                )
        points: dict[str, list[ReplicaPoint]] = {t: [] for t in members}
        fleet_points: list[ReplicaPoint] = []
        roles = self.roles
        for ws in zip(*per.values(), strict=True):
            fw = fleet_window(key, ws, start=ws[0].start, end=ws[0].end)
            if not fw.replicas:
                continue
            # A P/D fleet's replicas are compared within their pool (``app.fleet.pools``).
            imbalance = imbalance_within_pools(
                fw.replicas, roles, self.options.thresholds, self.config
            ) or find_imbalance(fw.replicas, self.options.thresholds, self.config)
            kinds: dict[str, list[str]] = {}
            for o in imbalance.outliers:
                kinds.setdefault(o.replica, []).append(o.kind)
            for w in fw.replicas:
                points[w.target].append(replica_point(w, kinds.get(w.target, ())))
            fleet_points.append(replica_point(fw.window))
        slo = self.config.slo_for(key.name, key.model_name)
        return FleetSeries(
            fleet=key.name,
            start=start,
            end=end,
            length=length,
            step=step,
            replicas=tuple(members),
            points={t: tuple(p) for t, p in points.items()},
            fleet_points=tuple(fleet_points),
            slo_ttft_p99=slo.ttft_p99,
            slo_itl_p99=slo.itl_p99,
        )

    # -- SLOs -----------------------------------------------------------------------------
    def _closed(self, end: float) -> float:
        return min(end, self.source.now() - self.source.settled)

    def statuses(self, *, wait: bool = True) -> list[SloStatus]:
        """Every SLO on every fleet at the latest window end (memoised per end).

        ``wait=False`` (the overview): a request never counts every fleet's SLOs — after
        a start with nothing kept, 1,000 streams' counts take seconds. The statuses at
        hand serve (this end's, an earlier end's, the tracker's last; [] before the
        first) while a count runs: the service's, else one in a thread of this object's
        (:attr:`counting`).
        """
        if not self.options.specs:
            return []
        end = self.aligned_end(self.source.now())
        found = self._at_hand(end)
        if found is not None:
            return found
        if wait:
            return self._count(end)
        if not self._counted_elsewhere and not self._closing.is_set():
            with self._lock:
                counter = self._counter
                if counter is None or not counter.is_alive():
                    counter = self._counter = threading.Thread(
                        target=self._count_quietly,
                        args=(end,),
                        name="phasewatch-ui-slo",
                        daemon=True,
                    )
                    counter.start()
            counter.join(COUNT_GRACE_S)  # a small fleet's count is there at once
            found = self._at_hand(end)
            if found is not None:
                return found
        with self._lock:
            held = self._statuses
        return held[1] if held is not None else list(self._tracker().last)

    def _at_hand(self, end: float) -> list[SloStatus] | None:
        """The statuses for ``end`` without counting: this object's for that end, else
        the tracker's last while fresh — inside the service the tracker is the
        evaluator's, refreshed in the background (1,000 fleets cost seconds)."""
        with self._lock:
            held = self._statuses
        if held is not None and held[0] == end:
            return held[1]
        last = self._tracker().last
        if last and min(s.end for s in last) >= end - TRACKER_FRESH_S:
            return list(last)
        return None

    @property
    def counting(self) -> bool:
        """Whether the SLOs are being counted for the pages (``statuses(wait=False)``):
        by a thread of this object's, or inside the service by its jobs, until their
        statuses are fresh."""
        if self._counted_elsewhere:
            return self._at_hand(self.aligned_end(self.source.now())) is None
        counter = self._counter
        return counter is not None and counter.is_alive()

    def wait_counted(self, timeout: float) -> bool:
        """Wait (at most ``timeout`` s) for a count of this object's to end; whether
        none is running."""
        counter = self._counter
        if counter is not None:
            counter.join(timeout)
            return not counter.is_alive()
        return True

    def _count(self, end: float) -> list[SloStatus]:
        groups = self.groups()
        streams = [(t, k.model_name) for k, ms in groups.items() for t in ms]
        out = self._tracker().evaluate(
            end,
            streams,
            self.options.labels_of,
            closed_until=self._closed(end),
            reuse_from=end - TRACKER_FRESH_S,  # the service's round may count them first
            stop=self._closing,
        )
        if self._closing.is_set():
            return out
        with self._lock:
            self._statuses = (end, out)
        return out

    def close(self, timeout: float) -> bool:
        """End a count of this object's between two fleets, before the source it reads
        closes (at most ``timeout`` s); whether it ended."""
        self._closing.set()
        return self.wait_counted(timeout)

    def _count_quietly(self, end: float) -> None:
        try:
            self._count(end)
        except Exception:  # a page keeps the statuses it had; the next refresh tries again
            log.exception("counting the SLOs for the pages failed")

    def fleet_statuses(self, key: FleetKey, members: Sequence[str]) -> list[SloStatus]:
        """Every SLO on one fleet at the latest window end: from the statuses at hand
        while fresh, else counted for this fleet alone (its page waits on its replicas,
        never on every fleet's)."""
        end = self.aligned_end(self.source.now())
        found = self._at_hand(end)
        if found is not None:
            return [s for s in found if s.key == key]
        return self._tracker().fleet_statuses(
            end, key, members, self.options.labels_of, closed_until=self._closed(end)
        )

    def budgets(self, *, wait: bool = True) -> dict[tuple[str, str], list[FleetBudget]]:
        """Per stream (target, model): the budget of every SLO on its fleet, with the
        fleet's name and size — a replica holds none of its own (``wait``: as
        :meth:`statuses`)."""
        out: dict[tuple[str, str], list[FleetBudget]] = {}
        for s in self.statuses(wait=wait):
            held = FleetBudget(s.spec.name, s.budget, s.key.name, len(s.members))
            for t in s.members:
                out.setdefault((t, s.key.model_name), []).append(held)
        return out

    def budgets_of(self, target: str, model: str) -> list[FleetBudget]:
        """The budget of every SLO on the fleet that holds this stream."""
        return self.budgets().get((target, model), [])

    def slo_series(
        self, key: FleetKey, members: Sequence[str], start: float, end: float
    ) -> list[SloSeries]:
        """Attainment and budget left over ``(start, end]`` for each SLO of the fleet."""
        step = next((s for s in STEPS if s >= 60 and (end - start) / s <= SLO_POINTS), STEPS[-1])
        step *= max(1, math.ceil((end - start) / step / SLO_POINTS))  # centuries: still capped
        out = []
        for spec in self.specs_for(key, members):
            rows = self._tracker().series(
                spec,
                key,
                members,
                start=start,
                end=end,
                step=step,
                window_s=step,
                closed_until=self._closed(end),
            )
            points = tuple(
                SloPoint(r["end"], r["attainment"], r["budget_remaining"], r["burn_rate"])
                for r in rows
            )
            out.append(SloSeries(spec.name, spec.target, spec.bounds(), step, points))
        return out

    def attainment_of(self, view: FleetView, spec: SloSpec) -> dict[str, dict[str, float | None]]:
        """Attainment per objective of the fleet (``""``) and of each replica in a view."""
        out = {"": attainment(window_counts(view.fleet.window, spec))}
        for w in view.fleet.replicas:
            out[w.target] = attainment(window_counts(w, spec))
        return out

    # -- overview ---------------------------------------------------------------------------
    def summaries(
        self,
        *,
        wait: bool = True,
        judged: Sequence[tuple[Window, Diagnosis]] | None = None,
    ) -> list[FleetSummary]:
        """Every fleet's replicas, imbalance in the latest window and budgets: from the
        evaluation round's windows where they are fresh for every replica (a fleet with
        probes reads the store: the probes' windows are not the round's), else from
        ``judged`` (the overview's board: each stream's latest window, which it has);
        ``wait``: as :meth:`statuses`."""
        statuses = self.statuses(wait=wait)
        budgets: dict[FleetKey, list[tuple[str, Budget]]] = {}
        for s in statuses:
            budgets.setdefault(s.key, []).append((s.spec.name, s.budget))
        fresh = self._fresh_windows(judged)
        labels_of = self.options.labels_of
        roles = self.roles
        # Only labelled probes can be a fleet's probes (``probe_targets``): the rest are
        # not looked at 1,000 times over.
        streams = [s for s in self.source.streams() if PROBE_LABEL in labels_of.get(s[0], {})]
        out = []
        for key, members in self.groups().items():
            ws = [fresh.get((t, key.model_name)) for t in members]
            known = [w for w in ws if w is not None]
            if len(known) == len(ws) and known and not probe_targets(streams, labels_of, key):
                start, end = known[0].start, known[0].end
                view = view_of(
                    key,
                    known,
                    start,
                    end,
                    self.config,
                    self.options.thresholds,
                    False,
                    roles=roles,
                )
            else:
                view = self.latest(key, members, diagnose_replicas=False, streams=streams)
            flagged = view.imbalance.flagged
            out.append(FleetSummary(key, tuple(members), flagged, tuple(budgets.get(key, ()))))
        return out

    def _fresh_windows(
        self, judged: Sequence[tuple[Window, Diagnosis]] | None = None
    ) -> dict[tuple[str, str], Window]:
        """The round's latest windows (else ``judged``) at most ``FRESH_STEPS`` steps
        behind the latest window end, all of one end (none outside the service and
        without ``judged``)."""
        rounds = [] if self.round_windows is None else self.round_windows()
        end = self.aligned_end(self.source.now())
        got = [w for w, _ in fresh_rounds(rounds, end, self.step, self.length).values()]
        if not got and judged:
            got = [w for w, _ in fresh_rounds(judged, end, self.step, self.length).values()]
        last = max((w.end for w in got), default=None)
        return {(w.target, w.model_name): w for w in got if w.end == last}
