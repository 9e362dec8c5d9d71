"""file_sd and http_sd: targets found the way Prometheus finds them, scraped from the next
round, removed ones gone with their history kept and their alerts resolved.

The pure reading of target groups is checked on literals; the rest runs the service on a
free loopback port against the simulator's replicas (``/replica/{i}/metrics``), with a
real file watched by ``watchfiles`` and a real HTTP endpoint.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.config import FileSdConfig, HttpSdConfig, load_settings
from app.main import create_app
from app.sim.server import start_server
from app.sources.discovery import MergedTargets, discovery_for, unused
from app.sources.discovery.file_sd import FileDiscovery
from app.sources.discovery.groups import GroupsError, targets_of
from app.sources.discovery.http_sd import HttpDiscovery
from tests.test_e2e import ServiceThread
from tests.waiting import wait_for

ALWAYS = """rules:
  - alert: Scraped
    expr: target_up == 1
    severity: info
    annotations:
      summary: "{{ labels.target }} answers"
"""


# -- target groups -----------------------------------------------------------------------


def test_groups_become_targets_with_path_scheme_and_name_from_labels() -> None:
    data = [
        {"targets": ["10.0.0.5:8000"], "labels": {"pod": "vllm-0", "__meta_x": "y"}},
        {
            "targets": ["10.0.0.6:8443"],
            "labels": {"pod": "vllm-1", "__scheme__": "https", "__metrics_path__": "/m"},
        },
        {"targets": ["10.0.0.7:8000"]},
    ]
    found = targets_of(data, scheme="http", metrics_path="/metrics", name_label="pod")
    assert [(t.name, t.url, t.labels) for t in found.targets] == [
        ("vllm-0", "http://10.0.0.5:8000/metrics", {"pod": "vllm-0"}),
        ("vllm-1", "https://10.0.0.6:8443/m", {"pod": "vllm-1"}),
        ("10.0.0.7:8000", "http://10.0.0.7:8000/metrics", {}),  # no pod label: the address
    ]
    assert found.skipped == 0


def test_bad_entries_are_skipped_alone_and_the_first_of_a_name_is_kept() -> None:
    data = [
        {"targets": ["a:1", "http://b:2", "c:3/x", "a:1", "d e:4"], "labels": {}},
        {"targets": ["e:5"], "labels": {"__scheme__": "ftp"}},
    ]
    found = targets_of(data, scheme="http", metrics_path="/metrics", name_label=None)
    assert [t.name for t in found.targets] == ["a:1"]
    assert found.skipped == 5
    assert any("named twice" in w for w in found.why)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ({"targets": ["a:1"]}, "not a list"),
        ([{"labels": {}}], "[0].targets"),
        ([{"targets": ["a:1"], "labels": {"x": 1}}], "[0].labels.x"),
        ([{"targets": ["a:1"], "labels": {"x": "v" * 5000}}], "longer than"),
        ([{"targets": [f"h:{i}" for i in range(11)]}], "more than 10 targets"),
    ],
)
def test_a_list_that_is_not_target_groups_is_refused_whole(data: Any, says: str) -> None:
    with pytest.raises(GroupsError, match=says.replace("[", r"\[").replace("]", r"\]")):
        targets_of(data, scheme="http", metrics_path="/metrics", name_label=None, max_targets=10)


def test_a_reload_keeps_running_the_discovery_configs_it_did_not_change(tmp_path: Path) -> None:
    files = {"files": [str(tmp_path / "a.json")]}
    first = discovery_for(
        load_settings(None, {"file_sd": [files], "http_sd": [{"url": "http://127.0.0.1:9/a"}]})
    )
    second = discovery_for(
        load_settings(None, {"file_sd": [files], "http_sd": [{"url": "http://127.0.0.1:9/b"}]}),
        previous=first,
    )
    assert isinstance(first, MergedTargets) and isinstance(second, MergedTargets)
    assert second.configs[0] is first.configs[0]  # its last list and watcher go on
    assert second.configs[1] is not first.configs[1]
    assert unused(first, second) == [first.configs[1]]


# -- file_sd on a folder anyone may write into ---------------------------------------------


def hosts(n: int, first: int = 0) -> list[dict[str, Any]]:
    return [{"targets": [f"10.0.0.{i}:8000" for i in range(first, first + n)]}]


def refreshed(sd: FileDiscovery, now: float = 0.0, *, unblock: Path | None = None) -> None:
    """Refresh ``sd`` as a round does, on an event loop in a thread of its own, and fail
    (not hang) unless it finishes within 10 s. ``unblock``: a FIFO to open for writing if
    it does not, so that a read stuck on it ends with the test."""
    done = threading.Event()

    async def once() -> None:
        try:
            await sd.refresh(now)
        finally:
            await sd.aclose()

    def run() -> None:
        try:
            asyncio.run(once())
        finally:
            done.set()

    threading.Thread(target=run, daemon=True).start()
    finished = done.wait(10.0)
    if not finished and unblock is not None:
        os.close(os.open(unblock, os.O_WRONLY | os.O_NONBLOCK))
        done.wait(10.0)
    assert finished, "the file_sd refresh did not finish within 10 s"


def names(sd: FileDiscovery) -> list[str]:
    return [t.name for t in sd.current()]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_named_json_blocks_nothing_and_the_other_files_load(tmp_path: Path) -> None:
    (tmp_path / "good.json").write_text(json.dumps(hosts(2)))
    fifo = tmp_path / "x.json"
    os.mkfifo(fifo)  # no writer: a plain open() would wait for one
    sd = FileDiscovery(FileSdConfig(files=[str(tmp_path / "*.json")]))
    refreshed(sd, unblock=fifo)
    assert names(sd) == ["10.0.0.0:8000", "10.0.0.1:8000"]
    assert sd.health.ok is False
    assert f"{fifo}: not a regular file (a FIFO)" in (sd.health.last_error or "")


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_a_symlink_to_dev_zero_is_refused_unread_and_the_file_keeps_its_targets(
    tmp_path: Path,
) -> None:
    listing = tmp_path / "vllm.json"
    listing.write_text(json.dumps(hosts(1)))
    config = FileSdConfig(files=[str(listing)], refresh_interval=1)
    sd = FileDiscovery(config)
    refreshed(sd, 0.0)
    assert names(sd) == ["10.0.0.0:8000"] and sd.health.ok
    listing.unlink()
    listing.symlink_to("/dev/zero")  # endless: read whole, it fills the memory
    refreshed(sd, 10.0)  # within 10 s, so nothing near the memory was read
    assert names(sd) == ["10.0.0.0:8000"]  # its last good targets
    assert sd.health.ok is False
    assert "not a regular file (a character device)" in (sd.health.last_error or "")


def test_a_file_over_the_byte_cap_is_refused_and_keeps_its_last_targets(tmp_path: Path) -> None:
    listing = tmp_path / "vllm.json"
    text = json.dumps(hosts(1))
    listing.write_text(text)
    sd = FileDiscovery(FileSdConfig(files=[str(listing)], refresh_interval=1), max_bytes=len(text))
    refreshed(sd, 0.0)  # exactly at the cap: read
    assert names(sd) == ["10.0.0.0:8000"] and sd.health.ok
    listing.write_text(text + " ")
    refreshed(sd, 10.0)
    assert names(sd) == ["10.0.0.0:8000"]
    assert sd.health.last_error == f"{listing}: over {len(text)} bytes"


def test_a_file_over_max_targets_is_refused_whole_and_the_last_list_kept(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(hosts(3)))
    sd = FileDiscovery(
        FileSdConfig(files=[str(tmp_path / "*.json")], max_targets=3, refresh_interval=1)
    )
    refreshed(sd, 0.0)
    three = names(sd)
    assert len(three) == 3 and sd.health.ok
    a.write_text(json.dumps(hosts(4)))  # max_targets + 1 in one file
    refreshed(sd, 10.0)
    assert names(sd) == three and sd.health.ok is False
    assert sd.health.last_error == f"{a}: more than 3 targets"
    # Within the cap each, over it in all: the whole read is refused, every list kept.
    a.write_text(json.dumps(hosts(2)))
    b.write_text(json.dumps(hosts(2, first=10)))
    refreshed(sd, 20.0)
    assert names(sd) == three and sd.health.ok is False
    assert "more than 3 targets in all" in (sd.health.last_error or "")
    b.unlink()
    refreshed(sd, 30.0)
    assert names(sd) == ["10.0.0.0:8000", "10.0.0.1:8000"] and sd.health.ok


def test_a_regular_file_and_a_symlink_to_one_are_read(tmp_path: Path) -> None:
    folder, elsewhere = tmp_path / "sd", tmp_path / "..data"
    folder.mkdir()
    elsewhere.mkdir()
    (folder / "a.yaml").write_text(json.dumps(hosts(1)))
    (elsewhere / "b.json").write_text(json.dumps(hosts(1, first=5)))
    (folder / "b.json").symlink_to(elsewhere / "b.json")  # as a ConfigMap's files are
    sd = FileDiscovery(FileSdConfig(files=[str(folder / "*")]))
    refreshed(sd)
    assert sorted(names(sd)) == ["10.0.0.0:8000", "10.0.0.5:8000"]
    assert sd.health.ok and sd.health.loaded and sd.health.targets == 2


# -- against the simulator ---------------------------------------------------------------


@pytest.fixture(scope="module")
def sim() -> Iterator[str]:
    server, _, base = start_server("healthy", replicas=4)
    try:
        yield base
    finally:
        server.shutdown()
        server.server_close()


def groups(base: str, replicas: list[int]) -> list[dict[str, Any]]:
    """One group per replica: the simulator's address, its path, its name as a label."""
    host = base.removeprefix("http://")
    return [
        {
            "targets": [host],
            "labels": {"__metrics_path__": f"/replica/{i}/metrics", "replica": f"r{i}"},
        }
        for i in replicas
    ]


def settings_for(tmp_path: Path, **discovery: Any) -> Any:
    rules = tmp_path / "rules.yaml"
    rules.write_text(ALWAYS)
    return load_settings(
        None,
        {
            **discovery,
            "scrape": {"interval": 0.25, "timeout": 2.0},
            "storage": {"path": str(tmp_path / "pw.db")},
            "alerts": {
                "evaluation_interval": 0.25,
                "default_rules": False,
                "rules_file": str(rules),
            },
        },
    )


def targets(url: str) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in httpx.get(url + "/api/v1/targets", timeout=10).json()}


def alerts(url: str) -> dict[str, dict[str, Any]]:
    rows = httpx.get(url + "/api/v1/alerts", params={"include_resolved": True}, timeout=10)
    return {a["labels"]["target"]: a for a in rows.json()}


def scraped(url: str, names: set[str]) -> bool:
    now = targets(url)
    return {n for n, t in now.items() if t["up"] and not t["gone"]} == names


def test_a_file_change_adds_and_removes_targets_and_resolves_the_removed_ones_alerts(
    sim: str, tmp_path: Path
) -> None:
    folder = tmp_path / "sd"
    folder.mkdir()
    listing = folder / "vllm.json"
    listing.write_text(json.dumps(groups(sim, [0, 1])))
    # A day between timed re-reads: only the watcher can see the change in time.
    settings = settings_for(
        tmp_path,
        file_sd=[
            {"files": [str(folder / "*.json")], "name_label": "replica", "refresh_interval": "1d"}
        ],
    )
    svc = ServiceThread(create_app(settings))
    try:
        wait_for(lambda: scraped(svc.url, {"r0", "r1"}))
        wait_for(
            lambda: (
                {n for n, a in alerts(svc.url).items() if a["state"] == "firing"} == {"r0", "r1"}
            )
        )
        r1_since = alerts(svc.url)["r1"]["activeAt"]
        # Replaced as an editor or a ConfigMap does it: a new file renamed over the old.
        staged = folder / ".vllm.json.tmp"
        staged.write_text(json.dumps(groups(sim, [1, 2])))
        os.replace(staged, listing)

        wait_for(lambda: scraped(svc.url, {"r1", "r2"}))
        gone = targets(svc.url)["r0"]
        assert gone["gone"] is True and gone["up"] is False and gone["models"]
        # Its history stays: the windows of its stream are still served.
        windows = httpx.get(
            svc.url + "/api/v1/windows",
            params={"target": "r0", "window": 5, "step": 5, "start": gone["last_scrape"] - 20},
            timeout=10,
        )
        assert windows.status_code == 200 and windows.json()
        wait_for(lambda: alerts(svc.url)["r0"]["state"] == "inactive")
        removed = alerts(svc.url)["r0"]
        assert removed["annotations"]["resolution"] == "target removed"
        assert removed["annotations"]["summary"] == "r0 answers"
        # The other targets' alerts keep their state: r1 fires since before the change.
        assert alerts(svc.url)["r1"]["state"] == "firing"
        assert alerts(svc.url)["r1"]["activeAt"] == r1_since
        history = httpx.get(svc.url + "/api/v1/alerts/history", timeout=10).json()
        resolved = [
            h for h in history if h["labels"]["target"] == "r0" and h["state"] == "resolved"
        ]
        assert resolved and resolved[-1]["annotations"]["resolution"] == "target removed"
        metrics = httpx.get(svc.url + "/metrics", timeout=10).text
        assert 'target="r0"' not in metrics  # its scrape series are dropped
        assert 'phasewatch_held_entries{kind="target_states"} 2.0' in metrics
    finally:
        svc.close()


def test_a_file_that_breaks_keeps_its_last_targets_and_says_why(sim: str, tmp_path: Path) -> None:
    listing = tmp_path / "vllm.yaml"
    listing.write_text(json.dumps(groups(sim, [3])))  # JSON is YAML too
    settings = settings_for(tmp_path, file_sd=[{"files": [str(listing)], "name_label": "replica"}])
    svc = ServiceThread(create_app(settings))
    try:
        wait_for(lambda: scraped(svc.url, {"r3"}))
        listing.write_text("- targets: [unclosed\n")
        components = svc.url + "/api/v1/health/components"
        wait_for(lambda: not httpx.get(components, timeout=10).json()["discovery"][0]["ok"])
        (sd,) = httpx.get(components, timeout=10).json()["discovery"]
        assert sd["kind"] == "file_sd" and "not valid YAML" in sd["last_error"]
        assert scraped(svc.url, {"r3"})  # the last good list is still scraped
    finally:
        svc.close()


class SdEndpoint:
    """An http_sd endpoint on a free loopback port: answers ``body`` with ``status``, and
    remembers the headers of the last request."""

    def __init__(self) -> None:
        self.body = b"[]"
        self.status = 200
        self.headers: dict[str, str] = {}
        self.hits = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                outer.headers = dict(self.headers)
                outer.hits += 1
                body, status = outer.body, outer.status
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/sd"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def answer(self, data: Any, status: int = 200) -> None:
        self.body, self.status = json.dumps(data).encode(), status

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def endpoint() -> Iterator[SdEndpoint]:
    srv = SdEndpoint()
    yield srv
    srv.close()


def test_an_http_sd_list_that_changes_is_followed_and_a_failing_one_keeps_the_last(
    sim: str, tmp_path: Path, endpoint: SdEndpoint
) -> None:
    endpoint.answer(groups(sim, [0, 1]))
    settings = settings_for(
        tmp_path,
        http_sd=[
            {
                "url": endpoint.url,
                "name_label": "replica",
                "refresh_interval": 0.25,
                "bearer_token": "sd-token-123",
                "max_targets": 3,
                "max_body_bytes": 4096,
            }
        ],
    )
    svc = ServiceThread(create_app(settings))
    components = svc.url + "/api/v1/health/components"

    def sd() -> dict[str, Any]:
        return httpx.get(components, timeout=10).json()["discovery"][0]

    try:
        wait_for(lambda: scraped(svc.url, {"r0", "r1"}))
        assert endpoint.headers["Authorization"] == "Bearer sd-token-123"
        assert endpoint.headers["X-Prometheus-Refresh-Interval-Seconds"] == "0.25"
        wait_for(lambda: alerts(svc.url).get("r0", {}).get("state") == "firing")
        endpoint.answer(groups(sim, [1, 2]))
        wait_for(lambda: scraped(svc.url, {"r1", "r2"}))
        assert targets(svc.url)["r0"]["gone"] is True
        wait_for(lambda: alerts(svc.url)["r0"]["annotations"].get("resolution") == "target removed")

        # Untrusted answers that cannot be used keep the last good list.
        for data, status, says in (
            ([], 503, "HTTP 503"),
            ({"not": "groups"}, 200, "not a list"),
            (groups(sim, [0, 1, 2, 3]), 200, "more than 3 targets"),
            ([{"targets": ["x:1"], "labels": {"pad": "p" * 1000}}] * 8, 200, "4096-byte cap"),
        ):
            endpoint.answer(data, status)
            wait_for(lambda says=says: says in (sd()["last_error"] or ""))
            assert sd()["ok"] is False
            assert scraped(svc.url, {"r1", "r2"})
        endpoint.answer(groups(sim, [2]))
        wait_for(lambda: sd()["ok"] and scraped(svc.url, {"r2"}))
    finally:
        svc.close()


def test_an_unreachable_http_sd_endpoint_is_a_failed_look_not_an_error() -> None:
    async def look() -> HttpDiscovery:
        sd = HttpDiscovery(HttpSdConfig(url="http://127.0.0.1:9/sd", timeout=2.0))
        try:
            await sd.refresh(0.0)
        finally:
            await sd.aclose()
        return sd

    sd = asyncio.run(look())
    assert sd.current() == () and not sd.loaded
    assert sd.health.ok is False and sd.health.last_error
