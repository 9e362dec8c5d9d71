"""Every answer of the API is documented by its response model, and the model is true.

The OpenAPI schema gives every route a success schema that says something (not ``{}``
nor a bare object). A running service with data (two replicas of one model, a target
down, alerts firing, a stored silence RE2 refuses) is asked every route; each answer
validates against its route's model, declares every field it carries (no field passes
undeclared) and is unchanged by the model — same values, same key order — including
the ``/windows`` answers, which are written from encoded windows and never validated
at run time.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.routing import APIRoute
from pydantic import BaseModel, TypeAdapter

from app.api.routes import (
    alerts,
    diagnoses,
    fleet,
    headroom,
    health,
    probes,
    reload,
    silences,
    slo,
    targets,
    windows,
)
from app.config import load_settings
from app.main import create_app
from app.store.sqlite import Store
from tests.faults import FaultServer
from tests.test_e2e import ServiceThread
from tests.waiting import wait_for

TOKEN = "schema-token-0123456789"
RULES = """
rules:
  - alert: TestTargetDown
    expr: target_up == 0
    for: 0s
    severity: critical
    value: scrape_error_kind
  - alert: TestSlowTokens
    expr: itl_p99 > 0.05
    for: 0s
    severity: warning
    annotations:
      summary: "ITL p99 {{ value | seconds }}"
"""
BAD_REGEX = [{"name": "target", "value": "(?<=x)a", "is_regex": True, "is_equal": True}]

# One request per route; a route missing here fails the coverage test.
ASKED: dict[tuple[str, str], str] = {
    ("GET", "/api/v1/targets"): "/api/v1/targets",
    ("GET", "/api/v1/windows"): "/api/v1/windows?target=a",
    ("GET", "/api/v1/alerts"): "/api/v1/alerts?include_resolved=true",
    ("GET", "/api/v1/alerts/history"): "/api/v1/alerts/history",
    ("GET", "/api/v1/alerts/rules"): "/api/v1/alerts/rules",
    ("GET", "/api/v1/alerts/outbox"): "/api/v1/alerts/outbox",
    ("GET", "/api/v1/silences"): "/api/v1/silences?include_expired=true",
    ("GET", "/api/v1/diagnoses"): "/api/v1/diagnoses?target=a",
    ("GET", "/api/v1/fleets"): "/api/v1/fleets",
    ("GET", "/api/v1/fleets/{name}/windows"): "/api/v1/fleets/llama/windows",
    ("GET", "/api/v1/slos"): "/api/v1/slos",
    ("GET", "/api/v1/targets/{name}/headroom"): "/api/v1/targets/a/headroom",
    ("GET", "/api/v1/fleets/{model}/headroom"): "/api/v1/fleets/llama/headroom",
    ("GET", "/api/v1/slos/{name}/history"): "/api/v1/slos/default/history",
    ("GET", "/api/v1/health/components"): "/api/v1/health/components",
    ("GET", "/api/v1/probes"): "/api/v1/probes",
    ("GET", "/healthz"): "/healthz",
}
NOT_JSON = {("GET", "/metrics")}


def _app() -> Any:
    return create_app(load_settings(None, {"api_token": TOKEN}), start_jobs=False)


def _vague(schema: dict[str, Any]) -> bool:
    """``{}``, a bare object, or an array of either: a schema that documents nothing."""
    if not schema:
        return True
    if schema.get("type") == "object":
        return not ({"properties", "additionalProperties", "$ref"} & schema.keys())
    if schema.get("type") == "array":
        return _vague(schema.get("items", {}))
    return False


def _routes() -> dict[tuple[str, str], APIRoute]:
    """Every route by (method, path), from the routers ``app.main`` mounts (all under
    ``/api/v1`` but the health and reload routers')."""
    out = {}
    modules = (
        alerts,
        diagnoses,
        fleet,
        headroom,
        health,
        probes,
        reload,
        silences,
        slo,
        targets,
        windows,
    )
    for module in modules:
        prefix = "" if module in (health, reload) else "/api/v1"
        for route in module.router.routes:
            if isinstance(route, APIRoute) and route.include_in_schema:
                for method in route.methods:
                    out[(method, prefix + route.path_format)] = route
    return out


def test_every_route_documents_its_success_answer() -> None:
    paths = _app().openapi()["paths"]
    assert paths
    for path, operations in paths.items():
        for method, op in operations.items():
            success = {c: r for c, r in op["responses"].items() if c.startswith("2")}
            assert success, f"{method} {path}: no 2xx answer documented"
            for code, answer in success.items():
                content = answer.get("content", {})
                assert content, f"{method} {path} {code}: no content documented"
                for media, body in content.items():
                    schema = body.get("schema", {})
                    assert not _vague(schema), f"{method} {path} {code} {media}: {schema}"


def test_every_json_route_is_asked_below_with_its_model() -> None:
    paths = _app().openapi()["paths"]
    documented = {(m.upper(), p) for p, ops in paths.items() for m in ops}
    routes = _routes()
    assert set(routes) == documented
    assert {k for k in routes if k[0] == "GET"} - NOT_JSON == set(ASKED)
    assert all(r.response_model is not None for k, r in routes.items() if k not in NOT_JSON)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp: Path = tmp_path_factory.mktemp("schemas")
    (tmp / "rules.yaml").write_text(RULES)
    Store(str(tmp / "pw.db")).close()  # the schema, for the silence an old version wrote
    with sqlite3.connect(tmp / "pw.db") as db:
        db.execute(
            "INSERT INTO silences VALUES (?,?,?,?,?,?)",
            ("old", json.dumps(BAD_REGEX), 0.0, 253402300799.0, "old", "lookbehind"),
        )
    db.close()
    with FaultServer() as srv:
        settings = load_settings(
            None,
            {
                "targets": [
                    {"name": "a", "url": srv.url("/a"), "labels": {"zone": "x"}},
                    {"name": "b", "url": srv.url("/b")},
                    {"name": "down", "url": "http://127.0.0.1:1/metrics"},
                ],
                "scrape": {"interval": 0.5, "timeout": 2.0},
                # A probe whose server answers nothing it can read (a failed probe).
                "probes": [
                    {
                        "name": "p",
                        "kind": "openai_completions",
                        "url": srv.url("/probe"),
                        "model": "m",
                        "interval": 1,
                        "timeout": 1,
                    }
                ],
                "storage": {"path": str(tmp / "pw.db")},
                "api_token": TOKEN,
                "alerts": {
                    "evaluation_interval": 0.5,
                    "rules_file": str(tmp / "rules.yaml"),
                    "receivers": {"webhook": [srv.url("/hook")]},
                },
            },
        )
        svc = ServiceThread(create_app(settings))
        try:
            api = svc.url + "/api/v1"
            wait_for(lambda: len(httpx.get(api + "/alerts").json()) >= 3)
            wait_for(lambda: httpx.get(api + "/diagnoses?target=a").json() != [])
            wait_for(lambda: httpx.get(api + "/probes").json()[0]["latest"] is not None)
            yield svc.url
        finally:
            svc.close()


def _undeclared(value: object, where: str) -> list[str]:
    """The fields a validated answer carried that its models do not declare."""
    if isinstance(value, BaseModel):
        out = [f"{where}.{k}" for k in value.model_extra or {}]
        for name in type(value).model_fields:
            out += _undeclared(getattr(value, name), f"{where}.{name}")
        return out
    if isinstance(value, list):
        return [u for i, v in enumerate(value) for u in _undeclared(v, f"{where}[{i}]")]
    if isinstance(value, dict):
        return [u for k, v in value.items() for u in _undeclared(v, f"{where}.{k}")]
    return []


def _same(answer: Any, written: Any, where: str) -> None:
    """The answer as its model writes it: equal values, keys in the same order."""
    if isinstance(answer, dict):
        assert isinstance(written, dict), where
        assert list(written) == list(answer), where
        for k, v in answer.items():
            _same(v, written[k], f"{where}.{k}")
    elif isinstance(answer, list):
        assert isinstance(written, list) and len(written) == len(answer), where
        for i, (a, w) in enumerate(zip(answer, written, strict=True)):
            _same(a, w, f"{where}[{i}]")
    else:
        assert written == answer and type(written) is type(answer), where


def _check(route: APIRoute, answer: Any, where: str) -> None:
    model: TypeAdapter[Any] = TypeAdapter(route.response_model)
    validated = model.validate_python(answer)
    assert _undeclared(validated, where) == []
    _same(answer, model.dump_python(validated, mode="json", by_alias=True), where)


def test_every_answer_is_declared_by_its_model_and_unchanged_by_it(live: str) -> None:
    routes = _routes()
    for key, url in ASKED.items():
        resp = httpx.get(live + url, timeout=30)
        assert resp.status_code == 200, (url, resp.text[:300])
        answer = resp.json()
        assert answer, f"{url}: nothing to check"
        _check(routes[key], answer, url)


def test_silence_answers_and_the_invalid_silence_match_their_models(live: str) -> None:
    routes = _routes()
    auth = {"Authorization": f"Bearer {TOKEN}"}
    created = httpx.post(
        live + "/api/v1/silences",
        json={"matchers": ['target="b"'], "duration": "1h"},
        headers=auth,
        timeout=30,
    )
    assert created.status_code == 200
    _check(routes[("POST", "/api/v1/silences")], created.json(), "POST")
    listed = {s["id"]: s for s in httpx.get(live + "/api/v1/silences", timeout=30).json()}
    assert listed["old"]["status"] == {"state": "invalid"}
    assert "bad regex" in listed["old"]["error"]
    sid = created.json()["silenceID"]
    assert listed[sid]["error"] is None
    deleted = httpx.delete(f"{live}/api/v1/silences/{sid}", headers=auth, timeout=30)
    assert deleted.status_code == 200
    _check(routes[("DELETE", "/api/v1/silences/{silence_id}")], deleted.json(), "DELETE")


def test_metrics_answer_prometheus_text(live: str) -> None:
    resp = httpx.get(live + "/metrics", timeout=30)
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/plain")
