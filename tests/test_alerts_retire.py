"""Alerts of a removed target resolve at once with "target removed"; no other alert moves."""

from __future__ import annotations

from app.alerts.retire import REMOVED, RESOLUTION, retire
from app.alerts.state import Alert, AlertState, plan_notifications


def alert(fp: str, target: str | None, state: AlertState, **kw: object) -> Alert:
    labels = {"alertname": "A"} | ({"target": target} if target else {})
    return Alert(fp, "A", labels, {"summary": "s"}, state, 100.0, 190.0, **kw)  # type: ignore[arg-type]


def test_a_removed_targets_firing_alert_resolves_now_and_its_pending_one_is_dropped() -> None:
    alerts = {
        "f": alert("f", "gone", AlertState.FIRING, fired_at=110.0, keep_firing_since=180.0),
        "p": alert("p", "gone", AlertState.PENDING),
        "o": alert("o", "live", AlertState.FIRING, fired_at=110.0),
        "s": alert("s", None, AlertState.FIRING, fired_at=110.0),  # an SLO's: no target
        "r": alert("r", "gone", AlertState.INACTIVE, resolved_at=150.0),
    }
    out, transitions = retire(alerts, lambda t: t == "gone", 200.0)
    assert set(out) == {"f", "o", "s", "r"}
    f = out["f"]
    assert f.state == AlertState.INACTIVE and f.resolved_at == 200.0
    assert f.keep_firing_since is None  # keep_firing_for does not hold a removed target
    assert f.annotations == {"summary": "s", RESOLUTION: REMOVED}
    assert out["o"] is alerts["o"] and out["s"] is alerts["s"] and out["r"] is alerts["r"]
    assert [(t.fingerprint, t.state, t.previous) for t in transitions] == [
        ("f", "resolved", "firing"),
        ("p", "resolved", "pending"),
    ]
    assert transitions[0].annotations[RESOLUTION] == REMOVED


def test_receivers_that_heard_firing_hear_resolved_with_the_reason() -> None:
    heard = alert("f", "gone", AlertState.FIRING, fired_at=110.0, notified="firing")
    out, _ = retire({"f": heard}, lambda t: True, 200.0)
    _, notices = plan_notifications(out, 200.0, resend_interval=60.0)
    assert [(n.kind, n.state) for n in notices] == [("event", "resolved"), ("update", "resolved")]
    assert all(n.alert.annotations[RESOLUTION] == REMOVED for n in notices)
