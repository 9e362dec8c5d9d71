"""Serve a simulated P/D fleet live: every replica's page, the truth, and a router.

Routes::

    /replica/{i}/metrics       replica i: prefill-0 … then decode-0 … (``/fleet`` lists them)
    /replica/{i}/truth         its ground-truth intervals (JSON lines, the last hour)
    /client/truth              what the fleet's clients saw per interval (JSON lines)
    /fleet                     the replicas, their roles and pages (JSON)
    POST /v1/completions, /v1/chat/completions, /api/generate
                               the router: prefill, KV transfer, decode, streamed as the
                               decode instance produces the tokens (``app.sim.serving``)
    /healthz

The fleet advances lazily to the current sim time (``(now − start) × speed``) when a
page, a truth or an answer is asked for. The router's answers carry no per-request
metrics: a router in front of two instances has no one server's timings to give.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, cast

from app.sim.exposition import CONTENT_TYPE, TextWriter, replica_families
from app.sim.httpbase import QuietHandler, QuietServer
from app.sim.pd import ClientAccount, ClientRequest, OnInterval, PDFleet, replica_names
from app.sim.pd_scenario import PDScenario
from app.sim.record import describe
from app.sim.scenario import Phase
from app.sim.serving import ROUTES, answer
from app.sim.truth import Account, Verdict, row

__all__ = ["PDLive", "start_pd_server"]

_ROUTE = re.compile(r"^/replica/(\d+)/(metrics|truth)$")
_POST = re.compile(r"^(/v1/completions|/v1/chat/completions|/api/generate)$")
TRUTH_KEEP = 720


class _Router:
    """What ``app.sim.serving.answer`` asks of a replica, answered by the whole fleet."""

    pending_end = -1.0

    def __init__(self, live: PDLive) -> None:
        self.live = live

    @property
    def cfg(self) -> Any:
        return self.live.fleet.decode[0].cfg

    def advance_to(self, t: float) -> None:
        self.live.fleet.advance_to(t)

    def submit(self, prompt: int, output: int, max_tokens: int, at: float) -> ClientRequest:
        return self.live.fleet.submit_client(prompt, output, at)


class PDLive:
    """A P/D fleet on the wall clock, thread-safe (one lock for the whole fleet)."""

    per_request_metrics = False

    def __init__(
        self,
        sc: PDScenario,
        seed: int = 0,
        version: str = "0.33",
        speed: float = 1.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if speed <= 0:
            raise ValueError("speed must be positive")
        self.sc = sc
        self.seed = seed
        self.version = version
        self.speed = speed
        self.clock = clock
        self.start_unix = clock()
        self.lock = threading.Lock()
        self.names = replica_names(sc)
        self.truths: dict[str, deque[dict[str, Any]]] = {
            name: deque(maxlen=TRUTH_KEEP) for name, _ in self.names
        }
        self.client: deque[dict[str, Any]] = deque(maxlen=TRUTH_KEEP)
        self.fleet = PDFleet(sc, seed, version, self._hook, self._client)
        self.writers = [
            TextWriter(replica_families(rep), created_ts=self.start_unix)
            for rep in self.fleet.replicas
        ]
        self.replica = _Router(self)  # ``answer`` reads ``engine.replica``
        self.model = sc.fleet.base.served_model_name

    def _hook(self, name: str) -> OnInterval:
        kept = self.truths[name]

        def keep(acct: Account, verdict: Verdict, phase: Phase) -> None:
            kept.append(row(acct, verdict, self.start_unix, phase.name, phase.expect))

        return keep

    def _client(self, acct: ClientAccount) -> None:
        self.client.append(acct.row(self.start_unix))

    @property
    def n(self) -> int:
        return len(self.names)

    def sim_time(self) -> float:
        return max(0.0, (self.clock() - self.start_unix) * self.speed)

    def page(self, i: int) -> bytes:
        with self.lock:
            self.fleet.advance_to(self.sim_time())
            return self.writers[i].render()

    def truth(self, i: int) -> list[dict[str, Any]]:
        with self.lock:
            self.fleet.advance_to(self.sim_time())
            return list(self.truths[self.names[i][0]])

    def client_truth(self) -> list[dict[str, Any]]:
        with self.lock:
            self.fleet.advance_to(self.sim_time())
            return list(self.client)

    def describe(self, base_url: str) -> dict[str, Any]:
        """The fleet: its replicas with role and page, and what is simulated."""
        return {
            "scenario": self.sc.name,
            "model_name": self.model,
            "replicas": [
                {"index": i, "name": name, "role": role, "url": f"{base_url}/replica/{i}/metrics"}
                for i, (name, role) in enumerate(self.names)
            ],
            "fleet": describe(self.sc.fleet, self.seed, self.version, self.start_unix, 0.0),
        }


class _Handler(QuietHandler):
    server: PDHTTPServer
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        live = self.server.live
        m = _POST.match(self.path.split("?", 1)[0])
        if m is None:
            self.close_connection = True
            return self._send(404, b"not found\n", "text/plain")
        answer(self, cast(Any, live), live, ROUTES[m.group(1)], live.model)

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        live = self.server.live
        path = self.path.split("?", 1)[0]
        if path == "/healthz":
            return self._send(200, b"ok\n", "text/plain; charset=utf-8")
        if path == "/fleet":
            host, port = self.server.server_address[:2]
            body = json.dumps(live.describe(f"http://{host!s}:{port}"), indent=2).encode()
            return self._send(200, body, "application/json")
        if path == "/client/truth":
            lines = "".join(json.dumps(r) + "\n" for r in live.client_truth())
            return self._send(200, lines.encode(), "application/x-ndjson")
        m = _ROUTE.match(path)
        if m is None or int(m.group(1)) >= live.n:
            hint = f"/replica/{{0..{live.n - 1}}}/metrics or /fleet"
            return self._send(404, f"not found; try {hint}\n".encode(), "text/plain")
        i = int(m.group(1))
        if m.group(2) == "metrics":
            return self._send(200, live.page(i), CONTENT_TYPE)
        lines = "".join(json.dumps(r) + "\n" for r in live.truth(i))
        return self._send(200, lines.encode(), "application/x-ndjson")


class PDHTTPServer(QuietServer):
    def __init__(self, address: tuple[str, int], live: PDLive) -> None:
        super().__init__(address, _Handler)
        self.live = live


def start_pd_server(
    sc: PDScenario,
    port: int = 0,
    seed: int = 0,
    *,
    version: str = "0.33",
    host: str = "127.0.0.1",
    speed: float = 1.0,
) -> tuple[PDHTTPServer, threading.Thread, str]:
    """Serve the fleet in a background thread; returns (server, thread, base URL). Stop
    with ``server.shutdown(); server.server_close()``."""
    live = PDLive(sc, seed, version, speed)
    server = PDHTTPServer((host, port), live)
    thread = threading.Thread(target=server.serve_forever, name="phasewatch-sim-pd", daemon=True)
    thread.start()
    return server, thread, f"http://{host}:{server.server_address[1]}"
