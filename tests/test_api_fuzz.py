"""The HTTP API fuzzed from its own OpenAPI schema (schemathesis) against the running
service: a real uvicorn on a free loopback port, a loopback vLLM target with data, the
write token set so the write routes are exercised past their auth check.

A failure is a 5xx answer, an answer that breaks the schema the API declares, or one
larger than 10 MB; a request still unanswered after 30 s fails on its timeout (a hang
detector, not a timing claim). ``make test`` runs a few examples per operation;
``make fuzz`` many more (``PHASEWATCH_API_FUZZ_EXAMPLES``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error, response_schema_conformance

from app.config import load_settings
from app.main import create_app
from tests.faults import FaultServer
from tests.test_e2e import ServiceThread
from tests.waiting import wait_for

EXAMPLES = int(os.environ.get("PHASEWATCH_API_FUZZ_EXAMPLES", "12"))
MAX_ANSWER_BYTES = 10 * 1024 * 1024
REQUEST_TIMEOUT_S = 30.0
TOKEN = "fuzz-token-0123456789"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp: Path = tmp_path_factory.mktemp("fuzz")
    with FaultServer() as srv:
        settings_ = load_settings(
            None,
            {
                "targets": [
                    {"name": "a", "url": srv.url("/a")},
                    {"name": "b", "url": srv.url("/b")},
                ],
                "scrape": {"interval": 0.5, "timeout": 2.0},
                "storage": {"path": str(tmp / "pw.db")},
                "api_token": TOKEN,
                "alerts": {"evaluation_interval": 0.5},
            },
        )
        svc = ServiceThread(create_app(settings_))
        try:
            wait_for(lambda: srv.route("/a").pages >= 3 and srv.route("/b").pages >= 3)
            yield svc.url
        finally:
            svc.close()


def answer_within_10_mb(ctx: Any, response: Any, case: Any) -> bool | None:
    """No answer of the API is larger than 10 MB."""
    size = len(response.content)
    if size > MAX_ANSWER_BYTES:
        raise AssertionError(f"{case.method} {case.formatted_path}: answer of {size:,} bytes")
    return None


def _schema() -> Any:
    """The schema the service serves on /openapi.json (the app is built, not started)."""
    app = create_app(load_settings(None, {"api_token": TOKEN}), start_jobs=False)
    return schemathesis.openapi.from_dict(app.openapi())


schema = _schema()


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=os.environ.get("PHASEWATCH_API_FUZZ_EXAMPLES") is None,
)
def test_api_answers_without_5xx_within_its_schema_and_size(case: Any, live: str) -> None:
    response = case.call(
        base_url=live,
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=REQUEST_TIMEOUT_S,
    )
    case.validate_response(
        response,
        checks=[not_a_server_error, response_schema_conformance, answer_within_10_mb],
    )


# Every route that reads a JSON body: the write routes of the schema, and the UI's callbacks.
BODY_ROUTES = [
    *sorted(
        path.replace("{silence_id}", "x")
        for path, ops in schema.raw_schema["paths"].items()
        if "post" in ops or "put" in ops
    ),
    "/ui/_dash-update-component",
]


def nested(openers: list[str], levels: int, closed: bool) -> bytes:
    """``levels`` arrays and objects, the ``openers`` in turn, closed or left open."""
    seq = [openers[i % len(openers)] for i in range(levels)]
    inner = "" if seq[-1] == "[" else "1"
    close = "".join("]" if o == "[" else "}" for o in reversed(seq)) if closed else ""
    return ("".join(seq) + inner + close).encode()


@given(
    path=st.sampled_from(BODY_ROUTES),
    openers=st.lists(st.sampled_from(["[", '{"a":']), min_size=1, max_size=4),
    levels=st.integers(300, 20_000),
    closed=st.booleans(),
)
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=os.environ.get("PHASEWATCH_API_FUZZ_EXAMPLES") is None,
)
def test_json_nested_thousands_deep_is_a_4xx_on_every_route_that_reads_a_body(
    live: str, path: str, openers: list[str], levels: int, closed: bool
) -> None:
    """Never the 500 of a ``RecursionError`` (``app.ui.callbody``)."""
    response = httpx.post(
        live + path,
        content=nested(openers, levels, closed),
        headers={"Authorization": f"Bearer {TOKEN}", "content-type": "application/json"},
        timeout=REQUEST_TIMEOUT_S,
    )
    assert 400 <= response.status_code < 500, (path, levels, response.status_code)


def test_the_service_still_answers_after_the_fuzzing(live: str) -> None:
    assert httpx.get(live + "/healthz", timeout=REQUEST_TIMEOUT_S).json()["status"] == "ok"
