"""Imbalance: a replica whose load or latency departs from its peers. Pure.

Each replica is compared with its **peers** (the fleet's other replicas in the same
window), never with itself, so with two replicas the other one is the yardstick:

* **load** — running average ≥ ``load_ratio`` × the peers' mean and at least
  ``load_min_delta`` requests above it: the load balancer sends it more work than its
  fair share ``1/N``;
* **queue** — waiting average ≥ ``waiting_min`` and ≥ ``load_ratio`` × the peers' mean;
  worse when a peer sits idle (waiting ≤ ``idle_waiting_max``, fewer running): requests
  wait on one replica while another could start them now;
* **kv_spread** — KV-usage averages differ by ≥ ``kv_spread`` between the fullest and
  the emptiest replica (long contexts or a hot prefix pinned to one replica);
* **ttft** / **itl** — p99 ≥ ``latency_ratio`` × the median of the peers' p99s, each with
  at least ``min_observations`` observations (fewer make a p99 little more than the
  maximum). A latency outlier without a load outlier points at the replica itself
  (hardware, flags, version, a noisy neighbour), not at the routing. Where the SLOs are
  known (``config``) the difference must matter: the replica's p99 at least
  ``latency_slo_share`` of its objective, or the replica near its limit (a queue:
  waiting ≥ ``waiting_min``; its KV pool ≥ ``kv_near`` full; a load or queue finding).
  Replicas far inside their SLO (587 ms against 247 ms under 2 s) are no finding.

Every finding carries its evidence (the value, the threshold it was compared with, the
peers' figure) and the hints that fit it: load-balancer policy, sticky sessions,
prefix-aware routing, or the replica itself. A fleet of fewer than ``min_replicas``
replicas with data has no peers: nothing is flagged.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from app.diagnose.config import DiagnosisConfig
from app.diagnose.records import Evidence, Hint, fmt_value
from app.fleet.routing_hints import HINTS
from app.model import Window

__all__ = [
    "DEFAULT_THRESHOLDS",
    "HINTS",
    "Imbalance",
    "ImbalanceThresholds",
    "Outlier",
    "find_imbalance",
]


@dataclass(frozen=True, slots=True)
class ImbalanceThresholds:
    """When a replica counts as an outlier (defaults justified in docs/fleets.md)."""

    min_replicas: int = 2
    load_ratio: float = 1.5
    load_min_delta: float = 2.0
    waiting_min: float = 1.0
    idle_waiting_max: float = 0.1
    kv_spread: float = 0.3
    latency_ratio: float = 2.0
    min_observations: int = 50
    latency_slo_share: float = 0.5
    kv_near: float = 0.9


@dataclass(frozen=True, slots=True)
class Outlier:
    """One replica departing from its peers in one way (``kind``)."""

    replica: str
    kind: str
    summary: str
    evidence: tuple[Evidence, ...]
    hints: tuple[Hint, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "replica": self.replica,
            "kind": self.kind,
            "summary": self.summary,
            "evidence": [e.to_dict() for e in self.evidence],
            "hints": [h.to_dict() for h in self.hints],
        }


@dataclass(frozen=True, slots=True)
class ReplicaShare:
    """One replica's figures next to its peers'."""

    replica: str
    running_avg: float | None
    running_share: float | None
    waiting_avg: float | None
    kv_avg: float | None
    ttft_p99: float | None
    itl_p99: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "replica": self.replica,
            "running_avg": self.running_avg,
            "running_share": self.running_share,
            "waiting_avg": self.waiting_avg,
            "kv_avg": self.kv_avg,
            "ttft_p99": self.ttft_p99,
            "itl_p99": self.itl_p99,
        }


@dataclass(frozen=True, slots=True)
class Imbalance:
    """The outliers of one fleet window, each replica's share, and the hints, best first."""

    outliers: tuple[Outlier, ...] = ()
    shares: tuple[ReplicaShare, ...] = ()
    fair_share: float | None = None
    hints: tuple[Hint, ...] = field(default=())

    @property
    def flagged(self) -> tuple[str, ...]:
        return tuple(sorted({o.replica for o in self.outliers}))

    @property
    def summary(self) -> str | None:
        if not self.outliers:
            return None
        return "; ".join(o.summary for o in self.outliers)

    def to_dict(self) -> dict[str, Any]:
        return {
            "flagged": list(self.flagged),
            "summary": self.summary,
            "fair_share": self.fair_share,
            "outliers": [o.to_dict() for o in self.outliers],
            "replicas": [s.to_dict() for s in self.shares],
            "hints": [h.to_dict() for h in self.hints],
        }


def _gauge(w: Window, name: str) -> float | None:
    g = w.gauges.get(name)
    return g.avg if g is not None else None


def _p99(w: Window, signal: str, min_obs: int) -> tuple[float | None, bool]:
    q = w.quantiles.get(signal, {}).get("p99")
    if q is None or q.value is None or w.observations.get(signal, 0.0) < min_obs:
        return None, False
    return q.value, q.ge_top_bucket


def _hints(*ids: str) -> tuple[Hint, ...]:
    return tuple(HINTS[i] for i in ids)


def _load(
    w: Window, peers: Sequence[Window], total: float, t: ImbalanceThresholds
) -> Outlier | None:
    mine = _gauge(w, "running")
    others = [v for p in peers if (v := _gauge(p, "running")) is not None]
    if mine is None or not others or total <= 0:
        return None
    mean = statistics.fmean(others)
    threshold = max(t.load_ratio * mean, mean + t.load_min_delta)
    if mine < threshold:
        return None
    share = mine / total
    fair = 1.0 / (len(others) + 1)
    ev = (
        Evidence(
            "imbalance",
            "running_avg",
            mine,
            ">=",
            threshold,
            True,
            "",
            note=f"peers' mean {mean:.3g}",
        ),
        Evidence(
            "imbalance", "running_share", share, ">", fair, True, "ratio", note="fair share 1/N"
        ),
    )
    summary = (
        f"{w.target} runs {mine:.3g} requests on average, {share:.0%} of the fleet's "
        f"(fair share {fair:.0%}; peers {mean:.3g})"
    )
    return Outlier(
        w.target,
        "load",
        summary,
        ev,
        _hints("lb_least_request", "sticky_sessions", "prefix_routing"),
    )


def _queue(w: Window, peers: Sequence[Window], t: ImbalanceThresholds) -> Outlier | None:
    mine = _gauge(w, "waiting")
    others = [(p, v) for p in peers if (v := _gauge(p, "waiting")) is not None]
    if mine is None or mine < t.waiting_min or not others:
        return None
    mean = statistics.fmean(v for _, v in others)
    if mine < t.load_ratio * mean:
        return None
    running = _gauge(w, "running")
    idle = [
        p.target
        for p, v in others
        if v <= t.idle_waiting_max
        and running is not None
        and (r := _gauge(p, "running")) is not None
        and r < running
    ]
    ev = [
        Evidence(
            "imbalance",
            "waiting_avg",
            mine,
            ">=",
            t.waiting_min,
            True,
            "",
            note=f"peers' mean {mean:.3g}",
        ),
    ]
    if idle:
        ev.append(
            Evidence(
                "imbalance",
                "idle_peers",
                float(len(idle)),
                ">",
                0.0,
                True,
                "",
                note=f"no queue and fewer running: {', '.join(idle)}",
            )
        )
        summary = (
            f"{w.target} has {mine:.3g} requests waiting on average while "
            f"{', '.join(idle)} {'has' if len(idle) == 1 else 'have'} none and spare slots"
        )
    else:
        summary = f"{w.target} has {mine:.3g} requests waiting on average (peers {mean:.3g})"
    return Outlier(
        w.target,
        "queue",
        summary,
        tuple(ev),
        _hints("lb_least_request", "sticky_sessions", "prefix_routing"),
    )


def _kv_spread(replicas: Sequence[Window], t: ImbalanceThresholds) -> Outlier | None:
    known = [(v, w.target) for w in replicas if (v := _gauge(w, "kv_usage")) is not None]
    if len(known) < 2:
        return None
    (low, low_t), (high, high_t) = min(known), max(known)
    spread = high - low
    if spread < t.kv_spread:
        return None
    ev = (
        Evidence(
            "imbalance",
            "kv_spread",
            spread,
            ">=",
            t.kv_spread,
            True,
            "ratio",
            note=f"{high_t} {high:.0%}, {low_t} {low:.0%}",
        ),
    )
    summary = f"KV cache {high:.0%} used on {high_t} but {low:.0%} on {low_t}"
    return Outlier(
        high_t,
        "kv_spread",
        summary,
        ev,
        _hints("prefix_routing", "sticky_sessions", "lb_least_request"),
    )


def _matters(
    w: Window,
    signal: str,
    mine: float,
    t: ImbalanceThresholds,
    config: DiagnosisConfig,
) -> Evidence:
    """Whether a latency difference matters (module docstring), as evidence: its share
    of the replica's SLO, or what says the replica is near its limit."""
    slo = config.slo_for(w.target, w.model_name)
    objective = slo.ttft_p99 if signal == "ttft" else slo.itl_p99
    share = mine / objective if objective > 0 else 0.0
    waiting, kv = _gauge(w, "waiting"), _gauge(w, "kv_usage")
    if share < t.latency_slo_share and waiting is not None and waiting >= t.waiting_min:
        return Evidence(
            "imbalance", "waiting_avg", waiting, ">=", t.waiting_min, True, "",
            note="near its limit: a queue",
        )  # fmt: skip
    if share < t.latency_slo_share and kv is not None and kv >= t.kv_near:
        return Evidence(
            "imbalance", "kv_avg", kv, ">=", t.kv_near, True, "ratio",
            note="near its limit: its KV pool",
        )  # fmt: skip
    return Evidence(
        "imbalance", f"{signal}_slo_share", share, ">=", t.latency_slo_share,
        share >= t.latency_slo_share, "ratio", note=f"of its {fmt_value(objective, 's')} SLO",
    )  # fmt: skip


def _latency(
    w: Window,
    peers: Sequence[Window],
    signal: str,
    t: ImbalanceThresholds,
    loaded: bool,
    config: DiagnosisConfig | None = None,
) -> Outlier | None:
    mine, ge = _p99(w, signal, t.min_observations)
    others = [v for p in peers if (v := _p99(p, signal, t.min_observations)[0]) is not None]
    if mine is None or not others:
        return None
    median = statistics.median(others)
    if median <= 0 or mine < t.latency_ratio * median:
        return None
    # Without SLOs every difference is a finding; a load or queue finding is its limit.
    why = None if config is None or loaded else _matters(w, signal, mine, t, config)
    if why is not None and not why.holds:
        return None
    name = "TTFT" if signal == "ttft" else "ITL"
    ev = (
        Evidence(
            "imbalance",
            f"{signal}_p99",
            mine,
            ">=",
            t.latency_ratio * median,
            True,
            "s",
            ge,
            note=f"{t.latency_ratio:g}× the peers' median {fmt_value(median, 's')}",
        ),
        *(() if why is None else (why,)),
    )
    summary = (
        f"{w.target} {name} p99 {fmt_value(mine, 's', ge)} is {mine / median:.1f}× its "
        f"peers' median {fmt_value(median, 's')}"
    )
    hints = (
        _hints("lb_least_request", "sticky_sessions", "slow_replica")
        if loaded
        else _hints("slow_replica", "lb_least_request")
    )
    return Outlier(w.target, signal, summary, ev, hints)


def find_imbalance(
    replicas: Sequence[Window],
    thresholds: ImbalanceThresholds | None = None,
    config: DiagnosisConfig | None = None,
) -> Imbalance:
    """The outliers among one fleet's replica windows (all over the same window);
    ``config`` gives each replica's SLOs, which a latency finding must matter against."""
    t = thresholds or ImbalanceThresholds()
    live = [w for w in replicas if w.intervals > 0 or w.gauges]
    running = [v for w in live if (v := _gauge(w, "running")) is not None]
    total = sum(running)
    fair = 1.0 / len(live) if live else None
    shares = tuple(
        ReplicaShare(
            w.target,
            _gauge(w, "running"),
            (r / total) if (r := _gauge(w, "running")) is not None and total > 0 else None,
            _gauge(w, "waiting"),
            _gauge(w, "kv_usage"),
            _p99(w, "ttft", 1)[0],
            _p99(w, "itl", 1)[0],
        )
        for w in live
    )
    if len(live) < max(2, t.min_replicas):
        return Imbalance((), shares, fair)
    outliers: list[Outlier] = []
    for w in live:
        peers = [p for p in live if p is not w]
        load = _load(w, peers, total, t)
        queue = _queue(w, peers, t)
        outliers.extend(o for o in (load, queue) if o is not None)
        loaded = load is not None or queue is not None
        for signal in ("ttft", "itl"):
            found = _latency(w, peers, signal, t, loaded, config)
            if found is not None:
                outliers.append(found)
    spread = _kv_spread(live, t)
    if spread is not None:
        outliers.append(spread)
    hints: list[Hint] = []
    for o in outliers:
        hints.extend(h for h in o.hints if h not in hints)
    return Imbalance(tuple(outliers), shares, fair, tuple(hints))


DEFAULT_THRESHOLDS = ImbalanceThresholds()
