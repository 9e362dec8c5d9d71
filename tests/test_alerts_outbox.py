"""Notifier bodies and the durable outbox: retries, backoff, order, dedup, supersession."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import httpx
import pytest

from app.alerts.outbox import NewRow, Outbox, Sender, backoff
from app.alerts.receivers import KINDS, Notifier, receivers_from_config
from app.alerts.receivers.alertmanager import Alertmanager, alertmanager_alert
from app.alerts.receivers.http import DeliveryError, DeliveryErrorKind, post_json
from app.alerts.receivers.slack import Slack, slack_message
from app.alerts.receivers.webhook import Webhook, webhook_payload
from app.alerts.state import Alert, AlertState
from app.config import ReceiversConfig
from app.store.sqlite import Store

ALERT = Alert(
    fingerprint="0123456789abcdef",
    rule="PhasewatchKVCachePressure",
    labels={
        "alertname": "PhasewatchKVCachePressure",
        "severity": "critical",
        "target": "a",
        "model_name": "llama",
    },
    annotations={
        "summary": "KV 99% full",
        "diagnosis": "kv_pressure: full",
        "hints": "- fp8 KV: --kv-cache-dtype fp8",
        "ui_url": "http://ui/targets/a?at=1",
    },
    state=AlertState.FIRING,
    active_at=1764403200.0,
    last_eval=1764403320.0,
    fired_at=1764403320.0,
)


def resolved(a: Alert, at: float) -> Alert:
    return replace(a, state=AlertState.INACTIVE, resolved_at=at)


def test_alertmanager_body_firing_has_no_ends_at_resolved_has() -> None:
    firing = alertmanager_alert(ALERT, "firing")
    assert firing == {
        "labels": ALERT.labels,
        "annotations": ALERT.annotations,
        "startsAt": "2025-11-29T08:02:00.000Z",
        "generatorURL": "http://ui/targets/a?at=1",
    }
    done = alertmanager_alert(resolved(ALERT, 1764403500.0), "resolved")
    assert done["endsAt"] == "2025-11-29T08:05:00.000Z"


def test_webhook_body_is_alertmanagers_version_4() -> None:
    body = webhook_payload(ALERT, "firing", external_url="http://ui")
    assert body["version"] == "4"
    assert body["status"] == "firing"
    assert body["truncatedAlerts"] == 0
    assert set(body) >= {
        "groupKey",
        "receiver",
        "groupLabels",
        "commonLabels",
        "commonAnnotations",
        "externalURL",
        "alerts",
    }
    (a,) = body["alerts"]
    assert a["fingerprint"] == ALERT.fingerprint
    assert a["status"] == "firing"
    assert a["endsAt"] == "0001-01-01T00:00:00Z"
    assert json.loads(json.dumps(body)) == body


def test_slack_message_carries_diagnosis_hints_and_link() -> None:
    text = slack_message(ALERT, "firing")["text"]
    assert "[FIRING] PhasewatchKVCachePressure — a / `llama`" in text
    assert "kv_pressure: full" in text and "--kv-cache-dtype fp8" in text
    assert "<http://ui/targets/a?at=1|Open in phasewatch>" in text
    assert (
        slack_message(resolved(ALERT, 1764403500.0), "resolved")["attachments"][0]["color"]
        == "good"
    )


def test_receiver_ids_hide_the_url() -> None:
    (slack,) = receivers_from_config(
        ReceiversConfig(slack=["https://hooks.slack.com/services/T000/B000/SECRETKEY"])
    )
    assert "SECRET" not in slack.id and "SECRET" not in repr(slack)
    assert slack.id.startswith("slack-")


def test_every_receivers_section_has_a_kind_and_each_url_one_receiver() -> None:
    assert list(KINDS) == list(ReceiversConfig.model_fields)
    cfg = ReceiversConfig(
        alertmanager=["http://am:9093", "http://am:9093"],
        webhook=["http://hook/"],
        slack=["https://hooks.slack.com/x"],
    )
    assert [type(r) for r in receivers_from_config(cfg)] == [Alertmanager, Webhook, Slack]


def test_each_kind_posts_its_own_body_to_its_own_url() -> None:
    posted: list[tuple[str, Any]] = []

    def record(req: httpx.Request) -> httpx.Response:
        posted.append((str(req.url), json.loads(req.content)))
        return httpx.Response(200)

    receivers: list[Notifier] = [
        Alertmanager("http://am:9093/"),
        Webhook("http://hook/x"),
        Slack("https://hooks.slack.com/x"),
    ]

    async def go() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(record)) as c:
            for r in receivers:
                body = r.batch([r.payload(ALERT, "firing", external_url="http://ui")] * 2)
                assert await r.send(c, body, timeout=1.0) == (False, None)

    asyncio.run(go())
    assert posted == [
        ("http://am:9093/api/v2/alerts", [alertmanager_alert(ALERT, "firing")] * 2),
        ("http://hook/x", webhook_payload(ALERT, "firing", external_url="http://ui")),
        ("https://hooks.slack.com/x", slack_message(ALERT, "firing")),
    ]
    assert [r.batches for r in receivers] == [True, False, False]


def _handler(status: Callable[[httpx.Request], int]) -> httpx.MockTransport:
    return httpx.MockTransport(lambda req: httpx.Response(status(req), text="nope"))


@pytest.mark.parametrize(
    ("status", "retry"),
    [(200, None), (202, None), (500, True), (503, True), (429, True), (400, False), (404, False)],
)
def test_5xx_retries_4xx_does_not(status: int, retry: bool | None) -> None:
    async def go() -> tuple[bool, str | None]:
        async with httpx.AsyncClient(transport=_handler(lambda r: status)) as c:
            return await post_json(c, "http://x/", {}, timeout=1.0)

    again, error = asyncio.run(go())
    if retry is None:
        assert error is None
    else:
        assert again is retry and error is not None and error.retry is retry
        assert error.status == status and str(status) in error.message


def test_timeouts_and_refusals_retry_without_naming_the_url() -> None:
    def boom(req: httpx.Request) -> httpx.Response:
        if "slow" in str(req.url):
            raise httpx.ReadTimeout("timed out", request=req)
        raise httpx.ConnectError("refused", request=req)

    async def go() -> list[tuple[bool, str | None]]:
        async with httpx.AsyncClient(transport=httpx.MockTransport(boom)) as c:
            return [
                await post_json(c, "http://slow/secret", {}, timeout=1.0),
                await post_json(c, "http://down/secret", {}, timeout=1.0),
            ]

    (r1, e1), (r2, e2) = asyncio.run(go())
    assert r1 is True and e1 is not None and e1.kind is DeliveryErrorKind.TIMEOUT
    assert r2 is True and e2 is not None and e2.kind is DeliveryErrorKind.CONNECT
    assert "secret" not in e2.message


@pytest.mark.parametrize(
    ("status", "kind", "retry"),
    [
        (503, DeliveryErrorKind.HTTP_5XX, True),
        (429, DeliveryErrorKind.HTTP_429, True),
        (404, DeliveryErrorKind.HTTP_4XX, False),
        (302, DeliveryErrorKind.HTTP_4XX, False),  # redirects are not followed
    ],
)
def test_an_answer_names_its_kind_and_whether_to_retry(
    status: int, kind: DeliveryErrorKind, retry: bool
) -> None:
    error = DeliveryError.from_status(status, "body")
    assert (error.kind, error.retry, error.status) == (kind, retry, status)
    assert str(error) == error.message == f"HTTP {status}: body"


def test_backoff_doubles_and_is_capped() -> None:
    assert [backoff(n, 1.0, 10.0) for n in range(1, 7)] == [1, 2, 4, 8, 10, 10]


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class Recorder:
    """A receiver whose health the test switches; it records what it accepted."""

    def __init__(self) -> None:
        self.status = 200
        self.accepted: list[Any] = []
        self.calls = 0

    def __call__(self, req: httpx.Request) -> httpx.Response:
        self.calls += 1
        if self.status == 200:
            self.accepted.append(json.loads(req.content))
        return httpx.Response(self.status)


WEBHOOK = Webhook("http://hook/", id="webhook-1")
AM = Alertmanager("http://am:9093", id="alertmanager-1")


def make(
    store: Store, rec: Recorder, clock: Clock, receivers: list[Notifier]
) -> tuple[Outbox, Sender, httpx.AsyncClient]:
    client = httpx.AsyncClient(transport=httpx.MockTransport(rec))
    outbox = Outbox(store)
    sender = Sender(outbox, receivers, client, retry_initial=1.0, retry_max=8.0, clock=clock)
    return outbox, sender, client


def test_receiver_down_for_a_while_then_back_gets_everything_in_order() -> None:
    store, rec, clock = Store(":memory:"), Recorder(), Clock()
    outbox, sender, client = make(store, rec, clock, [WEBHOOK])
    rows = [
        NewRow("webhook-1", f"fp{i % 2}:{s}", f"fp{i % 2}", "event", {"n": i, "s": s})
        for i, s in enumerate(["firing", "firing", "resolved", "resolved"])
    ]
    outbox.add(rows, clock.t)
    rec.status = 503

    async def go() -> None:
        for _ in range(40):  # 40 s of a 1 s sender tick, receiver down for the first 20
            if clock.t >= 1020:
                rec.status = 200
            await sender.run_once()
            clock.t += 1.0
        await client.aclose()

    asyncio.run(go())
    assert [b["n"] for b in rec.accepted] == [0, 1, 2, 3]
    assert outbox.undelivered() == []
    # Backoff: far fewer attempts than ticks while it was down.
    assert rec.calls < 12
    assert outbox.counts() == {"webhook-1": {"sent": 4}}


def test_a_resolved_never_overtakes_its_firing() -> None:
    store, rec, clock = Store(":memory:"), Recorder(), Clock()
    outbox, sender, client = make(store, rec, clock, [WEBHOOK])
    outbox.add([NewRow("webhook-1", "f:firing", "f", "event", {"s": "firing"})], clock.t)
    rec.status = 500
    asyncio.run(sender.run_once())
    outbox.add([NewRow("webhook-1", "f:resolved", "f", "event", {"s": "resolved"})], clock.t)
    rec.status = 200
    clock.t += 0.5  # the firing row is not due yet; the resolved one is
    sender.blocked_until.clear()
    asyncio.run(sender.run_once())
    assert rec.accepted == []
    clock.t += 5
    asyncio.run(sender.run_once())
    asyncio.run(client.aclose())
    assert [b["s"] for b in rec.accepted] == ["firing", "resolved"]


def test_4xx_is_final_and_does_not_block_the_rest() -> None:
    store, rec, clock = Store(":memory:"), Recorder(), Clock()
    outbox, sender, client = make(store, rec, clock, [WEBHOOK])
    outbox.add(
        [
            NewRow("webhook-1", "a", "a", "event", {"n": 1}),
            NewRow("webhook-1", "b", "b", "event", {"n": 2}),
        ],
        clock.t,
    )
    rec.status = 400
    asyncio.run(sender.run_once())
    assert outbox.counts() == {"webhook-1": {"rejected": 2}}
    asyncio.run(client.aclose())


def test_a_notice_is_written_once() -> None:
    store, clock = Store(":memory:"), Clock()
    outbox = Outbox(store)
    row = NewRow("webhook-1", "fp:firing", "fp", "event", {})
    outbox.add([row], clock.t)
    outbox.add([row], clock.t + 1)
    assert len(outbox.undelivered()) == 1


def test_alertmanager_gets_only_the_newest_row_per_alert_in_one_batch() -> None:
    store, rec, clock = Store(":memory:"), Recorder(), Clock()
    outbox, sender, client = make(store, rec, clock, [AM])
    outbox.add(
        [
            NewRow("alertmanager-1", "a@1", "a", "update", {"v": "a1"}),
            NewRow("alertmanager-1", "b@1", "b", "update", {"v": "b1"}),
            NewRow("alertmanager-1", "a@2", "a", "update", {"v": "a2"}),
        ],
        clock.t,
    )
    sent = asyncio.run(sender.run_once())
    asyncio.run(client.aclose())
    assert sent == 2
    assert rec.accepted == [[{"v": "b1"}, {"v": "a2"}]]
    assert outbox.counts() == {"alertmanager-1": {"sent": 2, "superseded": 1}}


def test_old_rows_expire_and_unknown_receivers_wait() -> None:
    store, rec, clock = Store(":memory:"), Recorder(), Clock()
    outbox, sender, client = make(store, rec, clock, [WEBHOOK])
    outbox.add([NewRow("webhook-1", "old", "o", "event", {})], clock.t - 90000)
    outbox.add([NewRow("webhook-gone", "x", "x", "event", {})], clock.t)
    asyncio.run(sender.run_once())
    asyncio.run(client.aclose())
    counts = outbox.counts()
    assert counts["webhook-1"] == {"expired": 1}
    assert counts["webhook-gone"] == {"pending": 1}
    assert rec.calls == 0
