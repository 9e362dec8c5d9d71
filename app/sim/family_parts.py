"""What a simulated metric family is made of: ``Family``, ``Child``, ``Source`` and the
value readers every version's family list (``families``, ``families_v0``) is built from.

A family is data over a replica's state: each child holds a label set and a function
that reads its value when the page is rendered (``app.sim.exposition``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.sim.metrics import Hist, MetricState

__all__ = ["Child", "Family", "HistValue", "Source", "Value", "const", "reader"]

Value = Callable[[], float]

HistValue = Callable[[], Hist]


@dataclass(slots=True)
class Child:
    labels: dict[str, str]
    value: Value | HistValue
    visible: Callable[[], bool] | None = None


@dataclass(slots=True)
class Family:
    kind: str  # gauge | counter | histogram
    name: str  # counters without _total
    help: str
    children: list[Child]
    created: bool


class Source:
    """What the families read: the metric state plus the engine's live gauges."""

    def __init__(
        self,
        metrics: MetricState,
        running: Value,
        waiting: Value,
        kv_usage: Value,
        cache_labels: dict[str, str],
        deferred: Value | None = None,
        connector: Any = None,
        kv_fetch: dict[str, Value] | None = None,
    ) -> None:
        self.m = metrics
        self.running = running
        self.waiting = waiting
        self.kv_usage = kv_usage
        self.cache_labels = cache_labels
        # Waiting requests deferred (their KV not here yet); the rest wait for capacity.
        self.deferred = deferred or const(0.0)
        # A KV connector's metric state (``app.sim.connector.ConnectorState``; None: no
        # connector) and, on a KV consumer, its waiting requests per KV-load stage.
        self.connector = connector
        self.kv_fetch = kv_fetch


def const(v: float) -> Value:
    """A reader of the constant ``v``."""
    return lambda: v


def reader(d: dict[str, float], key: str) -> Value:
    """A reader of ``d[key]`` (as it is when the page is rendered)."""
    return lambda: d[key]
