"""The evaluation round the service runs every ``alerts.evaluation_interval``: at the edge.

For every target: its latest scrape (target fields); for every stream the target
exports: the latest window ``(now - window.length, now]`` from the store, diagnosed
(stored when the verdict changes, or every minute); for every SLO and fleet: its burn
rates, budget and the fleet's last five minutes, diagnosed (``SloInputs``). Then the
pure state machine, the notification plan, and one transaction that saves the state,
the history and the outbox rows. The alerts are restored from the store at start-up,
so a restart neither re-fires nor forgets a firing alert.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from app.alerts.fields import Instance, ScrapeStatus, reached
from app.alerts.history import AlertStore
from app.alerts.inputs import SloInputs, evaluate_stream, target_input
from app.alerts.notify import Receiver, event_body, receivers_from_config
from app.alerts.outbox import NewRow
from app.alerts.rules import Rule, combine, default_rules, load_rule_file
from app.alerts.silences import Silence, SilenceStore, silenced_by
from app.alerts.state import Alert, Evaluation, Notice, RuleResult, evaluate, plan_notifications
from app.collector import TargetState
from app.config import AlertsConfig, Settings
from app.diagnose import Diagnosis, DiagnosisConfig
from app.fleet.specs import imbalance_thresholds, slo_specs
from app.fleet.tracker import SloTracker
from app.model import Window
from app.pacing import BACKGROUND_SHARE, Pacer
from app.store.diagnoses import DiagnosisRow, DiagnosisStore, should_store
from app.store.sqlite import Store
from app.windows.aggregate import window

log = logging.getLogger(__name__)

__all__ = ["AlertEngine", "configured_rules"]

# Streams of a target with no collector state (e.g. read from Prometheus) count as live
# while they have a delta this recent.
STREAM_LIVE_S = 600.0


def configured_rules(cfg: AlertsConfig) -> list[Rule]:
    """The shipped pack (unless turned off) plus the configured rule file."""
    packs = [default_rules()] if cfg.default_rules else []
    if cfg.rules_file is not None:
        packs.append(load_rule_file(cfg.rules_file))
    return combine(*packs)


class AlertEngine:
    """Evaluates the rules over the store's latest windows and saves the outcome."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        states: Mapping[str, TargetState] | None = None,
        *,
        config: DiagnosisConfig,
        rules: Sequence[Rule] | None = None,
        slo_tracker: SloTracker | None = None,
        background_slo: bool = False,
    ) -> None:
        self.settings = settings
        self.store = store
        # Thresholds and every stream's SLOs (``app.evaluate.settings.diagnosis_config``).
        self.config = config
        # SLO burn rates and budgets per fleet (shared with the service's gauges).
        self.slos = SloInputs(
            store,
            slo_specs(settings),
            config,
            group_by=settings.fleet.group_by,
            latest_s=settings.window.length,
            thresholds=imbalance_thresholds(settings.fleet.imbalance),
            ui_base_url=settings.ui_base_url,
            tracker=slo_tracker,
            retention_s=settings.storage.retention_days * 86400.0,
            refresh_s=settings.alerts.slo_evaluation_interval,
            background=background_slo,
        )
        self.states: Mapping[str, TargetState] = states or {}
        self.rules = list(rules) if rules is not None else configured_rules(settings.alerts)
        self.receivers: list[Receiver] = receivers_from_config(settings.alerts.receivers)
        self.repo = AlertStore(store)
        self.silences = SilenceStore(store)
        self.diagnoses = DiagnosisStore(store)
        self.alerts: dict[str, Alert] = self.repo.load()
        self.results: list[RuleResult] = []
        self.last_evaluation: float | None = None
        # The latest window and diagnosis of every live stream (the service's gauges).
        self.latest_streams: list[tuple[Window, Diagnosis]] = []
        self._stored = self.diagnoses.latest()
        if self.alerts:
            firing = sum(1 for a in self.alerts.values() if a.state == "firing")
            log.info("alerts: restored %d alert(s), %d firing", len(self.alerts), firing)

    # -- inputs ----------------------------------------------------------------------------
    def _targets(self) -> dict[str, dict[str, str]]:
        out = {t.name: dict(t.labels) for t in self.settings.targets}
        for target, _ in self.store.streams():
            out.setdefault(target, {})
        return out

    def _models(self, target: str, now: float) -> list[str]:
        state = self.states.get(target)
        if state is not None and state.last_ok is not None:
            return sorted(state.last_ok.streams)
        if state is not None:
            return []
        live = []
        for _, model in self.store.streams(target):
            if self.store.intervals(target, model, now - STREAM_LIVE_S, now):
                live.append(model)
        return live

    def _lag(self) -> float:
        """Seconds a Prometheus source lags behind (its ingestion delay); 0 when scraping."""
        source = getattr(self.settings, "source", None)
        if source is not None and getattr(source, "kind", "scrape") == "prometheus":
            return float(getattr(source, "lag", 0.0))
        return 0.0

    def inputs(self, now: float) -> tuple[list[Instance], list[DiagnosisRow]]:
        """Every instance to evaluate at ``now``, and the diagnoses worth storing.

        Windows end at ``now`` (minus a Prometheus source's lag, as the data is not there
        yet); target health is the latest scrape at ``now``.
        """
        length = self.settings.window.length
        end = now - self._lag()
        stale = max(
            3.0 * self.settings.scrape.interval, 2.0 * self.settings.alerts.evaluation_interval
        )
        ui = self.settings.ui_base_url
        instances: list[Instance] = []
        rows: list[DiagnosisRow] = []
        streams: list[tuple[Window, Diagnosis]] = []
        pace = Pacer(BACKGROUND_SHARE)  # leave the scrape loop its share of the interpreter
        for target, labels in self._targets().items():
            records = self.store.scrapes(target, min(end - length, now - stale), now)
            last = records[-1] if records else None
            status = ScrapeStatus(last.ts, last.ok, last.error_kind) if last else ScrapeStatus()
            tgt = target_input(
                target, status, now=now, stale_after=stale, labels=labels, ui_base_url=ui
            )
            instances.append(tgt)
            inside = [r for r in records if end - length < r.ts <= end]
            failed = sum(1 for r in inside if not reached(r.error_kind))
            for model in self._models(target, end):
                pace()
                deltas = self.store.intervals(target, model, end - length, end)
                w = window(deltas, start=end - length, end=end, target=target, model_name=model)
                diagnosis, inst, _ = evaluate_stream(
                    w,
                    tgt,
                    self.config,
                    failed_scrapes=failed,
                    attempted_scrapes=len(inside),
                    labels=labels,
                    ui_base_url=ui,
                )
                instances.append(inst)
                streams.append((w, diagnosis))
                cls = str(diagnosis.cls)
                sub = None if diagnosis.sub_cause is None else str(diagnosis.sub_cause)
                if should_store(self._stored.get((target, model)), end, cls, sub):
                    self._stored[(target, model)] = (end, cls, sub)
                    payload = diagnosis.to_dict()
                    rows.append(DiagnosisRow(target, model, w.start, w.end, cls, payload))
        # One instance per SLO and fleet; chunks are cached once no scrape can add to them.
        instances.extend(
            self.slos.instances(
                end,
                self.store.streams(),
                self._targets(),
                closed_until=end - 2.0 * self.settings.scrape.interval,
            )
        )
        self.latest_streams = streams
        return instances, rows

    # -- one round -------------------------------------------------------------------------
    def active_silences(self, now: float) -> list[Silence]:
        return [s for s in self.silences.list(since=now) if s.active(now)]

    def evaluate_once(self, now: float) -> Evaluation:
        """Evaluate, plan notifications, and save it all in one transaction."""
        instances, diagnosis_rows = self.inputs(now)
        cfg = self.settings.alerts
        result = evaluate(
            self.rules, instances, now, self.alerts, resolved_retention=cfg.resolved_retention
        )
        silences = self.active_silences(now)

        def silenced(labels: Mapping[str, str]) -> str | None:
            return silenced_by(silences, labels, now)

        alerts, notices = plan_notifications(
            result.alerts, now, resend_interval=cfg.resend_interval, silenced=silenced
        )
        rows = self.outbox_rows(notices)
        self.repo.save(alerts, list(self.alerts), result.transitions, rows, now)
        self.diagnoses.add(diagnosis_rows)
        self.alerts = alerts
        self.results = result.results
        self.last_evaluation = now
        for t in result.transitions:
            log.info("alert %s %s %s", t.alertname, t.state, _where(t.labels))
        return Evaluation(alerts, result.transitions, result.results)

    def outbox_rows(self, notices: Sequence[Notice]) -> list[NewRow]:
        """One row per notice and receiver of the matching kind."""
        rows = []
        ui = self.settings.ui_base_url
        for n in notices:
            for r in self.receivers:
                if (n.kind == "update") != r.batches:
                    continue
                body = event_body(r, n.alert, n.state, external_url=ui)
                rows.append(NewRow(r.id, n.dedup_key, n.alert.fingerprint, n.kind, body))
        return rows

    # -- reads for the API -----------------------------------------------------------------
    def silenced_lookup(self, now: float) -> Callable[[Mapping[str, str]], str | None]:
        silences = self.active_silences(now)
        return lambda labels: silenced_by(silences, labels, now)

    def rule_health(self) -> list[dict[str, Any]]:
        """Each rule with its instances' last results (``ok`` or ``cannot_evaluate``)."""
        by_rule: dict[str, list[RuleResult]] = {}
        for r in self.results:
            by_rule.setdefault(r.rule, []).append(r)
        out = []
        for rule in self.rules:
            results = by_rule.get(rule.name, [])
            out.append(
                {
                    "name": rule.name,
                    "expr": rule.expr,
                    "for": rule.for_s,
                    "keep_firing_for": rule.keep_firing_for_s,
                    "severity": rule.severity,
                    "scope": rule.scope,
                    "labels": dict(rule.labels),
                    "health": "cannot_evaluate"
                    if any(r.health != "ok" for r in results)
                    else "ok"
                    if results
                    else "unknown",
                    "instances": [
                        {
                            "labels": r.labels,
                            "holds": r.holds,
                            "health": r.health,
                            "missing": list(r.missing),
                            "problems": list(r.problems),
                        }
                        for r in results
                    ],
                }
            )
        return out


def _where(labels: Mapping[str, str]) -> str:
    where = labels.get("target", "")
    return f"{where}/{labels['model_name']}" if labels.get("model_name") else where
