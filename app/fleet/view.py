"""A fleet over one window: its replicas summed, diagnosed, their imbalance, SLO figures.

Pure apart from reading deltas through a ``DeltaSource``: every replica is windowed over
exactly the same ``(start, end]``. The evaluation round reads it for the SLO alerts
(``app.evaluate.instances``), the API and the UI to show a fleet (``app.read.fleet``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.diagnose import Diagnosis, DiagnosisConfig, diagnose
from app.fleet.aggregate import FleetKey, FleetWindow, fleet_window
from app.fleet.deltas import DeltaSource
from app.fleet.imbalance import Imbalance, ImbalanceThresholds, find_imbalance
from app.fleet.pools import PDView, pd_view, pool_aware_imbalance
from app.fleet.slo import SloSpec, attainment, goodput, window_counts
from app.model import Window
from app.windows.aggregate import window
from app.windows.flat import window_to_dict

__all__ = ["FleetView", "fleet_view", "slo_view", "view_of"]


class FleetView:
    """One fleet window with its diagnosis and imbalance (what the API and UI show), and,
    when asked for, each replica's own diagnosis of the same window (``per_replica``).
    ``pd``: a disaggregated prefill/decode fleet's pools, client TTFT and pool ratio
    (``app.fleet.pools``; None for a fleet of replicas that each serve both phases)."""

    __slots__ = ("fleet", "diagnosis", "imbalance", "per_replica", "pd")

    def __init__(
        self,
        fleet: FleetWindow,
        diagnosis: Diagnosis,
        imbalance: Imbalance,
        per_replica: Mapping[str, Diagnosis] | None = None,
        pd: PDView | None = None,
    ) -> None:
        self.fleet = fleet
        self.diagnosis = diagnosis
        self.imbalance = imbalance
        self.per_replica: dict[str, Diagnosis] = dict(per_replica or {})
        self.pd = pd

    def to_dict(self, slos: Sequence[SloSpec] = ()) -> dict[str, Any]:
        fw = self.fleet
        out = window_to_dict(fw.window)
        out["fleet"] = fw.key.name
        out["labels"] = dict(fw.key.labels)
        out["replicas_up"] = len(fw.replicas)
        out["absent"] = list(fw.absent)
        out["notes"] = [
            *fw.notes,
            "running_max and waiting_max add the replicas' maxima: an upper bound",
            "kv_avg is the mean of the replicas' averages, kv_max the highest replica's",
        ]
        out["diagnosis"] = _diagnosis(self.diagnosis)
        out["imbalance"] = self.imbalance.to_dict()
        out["slo"] = [_slo_block(fw.window, spec) for spec in slos]
        out["replicas"] = [
            _replica(w, slos, self.imbalance, self.per_replica.get(w.target)) for w in fw.replicas
        ]
        out["pd"] = None if self.pd is None else self.pd.to_dict()
        if self.pd is not None:
            out["notes"].append(
                "a P/D fleet: its summed TTFT mixes the prefill and decode instances' own "
                "TTFTs; read the pools and the client's TTFT (pd)"
            )
        return out


def _diagnosis(d: Diagnosis) -> dict[str, Any]:
    return {
        "class": str(d.cls),
        "sub_cause": None if d.sub_cause is None else str(d.sub_cause),
        "confidence": d.confidence,
        "summary": d.summary,
        "hints": [h.to_dict() for h in d.hints[:3]],
    }


def _replica(
    w: Window, slos: Sequence[SloSpec], imbalance: Imbalance, d: Diagnosis | None
) -> dict[str, Any]:
    out = window_to_dict(w)
    out["flagged"] = w.target in imbalance.flagged
    if d is not None:
        out["diagnosis"] = _diagnosis(d)
    out["slo"] = [_slo_block(w, spec) for spec in slos]
    return out


def _slo_block(w: Window, spec: SloSpec) -> dict[str, Any]:
    counts = window_counts(w, spec)
    seconds = w.covered if w.covered > 0 else w.end - w.start
    return {
        "slo": spec.name,
        "attainment": attainment(counts),
        "interpolated": sorted(k for k, t in counts.tallies.items() if t.interpolated),
        "error_share": counts.share("error"),
        "abort_share": counts.share("abort"),
        "goodput": goodput(counts, spec, seconds).to_dict(),
        "counts": counts.to_dict(),
    }


def slo_view(w: Window, spec: SloSpec) -> dict[str, Any]:
    """Attainment, error/abort share and goodput of one window for one SLO."""
    return _slo_block(w, spec)


def view_of(
    key: FleetKey,
    members: Sequence[Window],
    start: float,
    end: float,
    config: DiagnosisConfig,
    thresholds: ImbalanceThresholds,
    diagnose_replicas: bool,
    *,
    roles: Mapping[str, str] | None = None,
    probes: Sequence[Window] = (),
) -> FleetView:
    """The fleet of the replica windows ``members`` over ``(start, end]``, diagnosed;
    a P/D fleet (``roles``, else the pages) also by pool, its client TTFT measured by
    the ``probes`` windows of the model where there are any."""
    fw = fleet_window(key, members, start=start, end=end)
    per_replica = {w.target: diagnose(w, config) for w in fw.replicas} if diagnose_replicas else {}
    pd = pd_view(key, fw.replicas, start=start, end=end, config=config, roles=roles, probes=probes)
    imbalance = (
        find_imbalance(fw.replicas, thresholds, config)
        if pd is None
        else pool_aware_imbalance(pd, thresholds, config)
    )
    return FleetView(fw, diagnose(fw.window, config), imbalance, per_replica, pd)


def fleet_view(
    source: DeltaSource,
    key: FleetKey,
    members: Sequence[str],
    *,
    start: float,
    end: float,
    config: DiagnosisConfig,
    thresholds: ImbalanceThresholds,
    diagnose_replicas: bool = False,
    roles: Mapping[str, str] | None = None,
    probes: Sequence[str] = (),
) -> FleetView:
    """The fleet over ``(start, end]``, diagnosed, with its imbalance (and each replica
    diagnosed with ``diagnose_replicas``); ``roles`` and ``probes`` (targets) as in
    :func:`view_of`."""

    def of(t: str) -> Window:
        return window(
            source.intervals(t, key.model_name, start, end),
            start=start,
            end=end,
            target=t,
            model_name=key.model_name,
        )

    ws = [of(t) for t in members]
    return view_of(
        key,
        ws,
        start,
        end,
        config,
        thresholds,
        diagnose_replicas,
        roles=roles,
        probes=[of(t) for t in probes],
    )
