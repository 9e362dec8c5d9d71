"""The alert state machine, after Prometheus' ``rules/alerting.go``: pure, time passed in.

One alert per label set (its fingerprint). On every evaluation, for each rule and each
instance of its scope (:mod:`app.alerts.fields`):

* the condition holds → an inactive alert becomes **pending** (``active_at`` = now), or
  **firing** at once when ``for`` is 0; a pending alert becomes **firing** once it has
  been pending for ``for`` seconds (``fired_at`` = now); a firing one stays firing.
* it does not hold (false *or* cannot evaluate) → a pending alert is dropped (a
  ``resolved`` transition with ``previous="pending"``, never notified); a firing one
  stays firing for ``keep_firing_for`` seconds counted from the first evaluation it did
  not hold (``keep_firing_since``), then is **resolved** (``resolved_at`` = now).
* an alert whose rule or instance is gone counts as not holding.

Its annotations are rendered while the condition holds, with what the alert knows
besides the instance's fields (``ALERT_FIELDS``): ``active_for``, the seconds since the
condition began to hold (``active_at``: since when, not the rule's ``for``), and
``held``, the values the condition held with over that time and for how long each (a
class that changed within the episode: ``queue_bound 4m 45s, prefill_bound 15s``). Once
it stops holding they are not rendered again: a firing alert kept for
``keep_firing_for``, and its resolution, carry the text of the condition as it last held.

Resolved alerts stay in the state (``inactive`` with ``resolved_at``) for
``resolved_retention`` seconds so receivers keep hearing "resolved"; if the condition
holds again meanwhile, a new episode starts from pending.

:func:`plan_notifications` decides what receivers are told, from the alerts alone, so
a restart that restores the state neither repeats nor forgets a notification: *event*
receivers (webhook, Slack) hear each firing and each resolved once per episode;
*update* receivers (Alertmanager) get every firing alert again every ``resend_interval``
and resolved ones (with ``endsAt``) during the retention.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from typing import Any

from app.alerts import expr as ex
from app.alerts.fields import LABEL_PREFIX, Instance
from app.alerts.held import add_held, held_text
from app.alerts.rules import Rule

__all__ = [
    "Alert",
    "AlertState",
    "Evaluation",
    "Notice",
    "RuleResult",
    "Transition",
    "alert_labels",
    "evaluate",
    "fingerprint",
    "plan_notifications",
]


class AlertState(StrEnum):
    INACTIVE = "inactive"
    PENDING = "pending"
    FIRING = "firing"


_FNV_OFFSET = 14695981039346656037
_FNV_PRIME = 1099511628211
_SEP = b"\xff"


def fingerprint(labels: Mapping[str, str]) -> str:
    """Alertmanager's label-set fingerprint: FNV-1a 64 over sorted names and values."""
    h = _FNV_OFFSET
    for name in sorted(labels):
        for part in (name.encode(), _SEP, labels[name].encode(), _SEP):
            for byte in part:
                h ^= byte
                h = (h * _FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


@dataclass(frozen=True, slots=True)
class Alert:
    """One alert (a rule on one label set) and its timestamps.

    ``notified`` is what event receivers were last told (``firing``/``resolved``/None);
    ``last_sent_at`` when update receivers (Alertmanager) were last sent this alert.
    ``held``: each text value the condition held with in this episode and the seconds it
    held (first seen first); empty for numeric values.
    """

    fingerprint: str
    rule: str
    labels: dict[str, str]
    annotations: dict[str, str]
    state: AlertState
    active_at: float
    last_eval: float
    value: ex.Value = None
    fired_at: float | None = None
    resolved_at: float | None = None
    keep_firing_since: float | None = None
    notified: str | None = None
    last_sent_at: float | None = None
    held: tuple[tuple[str, float], ...] = ()

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Alert:
        data: dict[str, Any] = json.loads(text)
        data["state"] = AlertState(data["state"])
        data["held"] = tuple((str(v), float(t)) for v, t in data.get("held") or ())
        return cls(**data)

    def public(self) -> dict[str, Any]:
        """The API's view (Prometheus ``/api/v1/alerts`` names plus our timestamps)."""
        return {
            "fingerprint": self.fingerprint,
            "alertname": self.rule,
            "state": str(self.state),
            "labels": dict(self.labels),
            "annotations": dict(self.annotations),
            "activeAt": self.active_at,
            "firedAt": self.fired_at,
            "resolvedAt": self.resolved_at,
            "keepFiringSince": self.keep_firing_since,
            "lastEvaluation": self.last_eval,
            "value": self.value,
        }


@dataclass(frozen=True, slots=True)
class Transition:
    """A state change: ``state`` is ``pending``, ``firing`` or ``resolved``."""

    fingerprint: str
    alertname: str
    state: str
    at: float
    previous: str
    labels: dict[str, str]
    annotations: dict[str, str]
    value: ex.Value = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "alertname": self.alertname,
            "state": self.state,
            "at": self.at,
            "previous": self.previous,
            "fingerprint": self.fingerprint,
            "labels": dict(self.labels),
            "annotations": dict(self.annotations),
            "value": self.value,
        }


@dataclass(frozen=True, slots=True)
class RuleResult:
    """How one rule fared on one instance: ``health`` is ``ok`` or ``cannot_evaluate``."""

    rule: str
    fingerprint: str
    labels: dict[str, str]
    holds: bool
    health: str
    missing: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Evaluation:
    """The outcome of one evaluation round."""

    alerts: dict[str, Alert]
    transitions: list[Transition]
    results: list[RuleResult] = field(default_factory=list)


def alert_labels(rule: Rule, instance: Instance) -> dict[str, str]:
    """Instance labels, then the rule's labels, then ``alertname`` and ``severity``."""
    labels = {k: v for k, v in instance.labels.items() if v is not None}
    labels.update(dict(rule.labels))
    labels["alertname"] = rule.name
    labels["severity"] = rule.severity
    if instance.target:  # an SLO's alert is about a fleet, not one target
        labels["target"] = instance.target
    if instance.model_name is not None:
        labels["model_name"] = instance.model_name
    return labels


def _annotations(rule: Rule, instance: Instance, alert: Alert, now: float) -> dict[str, str]:
    """The rule's templates over the instance's fields, the value, the labels and what
    the alert knows (module docstring)."""
    context: dict[str, Any] = dict(instance.fields)
    context["value"] = alert.value
    context.update({LABEL_PREFIX + k: v for k, v in alert.labels.items()})
    context["active_for"] = max(0.0, now - alert.active_at)
    context["held"] = held_text(alert.held)
    return {k: t.render(context) for k, t in rule.annotations}


def evaluate(
    rules: Sequence[Rule],
    instances: Iterable[Instance],
    now: float,
    prev: Mapping[str, Alert],
    *,
    resolved_retention: float = 900.0,
    held_scopes: Collection[str] = (),
) -> Evaluation:
    """One round: every rule on every instance of its scope, at time ``now``.

    ``held_scopes``: scopes whose instances this round could not build yet (the SLOs'
    first count after a start): their alerts stay as they were, where an instance that
    is gone would clear them."""
    by_name = {r.name: r for r in rules}
    alerts: dict[str, Alert] = {}
    transitions: list[Transition] = []
    results: list[RuleResult] = []
    seen: set[str] = set()
    instance_list = list(instances)
    for rule in rules:
        for inst in instance_list:
            if inst.scope != rule.scope:
                continue
            labels = alert_labels(rule, inst)
            fp = fingerprint(labels)
            seen.add(fp)
            res = ex.evaluate(rule.condition, inst.fields)
            results.append(
                RuleResult(
                    rule.name,
                    fp,
                    labels,
                    res.holds,
                    "ok" if res.known else "cannot_evaluate",
                    tuple(res.missing),
                    tuple(res.problems),
                )
            )
            old = prev.get(fp)
            alert: Alert | None
            if res.holds:
                value = ex.value_of(rule.value, inst.fields) if rule.value is not None else None
                alert = _holds(rule, inst, old, fp, labels, value, now, transitions)
            else:
                alert = _clears(rule, old, now, transitions) if old is not None else None
            if alert is not None:
                alerts[fp] = alert
    for fp, old in prev.items():
        if fp in seen:
            continue
        rule_of = by_name.get(old.rule)
        if rule_of is not None and rule_of.scope in held_scopes:
            alerts[fp] = old
            continue
        gone = _clears(by_name.get(old.rule), old, now, transitions)
        if gone is not None:
            alerts[fp] = gone
    # Resolved alerts are kept a while so receivers hear it, then forgotten.
    alerts = {
        fp: a
        for fp, a in alerts.items()
        if a.state != AlertState.INACTIVE
        or (a.resolved_at is not None and now - a.resolved_at < resolved_retention)
    }
    return Evaluation(alerts, transitions, results)


def _transition(a: Alert, state: str, previous: str, now: float) -> Transition:
    return Transition(
        a.fingerprint, a.rule, state, now, previous, dict(a.labels), dict(a.annotations), a.value
    )


def _holds(
    rule: Rule,
    inst: Instance,
    old: Alert | None,
    fp: str,
    labels: dict[str, str],
    value: ex.Value,
    now: float,
    out: list[Transition],
) -> Alert:
    """The alert of a condition that holds at ``now``: started, kept or fired, its
    annotations rendered for it (module docstring)."""
    if old is None or old.state == AlertState.INACTIVE:
        alert = Alert(fp, rule.name, labels, {}, AlertState.PENDING, now, now, value)
        alert = replace(alert, held=add_held((), value, 0.0))
        previous = "inactive"
        fires = rule.for_s <= 0
    else:
        alert = replace(
            old,
            labels=labels,
            value=value,
            last_eval=now,
            keep_firing_since=None,
            held=add_held(old.held, value, max(0.0, now - old.last_eval)),
        )
        previous = str(old.state)
        fires = alert.state == AlertState.PENDING and now - alert.active_at >= rule.for_s
    if fires:
        alert = replace(alert, state=AlertState.FIRING, fired_at=now)
    alert = replace(alert, annotations=_annotations(rule, inst, alert, now))
    if previous == "inactive":
        out.append(_transition(alert, str(alert.state), previous, now))
    elif fires:
        out.append(_transition(alert, "firing", previous, now))
    return alert


def _clears(rule: Rule | None, old: Alert, now: float, out: list[Transition]) -> Alert | None:
    if old.state == AlertState.INACTIVE:
        return old
    if old.state == AlertState.PENDING:
        out.append(_transition(old, "resolved", "pending", now))
        return None
    keep_for = rule.keep_firing_for_s if rule is not None else 0.0
    if keep_for > 0:
        since = old.keep_firing_since if old.keep_firing_since is not None else now
        if now - since < keep_for:
            return replace(old, keep_firing_since=since, last_eval=now)
    alert = replace(
        old, state=AlertState.INACTIVE, resolved_at=now, keep_firing_since=None, last_eval=now
    )
    out.append(_transition(alert, "resolved", "firing", now))
    return alert


# --- what receivers are told ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Notice:
    """Something to enqueue for receivers.

    ``kind`` is ``event`` (webhook, Slack: once per alert, state and episode) or
    ``update`` (Alertmanager: the alert's current state, re-sent periodically).
    ``dedup_key`` is unique per receiver in the outbox.
    """

    kind: str
    state: str
    alert: Alert
    dedup_key: str


def plan_notifications(
    alerts: Mapping[str, Alert],
    now: float,
    *,
    resend_interval: float,
    silenced: Callable[[Mapping[str, str]], str | None] = lambda labels: None,
) -> tuple[dict[str, Alert], list[Notice]]:
    """Decide what to send now; return the alerts with their bookkeeping updated.

    A silenced firing alert is not announced (its state still advances); when the
    silence ends before it resolves, receivers hear "firing" then. "Resolved" is sent
    only to receivers that heard "firing" — also while a silence matches, so no
    receiver is left with an alert that never ends.
    """
    out: dict[str, Alert] = {}
    notices: list[Notice] = []
    for fp, a in alerts.items():
        episode = f"{fp}:{a.active_at:.3f}"
        if a.state == AlertState.FIRING:
            if silenced(a.labels) is not None:
                out[fp] = a
                continue
            if a.notified != "firing":
                notices.append(Notice("event", "firing", a, f"{episode}:firing"))
            due = a.last_sent_at is None or now - a.last_sent_at >= resend_interval
            if due or a.notified != "firing":
                notices.append(Notice("update", "firing", a, f"{episode}:firing@{now:.3f}"))
                a = replace(a, last_sent_at=now)
            a = replace(a, notified="firing")
        elif a.state == AlertState.INACTIVE and a.notified in ("firing", "resolved"):
            if a.notified == "firing":
                notices.append(Notice("event", "resolved", a, f"{episode}:resolved"))
            due = a.last_sent_at is None or now - a.last_sent_at >= resend_interval
            if due or a.notified == "firing":
                notices.append(Notice("update", "resolved", a, f"{episode}:resolved@{now:.3f}"))
                a = replace(a, last_sent_at=now)
            a = replace(a, notified="resolved")
        out[fp] = a
    return out, notices
