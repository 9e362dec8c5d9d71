"""A graceful stop delivers the notifications that are due before the process exits."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from app.alerts.outbox import NewRow, Outbox
from app.config import load_settings
from app.service import Service


class Hook(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        self.bodies: list[Any] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                n = int(self.headers.get("Content-Length", "0"))
                hook.bodies.append(json.loads(self.rfile.read(n)))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)


def test_stop_sends_what_is_due(tmp_path: Path) -> None:
    hook = Hook()
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{hook.server_address[1]}/hook"
    settings = load_settings(
        None,
        {
            "targets": [{"name": "a", "url": "http://127.0.0.1:9/metrics"}],
            "storage": {"path": str(tmp_path / "pw.db")},
            "alerts": {"receivers": {"webhook": [url]}},
        },
    )

    async def go() -> list[Any]:
        service = Service(settings)
        rid = service.alerting.engine.receivers[0].id
        Outbox(service.store).add(
            [NewRow(rid, f"fp{i}:firing", f"fp{i}", "event", {"n": i}) for i in range(3)],
            time.time(),
        )
        await service.stop()  # never started: nothing but the drain could have sent them
        return sorted(b["n"] for b in hook.bodies)

    try:
        assert asyncio.run(go()) == [0, 1, 2]
    finally:
        hook.shutdown()
        hook.server_close()
