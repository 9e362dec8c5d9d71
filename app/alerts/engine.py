"""The alert engine: rules, their state, silences and the outbox, over given instances.

Each evaluation round (``app.evaluate.round``: windows → diagnosis → SLO → instances)
hands it the instances to judge at ``now``; it runs the pure state machine, plans the
notifications (silences applied) and saves the state, the history and the outbox rows in
one transaction. Like Prometheus' rule manager it owns no pipeline: it never reads
windows or scrapes. The alerts are restored from the store at start-up, so a restart
neither re-fires nor forgets a firing alert.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from app.alerts.fields import Instance
from app.alerts.history import AlertStore
from app.alerts.outbox import NewRow
from app.alerts.receivers import Notifier, receivers_from_config
from app.alerts.retire import retire
from app.alerts.rules import Rule, combine, default_rules, load_rule_file
from app.alerts.shown import set_apart
from app.alerts.silences import Silence, SilenceStore, silenced_by
from app.alerts.state import Alert, Evaluation, Notice, RuleResult, evaluate, plan_notifications
from app.config import AlertsConfig
from app.store.sqlite import Store

log = logging.getLogger(__name__)

__all__ = ["AlertEngine", "configured_rules"]


def configured_rules(cfg: AlertsConfig) -> list[Rule]:
    """The shipped pack (unless turned off) plus the configured rule file."""
    packs = [default_rules()] if cfg.default_rules else []
    if cfg.rules_file is not None:
        packs.append(load_rule_file(cfg.rules_file))
    return combine(*packs)


class AlertEngine:
    """Evaluates the rules over the instances it is handed and saves the outcome."""

    def __init__(
        self,
        config: AlertsConfig,
        store: Store,
        *,
        ui_base_url: str,
        rules: Sequence[Rule] | None = None,
    ) -> None:
        self.cfg = config
        self.ui_base_url = ui_base_url
        self.rules = list(rules) if rules is not None else configured_rules(config)
        self.receivers: list[Notifier] = receivers_from_config(config.receivers)
        self.repo = AlertStore(store)
        self.silences = SilenceStore(store)
        self.alerts: dict[str, Alert] = self.repo.load()
        self.results: list[RuleResult] = []
        self.last_evaluation: float | None = None
        if self.alerts:
            firing = sum(1 for a in self.alerts.values() if a.state == "firing")
            log.info("alerts: restored %d alert(s), %d firing", len(self.alerts), firing)

    # -- one round -------------------------------------------------------------------------
    def active_silences(self, now: float) -> list[Silence]:
        return [s for s in self.silences.list(since=now) if s.active(now)]

    def reconfigure(self, config: AlertsConfig, rules: Sequence[Rule]) -> None:
        """Take new rules, receivers and settings (a reload) from the next round on; the
        alerts keep their state (an alert whose rule is gone resolves as it would)."""
        self.cfg = config
        self.rules = list(rules)
        self.receivers = receivers_from_config(config.receivers)

    def evaluate_once(
        self,
        instances: Sequence[Instance],
        now: float,
        *,
        gone: Callable[[str], bool] | None = None,
        held_scopes: Collection[str] = (),
    ) -> Evaluation:
        """Evaluate ``instances``, plan notifications, and save it all in one transaction.

        ``gone(target)``: the target is no longer scraped; its alerts resolve now with a
        "target removed" annotation (:mod:`app.alerts.retire`). ``held_scopes``: scopes
        this round has no instances of yet; their alerts stay as they are."""
        cfg = self.cfg
        prev, retired = (self.alerts, []) if gone is None else retire(self.alerts, gone, now)
        result = evaluate(
            self.rules,
            instances,
            now,
            prev,
            resolved_retention=cfg.resolved_retention,
            held_scopes=held_scopes,
        )
        if retired:
            result = Evaluation(result.alerts, [*retired, *result.transitions], result.results)
        silences = self.active_silences(now)

        def silenced(labels: Mapping[str, str]) -> str | None:
            return silenced_by(silences, labels, now)

        alerts, notices = plan_notifications(
            result.alerts, now, resend_interval=cfg.resend_interval, silenced=silenced
        )
        rows = self.outbox_rows(notices)
        self.repo.save(alerts, list(self.alerts), result.transitions, rows, now)
        self.alerts = alerts
        self.results = result.results
        self.last_evaluation = now
        for t in result.transitions:
            log.info("alert %s %s %s", t.alertname, t.state, _where(t.labels))
        return Evaluation(alerts, result.transitions, result.results)

    def outbox_rows(self, notices: Sequence[Notice]) -> list[NewRow]:
        """One row per notice and receiver of the matching kind."""
        rows = []
        ui = self.ui_base_url
        for n in notices:
            for r in self.receivers:
                if (n.kind == "update") != r.batches:
                    continue
                body = r.payload(n.alert, n.state, external_url=ui)
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
    """``target/`model```: the scraped model name set apart (app.alerts.shown)."""
    where = labels.get("target", "")
    return f"{where}/{set_apart(labels['model_name'])}" if labels.get("model_name") else where
