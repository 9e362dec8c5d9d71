"""``fleet``: how replicas of one model are grouped into fleets, and when one departs
from its peers."""

from __future__ import annotations

from pydantic import Field

from app.config.checks import Strict


class ImbalanceConfig(Strict):
    """When a replica departs from its peers (``app.fleet.imbalance``)."""

    min_replicas: int = Field(2, ge=2, description="fewer replicas with data: no peers")
    load_ratio: float = Field(
        1.5, gt=1, description="running (or waiting) avg >= this x the peers' mean"
    )
    load_min_delta: float = Field(
        2.0, ge=0, description="…and at least this many running requests above it"
    )
    waiting_min: float = Field(1.0, ge=0, description="a queue: waiting avg >= this")
    idle_waiting_max: float = Field(
        0.1, ge=0, description="a peer with waiting avg <= this (and fewer running) is idle"
    )
    kv_spread: float = Field(
        0.3, gt=0, le=1, description="KV usage avg max - min across replicas >= this"
    )
    latency_ratio: float = Field(
        2.0, gt=1, description="TTFT or ITL p99 >= this x the peers' median p99"
    )
    min_observations: int = Field(
        50, ge=1, description="observations each replica needs for its p99 to be compared"
    )
    latency_slo_share: float = Field(
        0.5,
        ge=0,
        description="a latency outlier matters when its p99 is >= this share of its SLO "
        "(or the replica is near its limit: a queue, or kv_near)",
    )
    kv_near: float = Field(
        0.9, gt=0, le=1, description="a replica whose KV usage avg is >= this is near its limit"
    )


class FleetConfig(Strict):
    """Replicas of one model, aggregated (``app.fleet``)."""

    group_by: list[str] = Field(
        default_factory=list,
        description="target labels that split a model's replicas into fleets, e.g. [cluster]",
    )
    imbalance: ImbalanceConfig = Field(
        default_factory=ImbalanceConfig, description="when a replica departs from its peers"
    )
