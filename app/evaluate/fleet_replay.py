"""A fleet's recording, window by window: its pools, its client TTFT, its imbalance.

A **fleet recording** is a folder of recordings, one sub-folder per replica (each a
folder of ``<unix-seconds>.prom`` pages, docs/architecture.md; the sub-folder's name is the
target's) — what ``phasewatch sim --record`` writes for a P/D scenario, or a ``curl``
loop per instance during an incident. Every replica is read through the service's own
``process`` step (``app.sources.recording``), windowed over the same ``(end − length,
end]`` every ``step`` s, and the fleet judged as the service and the UI judge it
(``app.fleet.view.view_of``): summed, each replica diagnosed, and — a disaggregated
prefill/decode fleet — by pool, with the client's TTFT and the pool ratio
(``app.fleet.pools``). Roles come from ``roles`` where given, else from the pages.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from app.diagnose import DEFAULT_CONFIG, DiagnosisConfig
from app.fleet.aggregate import FleetKey
from app.fleet.imbalance import DEFAULT_THRESHOLDS, ImbalanceThresholds
from app.fleet.view import FleetView, view_of
from app.model import Window
from app.sources.recording import ReplayedScrapes, list_pages, read_scrapes
from app.windows.aggregate import windows

__all__ = ["FleetReplay", "fleet_folders", "is_fleet_recording", "replay_fleet_recording"]


def fleet_folders(folder: str | Path) -> list[Path]:
    """The replica recordings of a fleet recording (sub-folders holding pages), by name."""
    root = Path(folder)
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and list_pages(p))


def is_fleet_recording(folder: str | Path) -> bool:
    """A folder with no page of its own and at least one replica recording inside."""
    root = Path(folder)
    return root.is_dir() and not list_pages(root) and bool(fleet_folders(root))


@dataclasses.dataclass(frozen=True)
class FleetReplay:
    """Every fleet window of a recording (each a ``FleetView``, oldest first) per model."""

    targets: tuple[str, ...]
    start: float
    end: float
    views: tuple[FleetView, ...]


def _with_info(w: Window, scrapes: ReplayedScrapes) -> Window:
    info = scrapes.info_at(w.model_name, w.end)
    return dataclasses.replace(w, info=info) if info else w


def replay_fleet_recording(
    folder: str | Path,
    *,
    length: float = 60.0,
    step: float = 15.0,
    config: DiagnosisConfig = DEFAULT_CONFIG,
    thresholds: ImbalanceThresholds = DEFAULT_THRESHOLDS,
    roles: Mapping[str, str] | None = None,
) -> FleetReplay:
    """The fleet windows of a fleet recording (module docstring); ValueError when the
    folder holds no replica recording. Each model's replicas form one fleet."""
    folders = fleet_folders(folder)
    if not folders:
        raise ValueError(f"{folder}: no replica recordings (sub-folders of .prom pages)")
    scrapes = [read_scrapes(f, f.name) for f in folders]
    start = min(s.start for s in scrapes)
    end = max(s.end for s in scrapes)
    models = sorted({m for s in scrapes for m in s.deltas})
    views: list[FleetView] = []
    for model in models:
        members = [s for s in scrapes if model in s.deltas]
        per = [
            windows(
                s.deltas[model],
                start=start,
                end=end,
                length=length,
                step=step,
                target=s.target,
                model_name=model,
            )
            for s in members
        ]
        key = FleetKey(model)
        for ws in zip(*per, strict=True):
            ws = tuple(_with_info(w, s) for w, s in zip(ws, members, strict=True))
            views.append(
                view_of(
                    key,
                    ws,
                    ws[0].start,
                    ws[0].end,
                    config,
                    thresholds,
                    True,
                    roles=roles,
                )
            )
    views.sort(key=lambda v: (v.fleet.window.end, v.fleet.key.name))
    return FleetReplay(tuple(s.target for s in scrapes), start, end, tuple(views))
