"""Restart safety: ``phasewatch serve`` killed with SIGKILL at random moments while it
scrapes, evaluates and notifies, then started again on the same store, loses nothing.

After every kill the store passes ``PRAGMA integrity_check``. At the end: the windows
served before the first kill are served unchanged; every first token the targets counted
is stored once (the deltas join up across the restarts); the alert that was firing before
the kills is still the same firing alert (one "firing" transition, the same ``firedAt``);
every outbox row is delivered; and the webhook got each notification at least once, with
extra copies only as the at-least-once rule allows (app/alerts/outbox.py: a row is marked
only after its receiver said 2xx, so a kill between the two sends that one row again —
at most one row per kill and event receiver, as an event receiver gets one row at a time).

The SIGKILL of a service whose receiver is down (pending rows delivered once after the
restart) is tests/test_alerts_integration.py's.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from app.store.sqlite import Store
from tests.faults import FaultServer
from tests.realbins import START_TIMEOUT_S, free_port, wait_http
from tests.test_alerts_integration import RULES, _serve
from tests.test_e2e import wait_rounds
from tests.waiting import wait_for

KILLS = 4
OK_TARGETS = ("ok-0", "ok-1", "ok-2")


def config_for(tmp_path: Path, srv: FaultServer, api_port: int) -> Path:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    names = [*OK_TARGETS, "down", "flap"]
    targets = "".join(f'  - {{name: {n}, url: "{srv.url("/" + n)}"}}\n' for n in names)
    config = tmp_path / "phasewatch.yaml"
    config.write_text(
        f"""
targets:
{targets}
scrape: {{interval: 0.3, timeout: 0.5}}
storage: {{path: "{tmp_path / "pw.db"}"}}
server: {{port: {api_port}}}
alerts:
  default_rules: false
  rules_file: "{rules}"
  evaluation_interval: 0.3
  send_interval: 0.1
  retry_initial: 0.2
  retry_max: 1
  receivers:
    webhook: ["{srv.url("/hook")}"]
"""
    )
    return config


def integrity(db: Path) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(db)
    try:
        return con.execute("PRAGMA integrity_check").fetchall()
    finally:
        con.close()


def test_sigkill_at_random_moments_loses_nothing_and_sends_within_at_least_once(
    tmp_path: Path,
) -> None:
    seed = int(os.environ.get("PHASEWATCH_RESTART_SEED", random.randrange(2**32)))
    print(f"PHASEWATCH_RESTART_SEED={seed}")  # shown on failure: replay with it
    rng = random.Random(seed)
    api_port = free_port()
    api = f"http://127.0.0.1:{api_port}/api/v1"
    log = tmp_path / "serve.log"
    with FaultServer() as srv:
        srv.set("/down", "status", status=500)
        config = config_for(tmp_path, srv, api_port)

        def get(path: str, **params: Any) -> Any:
            return httpx.get(api + path, params=params, timeout=5).json()

        def start() -> Any:
            proc = _serve(config, log)
            wait_http(f"http://127.0.0.1:{api_port}/healthz", timeout=START_TIMEOUT_S)
            return proc

        def firing(target: str) -> list[dict[str, Any]]:
            alerts = get("/alerts", state="firing")
            return [a for a in alerts if a["labels"]["target"] == target]

        proc = start()
        t_first = time.time()
        try:
            wait_for(lambda: firing("down"), what="the alert of the target that is down")
            wait_for(lambda: srv.route("/hook").bodies, what="its notification")
            (before,) = firing("down")
            srv.set("/flap", "status", status=503)
            wait_for(lambda: firing("flap"), what="the alert of the flapping target")
            t_served = time.time() - 1.0
            served = get("/windows", target="ok-0", start=t_first, end=t_served, window=1, step=1)
            assert served and sum(w["ttft_count"] or 0 for w in served) > 0

            stop_flapping = threading.Event()
            flap_rng = random.Random(rng.random())

            def flap() -> None:  # fires and resolves an alert at random, all along
                while not stop_flapping.wait(flap_rng.uniform(0.3, 1.2)):
                    mode = "status" if srv.route("/flap").mode == "ok" else "ok"
                    srv.set("/flap", mode, status=503)

            flapper = threading.Thread(target=flap, daemon=True)
            flapper.start()
            for _ in range(KILLS):
                # A random moment: after 1 to 10 more pages (0.3 s rounds), so before,
                # during or after its evaluations.
                pages = srv.route("/ok-0").pages + rng.randint(1, 10)
                wait_for(lambda p=pages: srv.route("/ok-0").pages >= p, what="scraping")
                proc.send_signal(signal.SIGKILL)
                proc.wait(10)
                assert integrity(tmp_path / "pw.db") == [("ok",)]
                proc = start()
            stop_flapping.set()
            flapper.join()
            srv.set("/flap", "ok")

            def settled() -> bool:
                rows = get("/alerts/outbox")["rows"]
                return not firing("flap") and not any(r.get("pending") for r in rows.values())

            wait_for(settled, timeout=15, what="the flapping alert resolved and sent")
            wait_rounds(f"http://127.0.0.1:{api_port}")  # nothing more goes out
            (after,) = firing("down")
            history = get("/alerts/history", target="down", start=t_first - 1)
            again = get("/windows", target="ok-0", start=t_first, end=t_served, window=1, step=1)
            logged = log.read_text()  # before the last, graceful stop
        finally:
            proc.terminate()
            proc.wait(10)
        received = Counter(json.dumps(b, sort_keys=True) for b in srv.route("/hook").bodies)

    # The firing alert was restored at every start, never fired anew.
    assert after["firedAt"] == before["firedAt"] and after["activeAt"] == before["activeAt"]
    assert [h["state"] for h in history] == ["firing"]
    assert again == served  # windows stored before the kills are served unchanged

    db = tmp_path / "pw.db"
    assert integrity(db) == [("ok",)]
    con = sqlite3.connect(db)
    rows = con.execute("SELECT payload, outcome FROM outbox").fetchall()
    con.close()
    assert rows and all(outcome == "sent" for _, outcome in rows), rows
    sent = Counter(json.dumps(json.loads(payload), sort_keys=True) for payload, _ in rows)
    assert set(received) == set(sent)  # every row arrived; nothing arrived that was not one
    copies = sum(received.values()) - len(received)
    print(f"{KILLS} kills, {len(sent)} notifications, {copies} sent twice")
    assert copies <= KILLS  # at least once, as documented
    assert any('"resolved"' in body for body in received)  # the flapping alert came and went

    store = Store(db)
    try:
        snapshots = store.last_snapshots()
        for name in OK_TARGETS:
            deltas = store.intervals(name, "llama", 0, 1e12)
            assert all(a.end == b.start for a, b in zip(deltas, deltas[1:], strict=False)), name
            assert not any(d.reset for d in deltas), name
            # First tokens since the first page (the baseline), each stored once.
            _, streams = snapshots[name]
            total = streams["llama"].histograms["ttft"].count
            assert sum(d.histograms["ttft"].count for d in deltas if d.histograms) == total - 10
    finally:
        store.close()
    assert "Traceback" not in logged  # no job failed, before or after a kill
