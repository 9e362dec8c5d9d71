"""The fleet pages' records: how fleets are formed, replicas' chart points, SLO series.

:class:`FleetOptions` is ``Settings.fleet`` and the SLOs as the pages need them; a
:class:`ReplicaPoint` one replica's (or the fleet's) window as the side-by-side charts
draw it; :class:`FleetSeries` and :class:`SloSeries` a fleet over a range;
:class:`FleetSummary` one fleet on the overview. Computed by ``app.read.fleetpage``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from app.config import FleetConfig, Settings, StorageConfig, TargetConfig
from app.fleet.aggregate import FleetKey, fleet_key
from app.fleet.imbalance import DEFAULT_THRESHOLDS, ImbalanceThresholds
from app.fleet.slo import Budget, SloSpec
from app.fleet.specs import imbalance_thresholds, slo_specs
from app.fleet.view import FleetView
from app.model import Quantile, Window


@dataclass(frozen=True)
class FleetOptions:
    """How fleets are formed and judged: ``Settings.fleet`` and ``Settings.slos``."""

    specs: tuple[SloSpec, ...] = ()
    group_by: tuple[str, ...] = ()
    thresholds: ImbalanceThresholds = DEFAULT_THRESHOLDS
    labels_of: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    retention_s: float | None = None

    @classmethod
    def from_config(
        cls,
        fleet: FleetConfig,
        storage: StorageConfig,
        specs: Sequence[SloSpec],
        targets: Sequence[TargetConfig] = (),
    ) -> FleetOptions:
        """The options of the ``fleet`` section; ``specs`` the SLOs
        (:func:`app.fleet.specs.slo_specs`), ``targets`` those whose labels place replicas."""
        return cls(
            specs=tuple(specs),
            group_by=tuple(fleet.group_by),
            thresholds=imbalance_thresholds(fleet.imbalance),
            labels_of={t.name: dict(t.labels) for t in targets},
            retention_s=max(storage.retention_days, storage.rollup_retention_days) * 86400.0,
        )

    @classmethod
    def from_settings(
        cls, settings: Settings, targets: Sequence[TargetConfig] = ()
    ) -> FleetOptions:
        """The options of ``settings``: its fleets and SLOs (``slo_specs``)."""
        return cls.from_config(settings.fleet, settings.storage, slo_specs(settings), targets)

    @classmethod
    def defaults(cls) -> FleetOptions:
        """The default settings' fleets: the built-in SLO, no grouping labels."""
        return cls.from_settings(Settings())


def fleet_name(model: str, labels: Mapping[str, str], group_by: Sequence[str]) -> str:
    """The name of the fleet a stream of ``model`` with ``labels`` belongs to."""
    return fleet_key(model, labels, group_by).name


@dataclass(frozen=True, slots=True)
class ReplicaPoint:
    """One replica's (or the fleet's) window as the side-by-side charts draw it.

    ``flags`` are the imbalance kinds (``load``, ``queue``, ``ttft``…) it was flagged
    for in that window.
    """

    end: float
    ttft_p99: float | None
    ttft_p99_ge: bool
    itl_p99: float | None
    itl_p99_ge: bool
    running_avg: float | None
    waiting_avg: float | None
    kv_avg: float | None
    flags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class FleetSeries:
    """A fleet's replicas over ``(start, end]``: their points and the fleet's, per window."""

    fleet: str
    start: float
    end: float
    length: float
    step: float
    replicas: tuple[str, ...]
    points: Mapping[str, tuple[ReplicaPoint, ...]]
    fleet_points: tuple[ReplicaPoint, ...]
    slo_ttft_p99: float
    slo_itl_p99: float

    @property
    def flagged(self) -> tuple[str, ...]:
        """Replicas flagged in any window of the range."""
        return tuple(r for r in self.replicas if any(p.flags for p in self.points.get(r, ())))


@dataclass(frozen=True, slots=True)
class SloPoint:
    end: float
    attainment: Mapping[str, float | None]
    budget_remaining: float | None
    burn_rate: float | None


@dataclass(frozen=True, slots=True)
class SloSeries:
    """One SLO on one fleet over time: attainment per ``window_s`` and budget left."""

    name: str
    target: float
    objectives: Mapping[str, float]
    window_s: float
    points: tuple[SloPoint, ...]


@dataclass(frozen=True, slots=True)
class FleetBudget:
    """One SLO's budget as a replica's card shows it: the fleet's, named as such."""

    slo: str
    budget: Budget
    fleet: str
    replicas: int


@dataclass(frozen=True, slots=True)
class FleetSummary:
    """One fleet on the overview: its replicas, who is imbalanced, each SLO's budget."""

    key: FleetKey
    members: tuple[str, ...]
    flagged: tuple[str, ...]
    budgets: tuple[tuple[str, Budget], ...]


def _p99(w: Window, signal: str) -> Quantile:
    q = w.quantiles.get(signal, {}).get("p99")
    if q is None or q.value is None or not math.isfinite(q.value):
        return Quantile(None)
    return q


def _avg(w: Window, name: str) -> float | None:
    g = w.gauges.get(name)
    return None if g is None else g.avg


def replica_point(w: Window, flags: Sequence[str] = ()) -> ReplicaPoint:
    """The chart point of one window (a replica's or the fleet's)."""
    t, i = _p99(w, "ttft"), _p99(w, "itl")
    return ReplicaPoint(
        end=w.end,
        ttft_p99=t.value,
        ttft_p99_ge=t.ge_top_bucket,
        itl_p99=i.value,
        itl_p99_ge=i.ge_top_bucket,
        running_avg=_avg(w, "running"),
        waiting_avg=_avg(w, "waiting"),
        kv_avg=_avg(w, "kv_usage"),
        flags=tuple(flags),
    )


def replica_points(view: FleetView) -> dict[str, ReplicaPoint]:
    """Each replica's point in a fleet's window, flagged with its imbalance kinds."""
    kinds: dict[str, list[str]] = {}
    for o in view.imbalance.outliers:
        kinds.setdefault(o.replica, []).append(o.kind)
    return {w.target: replica_point(w, kinds.get(w.target, ())) for w in view.fleet.replicas}
