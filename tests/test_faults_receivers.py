"""Receiver faults: an Alertmanager or webhook that is down, slow, or answers 4xx/5xx shows
in component health with its error kind and the outbox backlog; nothing is lost, and
delivery resumes by itself when the receiver heals (4xx excepted: final, by design)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.alerts.outbox import NewRow, Outbox, Sender
from app.alerts.receivers import receivers_from_config
from app.config import ReceiversConfig, load_settings
from app.main import create_app
from app.store.sqlite import Store
from tests.faults import FaultServer
from tests.test_e2e import ServiceThread, wait_rounds
from tests.test_faults_store import assert_ui_serves
from tests.waiting import wait_for

# Long enough that a healed receiver in this process answers within it on a busy machine
# (a timeout after the receiver took the body sends it again: at least once, not once).
SEND_TIMEOUT = 2.0


def sender_for(store: Store, url: str, clock: list[float]) -> Sender:
    receivers = receivers_from_config(ReceiversConfig(webhook=[url]))
    return Sender(
        Outbox(store),
        receivers,
        httpx.AsyncClient(),
        timeout=SEND_TIMEOUT,
        retry_initial=1.0,
        retry_max=4.0,
        clock=lambda: clock[0],
    )


@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        ("refuse", "connect"),
        ("hang", "timeout"),
        ("503", "http_5xx"),
        ("429", "http_429"),
    ],
)
def test_failing_receiver_is_named_backs_off_and_gets_everything_once_healed(
    tmp_path: Path, fault: str, kind: str
) -> None:
    with FaultServer() as srv:
        store = Store(tmp_path / "pw.db")
        clock = [1000.0]
        sender = sender_for(store, srv.url("/hook"), clock)
        (rid,) = sender.receivers
        if fault == "refuse":
            srv.refuse()
        elif fault == "hang":
            srv.set("/hook", "hang")
        else:
            srv.set("/hook", "status", status=int(fault))
        outbox = sender.outbox
        outbox.add([NewRow(rid, f"k{i}", f"fp{i}", "event", {"n": i}) for i in range(3)], 1000.0)

        async def go() -> list[int]:
            sent = [await sender.run_once()]
            clock[0] = 1000.5
            sent.append(await sender.run_once())  # backing off: not even tried
            health = sender.health[rid]
            assert not health.ok and health.last_error_kind == kind and health.failures == 1
            assert outbox.backlog() == (3, 1000.0)
            if fault == "refuse":
                srv.listen()
            else:
                srv.set("/hook", "ok")
            clock[0] = 1002.0
            sent.append(await sender.run_once())
            await sender.client.aclose()
            return sent

        assert asyncio.run(go()) == [0, 0, 3]
        assert sender.health[rid].ok and sender.health[rid].failures == 0
        assert [b["n"] for b in srv.route("/hook").bodies] == [0, 1, 2]  # in order, once
        assert outbox.backlog() == (0, None)
        assert outbox.counts() == {rid: {"sent": 3}}
        store.close()


def test_receiver_answering_4xx_is_named_and_its_row_is_final(tmp_path: Path) -> None:
    with FaultServer() as srv:
        store = Store(tmp_path / "pw.db")
        clock = [1000.0]
        sender = sender_for(store, srv.url("/hook"), clock)
        (rid,) = sender.receivers
        srv.set("/hook", "status", status=400)
        sender.outbox.add([NewRow(rid, "k", "fp", "event", {"n": 1})], 1000.0)

        async def go() -> None:
            await sender.run_once()
            await sender.client.aclose()

        asyncio.run(go())
        assert sender.health[rid].last_error_kind == "http_4xx"
        # A 4xx refuses the body itself; sending it again would be refused again.
        assert sender.outbox.counts() == {rid: {"rejected": 1}}
        assert sender.outbox.backlog() == (0, None)
        store.close()


RULES = """
rules:
  - alert: PhasewatchTestDown
    expr: target_up == 0
    severity: critical
"""


def test_service_shows_receiver_faults_keeps_serving_and_delivers_once_healed(
    tmp_path: Path,
) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    with FaultServer() as hooks, FaultServer() as dead:
        dead.refuse()  # the target is down: the alert fires at once
        am_base = hooks.url("/am")
        settings = load_settings(
            None,
            {
                "targets": [{"name": "a", "url": dead.url("/metrics")}],
                "scrape": {"interval": 0.3, "timeout": 0.3},
                "storage": {"path": str(tmp_path / "pw.db")},
                "alerts": {
                    "default_rules": False,
                    "rules_file": str(rules),
                    "evaluation_interval": 0.3,
                    "send_interval": 0.1,
                    "send_timeout": SEND_TIMEOUT,
                    "retry_initial": 0.2,
                    "retry_max": 0.4,
                    "resend_interval": 3600,
                    "receivers": {"webhook": [hooks.url("/hook")], "alertmanager": [am_base]},
                },
            },
        )
        hooks.set("/hook", "status", status=503)
        hooks.set("/am/api/v2/alerts", "hang")
        app = create_app(settings)
        svc = ServiceThread(app)
        try:

            def components() -> dict[str, Any]:
                got: dict[str, Any] = httpx.get(
                    svc.url + "/api/v1/health/components", timeout=5
                ).json()
                return got

            def kinds() -> dict[str, str | None]:
                return {r["kind"]: r["last_error_kind"] for r in components()["receivers"]}

            wait_for(lambda: kinds() == {"alertmanager": "timeout", "webhook": "http_5xx"})
            body = components()
            assert body["status"] == "degraded" and body["store"]["ok"] is True
            assert body["outbox"]["backlog"] == 2
            wait_for(
                lambda: components()["outbox"]["oldest_undelivered_age_s"] >= 0.3,
                what="the oldest undelivered row ageing",
            )
            assert httpx.get(svc.url + "/healthz", timeout=5).json()["components"] == "degraded"
            assert httpx.get(svc.url + "/api/v1/targets", timeout=5).status_code == 200
            assert_ui_serves(app, svc.url)

            hooks.refuse()  # now both are down altogether
            wait_for(lambda: set(kinds().values()) == {"connect"})
            hooks.set("/hook", "ok")
            hooks.set("/am/api/v2/alerts", "ok")
            hooks.listen()
            wait_for(lambda: components()["status"] == "ok")
            assert components()["outbox"] == {"backlog": 0, "oldest_undelivered_age_s": None}
            wait_rounds(svc.url)  # more evaluation and send rounds: nothing more to send
        finally:
            svc.close()
        (hook,) = hooks.route("/hook").bodies
        assert hook["status"] == "firing"
        assert hook["alerts"][0]["labels"]["alertname"] == "PhasewatchTestDown"
        (am,) = hooks.route("/am/api/v2/alerts").bodies
        assert [a["labels"]["alertname"] for a in am] == ["PhasewatchTestDown"]
