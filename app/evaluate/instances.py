"""Windows, diagnoses and scrape health → the instances rules are evaluated on.

Shared by the service's evaluation round and the replays (``app.evaluate.round``,
``app.evaluate.replay``), so both judge the same fields the same way. Pure apart from
``SloInputs``, which reads deltas through a ``DeltaSource`` (the store, or a recording
in memory); the caller passes the time.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from app.alerts.fields import (
    BURN_WINDOW_LABELS,
    TOP_HINTS,
    Instance,
    ScrapeStatus,
    fleet_link,
    slo_instance,
    stream_fields,
    stream_instance,
    target_fields,
    target_instance,
)
from app.diagnose import Diagnosis, DiagnosisConfig
from app.evaluate.stream import judge_window
from app.fleet.budget import budget_text
from app.fleet.deltas import DeltaSource
from app.fleet.imbalance import DEFAULT_THRESHOLDS, ImbalanceThresholds
from app.fleet.slo import SloSpec, attainment, burn_rate, window_counts
from app.fleet.tracker import SloStatus, SloTracker
from app.fleet.view import FleetView, fleet_view
from app.model import Window
from app.pacing import BACKGROUND_SHARE, SLO_SHARE, Pacer
from app.store.sqlite import ScrapeRecord
from app.windows.flat import window_to_dict

log = logging.getLogger(__name__)

__all__ = ["SloInputs", "evaluate_stream", "scrape_status", "slo_input", "target_input"]

# The SLO alert's diagnosis and imbalance are those of the short burn window.
SLO_VIEW_S = 300.0


def scrape_status(record: ScrapeRecord | None) -> ScrapeStatus:
    """The rule inputs' view of a target's latest scrape record (None: never scraped)."""
    if record is None:
        return ScrapeStatus()
    return ScrapeStatus(record.ts, record.ok, record.error_kind)


def target_input(
    target: str,
    status: ScrapeStatus,
    *,
    now: float,
    stale_after: float,
    labels: Mapping[str, str],
    ui_base_url: str,
) -> Instance:
    """The target-scope instance (scrape health) at ``now``."""
    fields = target_fields(
        target, status, now=now, stale_after=stale_after, labels=labels, ui_base_url=ui_base_url
    )
    return target_instance(target, fields, labels)


def evaluate_stream(
    window: Window,
    target: Instance,
    config: DiagnosisConfig,
    *,
    failed_scrapes: int,
    attempted_scrapes: int,
    labels: Mapping[str, str],
    ui_base_url: str,
    compare: Callable[[Window, Diagnosis], Diagnosis] | None = None,
    fire_on_unproven: bool = False,
) -> tuple[Diagnosis, Instance, dict[str, Any]]:
    """Diagnose one stream's window (its SLOs: ``config.slo_for``); return the diagnosis,
    its instance and the window's JSON (``window_to_dict``). ``compare`` adds what
    changed against the stream's healthy baseline (``app.evaluate.baseline``)."""
    diagnosis = judge_window(
        window,
        config,
        failed_scrapes=failed_scrapes,
        attempted_scrapes=attempted_scrapes,
        compare=compare,
    )
    flat = window_to_dict(window)
    fields = stream_fields(
        flat,
        diagnosis.to_dict(),
        target.fields,
        slo_ttft_p99=diagnosis.slo_ttft_p99,
        slo_itl_p99=diagnosis.slo_itl_p99,
        ui_base_url=ui_base_url,
        fire_on_unproven=fire_on_unproven,
    )
    return diagnosis, stream_instance(window.target, window.model_name, fields, labels), flat


def slo_input(status: SloStatus, view: FleetView, *, ui_base_url: str) -> Instance:
    """The instance of one SLO on one fleet: its burn rates and budget, and the diagnosis
    and imbalance of the fleet's short burn window (``view``, the last five minutes).

    ``slo.attainment`` and ``slo.objective`` are the worst objective's over ``view``;
    ``worst_replica`` the replica with the lowest attainment there; the hints put the
    imbalance's first (when a replica is the outlier, routing is the fix), then the
    diagnosis'.
    """
    spec = status.spec
    counts = window_counts(view.fleet.window, spec)
    ratios = {k: v for k, v in attainment(counts).items() if v is not None}
    worst_objective = min(ratios, key=lambda k: ratios[k]) if ratios else None
    worst: tuple[float, str] | None = None
    for w in view.fleet.replicas:
        r = [v for v in attainment(window_counts(w, spec)).values() if v is not None]
        if r and (worst is None or min(r) < worst[0]):
            worst = (min(r), w.target)
    d = view.diagnosis
    hints = [*view.imbalance.hints, *(h for h in d.hints if h not in view.imbalance.hints)]
    fields: dict[str, Any] = {
        "slo.name": spec.name,
        "slo.target": spec.target,
        "slo.period_s": spec.period_s,
        **{f"slo.burn_rate_{w}": status.burn.get(w) for w in BURN_WINDOW_LABELS},
        "slo.objective": burn_rate(counts, spec.target)[1] or worst_objective,
        "slo.budget_remaining": status.budget.remaining,
        "slo.budget": budget_text(status.budget),
        "slo.attainment": ratios.get(worst_objective) if worst_objective else None,
        "slo.error_share": counts.share("error"),
        "fleet": status.key.name,
        "model_name": status.key.model_name,
        "replicas": float(len(view.fleet.replicas)),
        "worst_replica": worst[1] if worst is not None and len(view.fleet.replicas) > 1 else None,
        "imbalance": view.imbalance.summary,
        "class": str(d.cls),
        "sub_cause": None if d.sub_cause is None else str(d.sub_cause),
        "confidence": d.confidence,
        "summary": d.summary,
        "ttft_slo": d.ttft_slo,
        "itl_slo": d.itl_slo,
        "change": None,  # a fleet's window has no baseline of its own
        "hints": "\n".join(f"- {h.line()}" for h in hints[:TOP_HINTS]) or None,
        "hint_ids": [h.id for h in hints],
        "ui_url": fleet_link(ui_base_url, status.key.model_name, status.end),
    }
    return slo_instance(spec.name, status.key.model_name, dict(status.key.labels), fields)


class SloInputs:
    """Every SLO's instance at a time: the tracker's burn rates and budget plus the
    fleet's last five minutes, diagnosed with ``config`` (a fleet's SLOs:
    ``config.slo_for(fleet, model)``). Shared by the service and replay (``source`` is
    the store, or a recording in memory)."""

    def __init__(
        self,
        source: DeltaSource,
        specs: Sequence[SloSpec],
        config: DiagnosisConfig,
        *,
        group_by: Sequence[str] = (),
        latest_s: float = 60.0,
        thresholds: ImbalanceThresholds = DEFAULT_THRESHOLDS,
        ui_base_url: str,
        tracker: SloTracker | None = None,
        retention_s: float | None = None,
        refresh_s: float = 0.0,
        background: bool = False,
    ) -> None:
        self.source = source
        # ``background``: counts run in a thread of their own while alert rounds go on —
        # a stale one's refresh (paced to a quarter of the interpreter) with the last
        # instances, the first one (after a start: seconds at 1,000 streams) with none,
        # the SLO alerts held as they are (``instances`` None): a minute's burn rates never
        # hold up a round or a scrape.
        self.background = background
        self._refresh: threading.Thread | None = None
        self._stopping = threading.Event()
        self.config = config
        # Burn windows are minutes to days long: evaluating them every ``refresh_s`` (not
        # every alert round) costs a fraction and moves a burn rate by little.
        self.refresh_s = refresh_s
        self._last: tuple[float, list[Instance]] | None = None
        self.thresholds = thresholds
        self.ui_base_url = ui_base_url
        self.tracker = tracker or SloTracker(
            source, specs, group_by, latest_s=latest_s, retention_s=retention_s
        )

    def instances(
        self,
        end: float,
        streams: Sequence[tuple[str, str]],
        labels_of: Mapping[str, Mapping[str, str]],
        *,
        closed_until: float | None = None,
    ) -> list[Instance] | None:
        """Every SLO's instance at ``end``; None while the first count runs in the
        background (no instance exists yet: the SLO alerts are held, not cleared)."""
        if not self.tracker.specs:
            return []
        last = self._last
        if last is not None and 0.0 <= end - last[0] < self.refresh_s:
            return last[1]
        if self.background:
            if self._refresh is None or not self._refresh.is_alive():
                self._refresh = threading.Thread(
                    target=self._evaluate_logged,
                    args=(end, list(streams), dict(labels_of), closed_until),
                    name="phasewatch-slo",
                    daemon=True,
                )
                self._refresh.start()
            return None if last is None else last[1]
        return self._evaluate(end, streams, labels_of, closed_until)

    def wait(self, timeout: float) -> bool:
        """Wait (at most ``timeout`` s) for a count under way in the background to end;
        whether none is running."""
        refresh = self._refresh
        if refresh is not None:
            refresh.join(timeout)
            return not refresh.is_alive()
        return True

    def stop(self, timeout: float) -> bool:
        """Let a background refresh end between two fleets and wait for it (at most
        ``timeout`` seconds), before the source it reads is closed; whether it ended."""
        self._stopping.set()
        return self.wait(timeout)

    def _evaluate_logged(self, *args: Any) -> None:
        """A count in the background: a failure is logged, and the next round starts
        another (the SLO alerts stay held until one succeeds)."""
        try:
            self._evaluate(*args)
        except Exception:
            log.exception("counting the SLOs failed; the next round counts again")

    def _evaluate(
        self,
        end: float,
        streams: Sequence[tuple[str, str]],
        labels_of: Mapping[str, Mapping[str, str]],
        closed_until: float | None,
    ) -> list[Instance]:
        # Beside the rounds (the first count after a start too) a count takes a quarter
        # of the interpreter: the scrape loop and the rounds keep theirs.
        share = SLO_SHARE if self.background else BACKGROUND_SHARE
        statuses = self.tracker.evaluate(
            end, streams, labels_of, closed_until=closed_until, share=share
        )
        out: list[Instance] = []
        pace = Pacer(share)
        for st in statuses:
            if self._stopping.is_set():  # the service is stopping: its store closes next
                return out
            pace()
            view = fleet_view(
                self.source,
                st.key,
                st.members,
                start=end - SLO_VIEW_S,
                end=end,
                config=self.config,
                thresholds=self.thresholds,
            )
            out.append(slo_input(st, view, ui_base_url=self.ui_base_url))
        self._last = (end, out)
        return out
