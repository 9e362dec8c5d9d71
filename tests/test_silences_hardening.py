"""Silences against hostile input: regexes, bodies before auth, sizes, times and counts.

Hang detectors run the work in a child process with a generous timeout; the failure is
"still running", never a timing assertion. Not a thread: Python's ``re`` holds the GIL
for the whole of a backtracking match, so a thread joined with a timeout never gets
control back to report the hang.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.alerts.silences import Silence, SilenceStore, new_silence, parse_matcher
from app.regex import compile_anchored
from app.store.sqlite import ScrapeRecord, Store
from tests.realbins import free_port, running
from tests.test_alerts_api import AUTH, RULES, TOKEN, ApiClient, make_client, service
from tests.waiting import wait_for

HOSTILE = r"(.*.*)*\d"  # exponential in a backtracking engine against text with no digit
LONG_TARGET = "t" * 120  # a legal target name, far past where backtracking ever ends
CHUNK = b"x" * 16384


def finishes_in_a_child(code: str, timeout: float = 30.0) -> None:
    """Run Python ``code`` in a child process; fail if it is still running at ``timeout``."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running after {timeout} s")
    assert done.returncode == 0, done.stderr[-2000:]


class CountingBody:
    """A chunked request body that counts the chunks the server pulled."""

    def __init__(self, chunks: int, chunk: bytes = CHUNK) -> None:
        self.chunks = chunks
        self.chunk = chunk
        self.read = 0

    async def stream(self) -> AsyncIterator[bytes]:
        for _ in range(self.chunks):
            self.read += 1
            yield self.chunk


# --- A: regexes are RE2 -------------------------------------------------------------------


def test_hostile_regex_matches_a_long_label_value_in_linear_time() -> None:
    finishes_in_a_child(
        "from app.alerts.silences import Matcher\n"
        f"m = Matcher('target', {HOSTILE!r}, is_regex=True)\n"
        "assert m.matches({'target': 'a' * 100_000}) is False\n"
        "assert m.matches({'target': 'a' * 100_000 + '7'}) is True\n"
    )


def test_user_regex_is_anchored_and_lookaround_is_refused_with_re2s_reason() -> None:
    either = compile_anchored("a|b")
    assert either.matches("a") and either.matches("b") and not either.matches("ab")
    with pytest.raises(ValueError, match="invalid perl operator"):
        compile_anchored("(?=x)x")


def test_hostile_regex_silence_freezes_neither_the_service_nor_its_restart(
    tmp_path: Path,
) -> None:
    port = free_port()
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    config = tmp_path / "phasewatch.yaml"
    config.write_text(
        f"""
targets:
  - {{name: {LONG_TARGET}, url: "http://127.0.0.1:9/metrics"}}
scrape: {{interval: 0.3, timeout: 0.3}}
storage: {{path: "{tmp_path / "pw.db"}"}}
server: {{port: {port}}}
api_token: {TOKEN}
alerts: {{default_rules: false, rules_file: "{rules}", evaluation_interval: 0.3}}
"""
    )
    api = f"http://127.0.0.1:{port}/api/v1"
    cmd = [sys.executable, "-m", "app.cli", "serve", "--config", str(config)]
    log = tmp_path / "serve.log"

    def last_evaluation() -> float:
        last = httpx.get(f"{api}/alerts/rules", timeout=10).json()["lastEvaluation"]
        return -1.0 if last is None else float(last)

    def firing_unsilenced() -> bool:
        alerts = httpx.get(f"{api}/alerts", timeout=10).json()  # a frozen service times out
        return [(a["state"], a["silencedBy"]) for a in alerts] == [("firing", None)]

    with running(cmd, log=log, ready_url=f"http://127.0.0.1:{port}/healthz"):
        body = {"matchers": [f'target=~"{HOSTILE}"'], "duration": "1h"}
        created = httpx.post(f"{api}/silences", json=body, headers=AUTH, timeout=10)
        assert created.status_code == 200, created.text
        sid = created.json()["silenceID"]
        wait_for(firing_unsilenced, what="the alert evaluated past the silence")
        before = last_evaluation()
    with running(cmd, log=log, ready_url=f"http://127.0.0.1:{port}/healthz"):  # same store
        wait_for(lambda: last_evaluation() > before, what="an evaluation after the restart")
        assert firing_unsilenced()
        deleted = httpx.delete(f"{api}/silences/{sid}", headers=AUTH, timeout=10)
        assert deleted.status_code == 200


def record_down(c: ApiClient, target: str, now: float) -> None:
    rec = ScrapeRecord(target, now - 1, False, "refused", "connection refused", 0.001, 0, 0)
    service(c).store.write_round([rec], [], [])


def test_stored_silences_that_cannot_apply_load_as_invalid_and_can_be_deleted(
    tmp_path: Path,
) -> None:
    with make_client(tmp_path, api_token=TOKEN):
        pass  # creates the store
    now = time.time()
    lookahead = [{"name": "target", "value": "(?=a)a", "is_regex": True, "is_equal": True}]
    db = sqlite3.connect(tmp_path / "pw.db")
    with db:
        db.executemany(
            "INSERT INTO silences VALUES (?,?,?,?,?,?)",
            [
                ("lookahead", json.dumps(lookahead), now - 60, now + 3600, "old", ""),
                ("garbled", "not json", now - 60, now + 3600, "sql", ""),
                ("empty", "[]", now - 60, now + 3600, "sql", ""),
                ("forever", '[{"name": "target", "value": "a"}]', now - 60, 1e308, "old", ""),
            ],
        )
    db.close()
    with make_client(tmp_path, api_token=TOKEN) as c:  # starts on that store
        record_down(c, "a", now)
        service(c).evaluate_alerts(now)
        (alert,) = c.get("/api/v1/alerts").json()
        assert alert["state"] == "firing" and alert["silencedBy"] is None
        listed = {s["id"]: s for s in c.get("/api/v1/silences").json()}
        assert {k: s["status"]["state"] for k, s in listed.items()} == {
            "lookahead": "invalid",
            "garbled": "invalid",
            "empty": "invalid",
            "forever": "invalid",
        }
        assert "invalid perl operator" in listed["lookahead"]["error"]
        assert "unreadable matchers" in listed["garbled"]["error"]
        assert "at least one matcher" in listed["empty"]["error"]
        assert "unreadable times" in listed["forever"]["error"]
        for sid in listed:
            assert c.delete(f"/api/v1/silences/{sid}", headers=AUTH).status_code == 200
        assert c.get("/api/v1/silences").json() == []


# --- B: auth before the body, bodies capped -----------------------------------------------


@pytest.fixture
def client(tmp_path: Path) -> Iterator[ApiClient]:
    with make_client(tmp_path, api_token=TOKEN) as c:
        yield c


JSON = {"content-type": "application/json"}


@pytest.mark.parametrize("chunk", [CHUNK, b'{"matchers": 5}'], ids=["oversize", "invalid"])
def test_unauthenticated_silence_gets_401_before_its_body_is_read(
    client: ApiClient, chunk: bytes
) -> None:
    body = CountingBody(200 if chunk is CHUNK else 1, chunk)
    resp = client.post("/api/v1/silences", content=body.stream(), headers=JSON)
    assert resp.status_code == 401
    assert body.read == 0


def test_every_write_route_checks_the_token_before_reading_the_body(client: ApiClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    writes = [
        (method, path.replace("{silence_id}", "x"))
        for path, ops in paths.items()
        for method in ops
        if method in ("post", "put", "patch", "delete")
    ]
    assert ("post", "/api/v1/silences") in writes
    for method, path in writes:
        body = CountingBody(200)
        resp = client.loop.run_until_complete(
            client.http.request(method.upper(), path, content=body.stream(), headers=JSON)
        )
        assert (method, path, resp.status_code, body.read) == (method, path, 401, 0)


def test_oversize_silence_body_is_refused_413_without_being_buffered(client: ApiClient) -> None:
    chunked = CountingBody(200)  # 3.2 MB, against a cap of 128 KiB
    resp = client.post("/api/v1/silences", content=chunked.stream(), headers={**AUTH, **JSON})
    assert resp.status_code == 413
    assert chunked.read * len(CHUNK) <= 128 * 1024 + len(CHUNK)
    declared = CountingBody(200)
    headers = {**AUTH, **JSON, "content-length": str(200 * len(CHUNK))}
    resp = client.post("/api/v1/silences", content=declared.stream(), headers=headers)
    assert resp.status_code == 413
    assert declared.read == 0


def test_ui_post_over_the_general_cap_is_refused_413(client: ApiClient) -> None:
    resp = client.post("/ui/_dash-update-component", content=b"x" * (1024 * 1024 + 1), headers=JSON)
    assert resp.status_code == 413


# --- C: sizes and times -------------------------------------------------------------------

OK = {"matchers": ['alertname="Down"'], "duration": "1h"}
DAY = 86400.0


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"comment": "c" * 4097}, "at most 4096 characters"),
        ({"createdBy": "b" * 257}, "at most 256 characters"),
        ({"matchers": [f'l{i}="v"' for i in range(65)]}, "at most 64 items"),
        ({"matchers": [{"name": "n" * 129, "value": "v"}]}, "at most 128 characters"),
        ({"matchers": [{"name": "n", "value": "v" * 1025}]}, "at most 1024 characters"),
        ({"matchers": ['n="' + "v" * 1025 + '"']}, "value longer than 1024"),
        ({"duration": None, "endsAt": 1e308}, "more than ten years ahead"),
        ({"duration": None, "endsAt": "9999-12-31T23:59:59Z"}, "more than ten years ahead"),
        ({"duration": "99999999d"}, "more than ten years ahead"),
        (
            {"startsAt": time.time() - 2 * DAY, "duration": None, "endsAt": time.time() + DAY},
            "more than a day in the past",
        ),
        ({"duration": None, "endsAt": "2100-01-01T00:00:00"}, "needs an offset"),
        ({"duration": None, "endsAt": "soon"}, "not Unix seconds or an RFC 3339 time"),
    ],
)
def test_silence_over_a_size_or_time_limit_is_refused_422(
    client: ApiClient, change: dict[str, Any], fragment: str
) -> None:
    body = {k: v for k, v in {**OK, **change}.items() if v is not None}
    resp = client.post("/api/v1/silences", json=body, headers=AUTH)
    assert resp.status_code == 422
    assert fragment in resp.text


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_times_are_refused_422(client: ApiClient, token: str) -> None:
    raw = f'{{"matchers": ["alertname=\\"Down\\""], "endsAt": {token}}}'.encode()
    resp = client.post("/api/v1/silences", content=raw, headers={**AUTH, **JSON})
    assert resp.status_code == 422
    assert "finite number" in resp.text


def at_every_limit() -> dict[str, Any]:
    return {
        "matchers": [
            {"name": f"l{i:03d}" + "n" * 124, "value": "v" * 1024, "isRegex": False}
            for i in range(64)
        ],
        "endsAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 9 * 365 * DAY)),
        "createdBy": "b" * 256,
        "comment": "c" * 4096,
    }


def alerts_settings(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    """``alerts`` as ``make_client`` writes it, with ``extra`` settings."""
    return {"default_rules": False, "rules_file": str(tmp_path / "rules.yaml"), **extra}


def test_a_silence_at_every_field_limit_is_accepted_when_its_size_is_allowed(
    tmp_path: Path,
) -> None:
    alerts = alerts_settings(tmp_path, max_silence_bytes=128 * 1024)
    with make_client(tmp_path, api_token=TOKEN, alerts=alerts) as c:
        resp = c.post("/api/v1/silences", json=at_every_limit(), headers=AUTH)
        assert resp.status_code == 200, resp.text[:300]
        (listed,) = c.get("/api/v1/silences").json()
    assert listed["status"]["state"] == "active"
    assert len(listed["matchers"]) == 64


# --- D: how many, how large ---------------------------------------------------------------


def test_a_silence_over_the_size_cap_is_refused_422_naming_the_setting(
    client: ApiClient,
) -> None:
    resp = client.post("/api/v1/silences", json=at_every_limit(), headers=AUTH)  # ~80 kB
    assert resp.status_code == 422
    assert "over the limit of 16384 (alerts.max_silence_bytes)" in resp.text
    assert client.get("/api/v1/silences").json() == []
    small = {**OK, "comment": "c" * 4096, "matchers": [f'l{i}="v"' for i in range(64)]}
    assert client.post("/api/v1/silences", json=small, headers=AUTH).status_code == 200


def test_silences_past_the_cap_are_refused_400_and_expired_ones_do_not_count(
    tmp_path: Path,
) -> None:
    with make_client(
        tmp_path, api_token=TOKEN, alerts=alerts_settings(tmp_path, max_silences=3)
    ) as c:
        ids = []
        for i in range(3):
            resp = c.post("/api/v1/silences", json={**OK, "comment": str(i)}, headers=AUTH)
            assert resp.status_code == 200, resp.text
            ids.append(resp.json()["silenceID"])
        over = c.post("/api/v1/silences", json=OK, headers=AUTH)
        assert over.status_code == 400
        assert "exceeded maximum number of silences: 3" in over.json()["detail"]
        assert c.get("/api/v1/silences").headers["X-Total-Count"] == "3"
        # An expired silence frees its place; it is still listed when asked for.
        assert c.delete(f"/api/v1/silences/{ids[0]}", headers=AUTH).status_code == 200
        assert c.post("/api/v1/silences", json=OK, headers=AUTH).status_code == 200
        assert c.post("/api/v1/silences", json=OK, headers=AUTH).status_code == 400
        every = c.get("/api/v1/silences", params={"include_expired": True, "limit": 2})
        assert every.headers["X-Total-Count"] == "4" and len(every.json()) == 2


def test_two_writers_at_the_last_place_store_one_silence(tmp_path: Path) -> None:
    store = Store(tmp_path / "pw.db")
    try:
        silences = SilenceStore(store)
        now = time.time()

        def one() -> Silence:
            return new_silence(
                [parse_matcher('alertname="Down"')],
                starts_at=now,
                ends_at=now + 3600,
                created_by="t",
                comment="",
                now=now,
            )

        assert silences.add(one(), now=now, max_kept=2)
        with ThreadPoolExecutor(8) as pool:
            took = list(pool.map(lambda _: silences.add(one(), now=now, max_kept=2), range(8)))
        assert took.count(True) == 1
        assert len(silences.list(since=now)) == 2
        assert silences.add(one(), now=now + 7200, max_kept=2)  # both ended by then
    finally:
        store.close()


def test_silence_limits_are_in_the_openapi_schema(client: ApiClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    create, matcher = schemas["SilenceCreate"]["properties"], schemas["MatcherIn"]["properties"]
    assert create["matchers"]["maxItems"] == 64
    assert create["comment"]["maxLength"] == 4096
    assert create["createdBy"]["maxLength"] == 256
    assert (matcher["name"]["maxLength"], matcher["value"]["maxLength"]) == (128, 1024)
