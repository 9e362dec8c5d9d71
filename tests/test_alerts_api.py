"""The alerts, silences and diagnoses API over a service whose evaluation the test drives."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.config import load_settings
from app.main import create_app
from app.service import Service
from app.store.sqlite import ScrapeRecord
from tests.waiting import wait_for

RULES = """
rules:
  - alert: Down
    expr: target_up == 0
    severity: critical
    annotations: {summary: "{{ labels.target }} down ({{ scrape_error_kind }})"}
  - alert: SlowTTFT
    expr: ttft_p99 > slo.ttft_p99
    annotations: {summary: "{{ value | seconds }}", hints: "{{ hints }}"}
"""
TOKEN = "s3cret-token-value"


class ApiClient:
    """A synchronous face over the app in its lifespan (httpx's ASGI transport)."""

    def __init__(self, app: FastAPI, loop: asyncio.AbstractEventLoop) -> None:
        self.app = app
        self.loop = loop
        transport = httpx.ASGITransport(app=app)
        self.http = httpx.AsyncClient(transport=transport, base_url="http://test")

    def get(self, url: str, **kw: Any) -> httpx.Response:
        return self.loop.run_until_complete(self.http.get(url, **kw))

    def post(self, url: str, **kw: Any) -> httpx.Response:
        return self.loop.run_until_complete(self.http.post(url, **kw))

    def delete(self, url: str, **kw: Any) -> httpx.Response:
        return self.loop.run_until_complete(self.http.delete(url, **kw))


@contextmanager
def serving(app: FastAPI) -> Iterator[ApiClient]:
    loop = asyncio.new_event_loop()
    life: AbstractAsyncContextManager[None] = app.router.lifespan_context(app)
    loop.run_until_complete(life.__aenter__())
    client = ApiClient(app, loop)
    try:
        yield client
    finally:
        loop.run_until_complete(client.http.aclose())
        loop.run_until_complete(life.__aexit__(None, None, None))
        loop.close()


@contextmanager
def make_client(tmp_path: Path, **extra: Any) -> Iterator[ApiClient]:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    settings = load_settings(
        None,
        {
            "targets": [{"name": "a", "url": "http://127.0.0.1:9/metrics", "labels": {"dc": "x"}}],
            "storage": {"path": str(tmp_path / "pw.db")},
            "alerts": {"default_rules": False, "rules_file": str(rules)},
            **extra,
        },
    )
    with serving(create_app(settings, start_jobs=False)) as client:
        yield client


@pytest.fixture
def client(tmp_path: Path) -> Iterator[ApiClient]:
    with make_client(tmp_path, api_token=TOKEN) as c:
        yield c


def service(c: ApiClient) -> Service:
    svc: Service = c.app.state.service
    return svc


def target_down(c: ApiClient, now: float) -> None:
    svc = service(c)
    rec = ScrapeRecord("a", now - 1, False, "refused", "connection refused", 0.001, 0, 0)
    svc.store.write_round([rec], [], [])
    svc.evaluate_alerts(now)


AUTH = {"Authorization": f"Bearer {TOKEN}"}


def test_firing_alert_is_listed_with_history_and_rule_health(client: ApiClient) -> None:
    now = time.time()
    target_down(client, now)
    alerts = client.get("/api/v1/alerts").json()
    assert [(a["alertname"], a["state"]) for a in alerts] == [("Down", "firing")]
    (a,) = alerts
    assert a["labels"] == {"alertname": "Down", "severity": "critical", "target": "a", "dc": "x"}
    assert a["annotations"]["summary"] == "a down (refused)"
    assert a["silencedBy"] is None
    history = client.get("/api/v1/alerts/history").json()
    assert [(h["alertname"], h["state"], h["previous"]) for h in history] == [
        ("Down", "firing", "inactive")
    ]
    assert history[0]["at"] == pytest.approx(now)
    rules = {r["name"]: r for r in client.get("/api/v1/alerts/rules").json()["rules"]}
    assert rules["Down"]["health"] == "ok"
    # No stream has ever been scraped: the TTFT rule has no instance to judge yet.
    assert rules["SlowTTFT"]["health"] == "unknown"
    assert client.get("/api/v1/alerts", params={"state": "pending"}).json() == []


def test_silences_need_the_bearer_token(client: ApiClient) -> None:
    body = {"matchers": [{"name": "alertname", "value": "Down"}], "duration": "1h"}
    assert client.post("/api/v1/silences", json=body).status_code == 401
    wrong = {"Authorization": "Bearer nope"}
    assert client.post("/api/v1/silences", json=body, headers=wrong).status_code == 401
    created = client.post("/api/v1/silences", json=body, headers=AUTH)
    assert created.status_code == 200
    sid = created.json()["silenceID"]
    (listed,) = client.get("/api/v1/silences").json()
    assert listed["id"] == sid and listed["status"]["state"] == "active"
    assert client.delete(f"/api/v1/silences/{sid}").status_code == 401
    assert client.delete(f"/api/v1/silences/{sid}", headers=AUTH).status_code == 200
    assert client.delete(f"/api/v1/silences/{sid}", headers=AUTH).status_code == 404
    assert client.get("/api/v1/silences").json() == []
    assert len(client.get("/api/v1/silences", params={"include_expired": True}).json()) == 1


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"matchers": [], "duration": "1h"}, "at least one matcher"),
        ({"matchers": ['alertname=~".*"'], "duration": "1h"}, "would mute all"),
        ({"matchers": ["alertname=Down"], "duration": "1h"}, 'expected name="value"'),
        ({"matchers": ['alertname="Down"']}, "give endsAt or duration"),
        ({"matchers": ['alertname="Down"'], "endsAt": 5}, "in the past"),
        ({"matchers": ['alertname="Down"'], "duration": "1x"}, "not a duration"),
        ({"matchers": ['x=~"("'], "duration": "1h"}, "bad regex"),
    ],
)
def test_bad_silences_are_refused(client: ApiClient, body: dict[str, Any], fragment: str) -> None:
    resp = client.post("/api/v1/silences", json=body, headers=AUTH)
    assert resp.status_code == 422
    assert fragment in resp.json()["detail"]


def test_write_endpoints_are_off_without_a_configured_token(tmp_path: Path) -> None:
    with make_client(tmp_path) as c:
        body = {"matchers": ['alertname="Down"'], "duration": "1h"}
        resp = c.post("/api/v1/silences", json=body, headers=AUTH)
        assert resp.status_code == 403
        assert "write endpoints are off" in resp.text
        assert c.delete("/api/v1/silences/x", headers=AUTH).status_code == 403


def test_a_silence_mutes_notifications_but_not_the_state(tmp_path: Path) -> None:
    with make_client(
        tmp_path,
        api_token=TOKEN,
        alerts={
            "default_rules": False,
            "rules_file": str(tmp_path / "rules.yaml"),
            "receivers": {"webhook": ["http://127.0.0.1:9/hook"]},
        },
    ) as c:
        body = {"matchers": ['target="a"'], "endsAt": time.time() + 3600, "comment": "maint"}
        sid = c.post("/api/v1/silences", json=body, headers=AUTH).json()["silenceID"]
        target_down(c, time.time())
        (a,) = c.get("/api/v1/alerts").json()
        assert a["state"] == "firing" and a["silencedBy"] == sid
        assert c.get("/api/v1/alerts/outbox").json()["rows"] == {}
        c.delete(f"/api/v1/silences/{sid}", headers=AUTH)
        target_down(c, time.time())
        outbox = c.get("/api/v1/alerts/outbox").json()
        (receiver,) = outbox["receivers"]
        assert "127.0.0.1" not in str(outbox)
        assert outbox["rows"] == {receiver["id"]: {"pending": 1}}


def test_diagnoses_endpoint_returns_stored_diagnoses(client: ApiClient) -> None:
    now = time.time()
    target_down(client, now)
    assert client.get("/api/v1/diagnoses", params={"target": "a"}).json() == []
    bad = client.get("/api/v1/diagnoses", params={"target": "a", "start": 10, "end": 5})
    assert bad.status_code == 422


def test_stream_rules_and_stored_diagnoses_from_live_scrapes(tmp_path: Path) -> None:
    from tests.test_alerts_integration import Sink

    vllm = Sink()
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "rules:\n  - alert: HalfFull\n    expr: kv_max >= 0.5 and class != null\n"
        "    annotations: {diagnosis: '{{ class }}: {{ summary }}', hints: '{{ hints }}'}\n"
    )
    settings = load_settings(
        None,
        {
            "targets": [{"name": "live", "url": vllm.url + "/metrics"}],
            "storage": {"path": str(tmp_path / "pw.db")},
            "alerts": {"default_rules": False, "rules_file": str(rules)},
        },
    )
    try:
        with serving(create_app(settings, start_jobs=False)) as c:
            svc = service(c)
            for _ in range(3):
                c.loop.run_until_complete(svc.scrape_job())
                last = time.time()  # the next scrape a later time than this one's
                wait_for(lambda t=last: time.time() > t + 0.01, what="the clock moving on")
            svc.evaluate_alerts(time.time())
            (alert,) = c.get("/api/v1/alerts").json()
            assert alert["labels"]["model_name"] == "llama"
            assert alert["labels"]["target"] == "live"
            # Three scrapes cover a sliver of the 60 s window: said so, never "healthy".
            assert alert["annotations"]["diagnosis"].startswith("insufficient_data: ")
            (d,) = c.get("/api/v1/diagnoses", params={"target": "live"}).json()
            assert (d["model_name"], d["class"]) == ("llama", "insufficient_data")
            # A second evaluation a moment later with the same verdict is not stored again.
            svc.evaluate_alerts(time.time())
            assert len(c.get("/api/v1/diagnoses", params={"target": "live"}).json()) == 1
    finally:
        vllm.close()
