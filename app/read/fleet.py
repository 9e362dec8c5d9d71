"""The fleet read side shared by the API and the UI: stored deltas → fleet windows → JSON.

Window ends are multiples of ``step`` (as in :func:`app.read.windows.stream_windows`),
and every replica is windowed over exactly the same ``(end − length, end]``
(:mod:`app.fleet.view`).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence

from app.diagnose import DiagnosisConfig
from app.fleet.aggregate import FleetKey, group_streams
from app.fleet.deltas import DeltaSource
from app.fleet.imbalance import ImbalanceThresholds
from app.fleet.view import FleetView, view_of
from app.read.windows import LATEST_TIME, check_answer_size, check_windows, stop_if
from app.windows.aggregate import windows

__all__ = ["find_fleet", "fleet_views", "fleets"]


def fleets(
    streams: Sequence[tuple[str, str]],
    labels_of: Mapping[str, Mapping[str, str]],
    group_by: Sequence[str] = (),
) -> dict[FleetKey, list[str]]:
    """Every fleet and its member targets."""
    return group_streams(streams, labels_of, group_by)


def find_fleet(groups: Mapping[FleetKey, list[str]], name: str) -> tuple[FleetKey, list[str]]:
    """A fleet by its name (``llama``, ``llama{cluster=eu-1}``); KeyError when unknown."""
    for key, members in groups.items():
        if key.name == name:
            return key, members
    raise KeyError(name)


def fleet_views(
    source: DeltaSource,
    key: FleetKey,
    members: Sequence[str],
    *,
    start: float,
    end: float,
    length: float,
    step: float,
    config: DiagnosisConfig,
    thresholds: ImbalanceThresholds,
    diagnose_replicas: bool = False,
    max_length: float = LATEST_TIME,
    max_bytes: int | None = None,
    cancel: threading.Event | None = None,
    roles: Mapping[str, str] | None = None,
) -> list[FleetView]:
    """Fleet windows of ``length`` ending every ``step`` in ``(start, end]``, oldest first.

    Checked whole before any work (:func:`app.read.windows.check_windows`: every member's
    windows count against the cap; :func:`app.read.windows.check_answer_size`: each fleet
    window, replicas aside, against ``max_bytes``); :class:`app.read.windows.Cancelled` is
    raised between members and between fleet windows once ``cancel`` is set. ``roles``: a
    P/D fleet's replica roles from the targets' labels (the others' from their pages).
    """
    n = check_windows(start, end, length, step, streams=len(members), max_length=max_length)
    check_answer_size(n, [("", key.model_name)], max_bytes)
    first_end = min((math.floor(start / step) + 1) * step, end)
    per_member = []
    for t in members:
        stop_if(cancel)
        per_member.append(
            windows(
                source.intervals(t, key.model_name, first_end - length, end),
                start=first_end - length,
                end=end,
                length=length,
                step=step,
                target=t,
                model_name=key.model_name,
            )
        )
    out = []
    for ws in zip(*per_member, strict=True):
        stop_if(cancel)
        out.append(
            view_of(
                key, ws, ws[0].start, ws[0].end, config, thresholds, diagnose_replicas, roles=roles
            )
        )
    return out
