"""Serve live ``/metrics`` for one or many simulated replicas.

Each engine advances lazily: a request for a page runs its engine up to the current sim
time (``(now - start) * speed``) and renders it, so idle or rarely fetched replicas cost
nothing between fetches. A large fleet can share engines (``engines=K``: replica ``i``
shows engine ``i mod K``), which makes a thousand replicas cost K engines plus the page
renders, and can give every replica its own ``model_name`` (``model_per_replica``) so
that no two replicas' series texts are the same, as with a fleet of distinct models. A
replica can run a scenario of its own (``replica_scenarios``: the same scenario with
other overrides, e.g. three times the traffic), to make one replica of a fleet the slow
or overloaded one.
Connections are kept alive (HTTP/1.1), as vLLM's server does. Routes::

    /metrics                   replica 0 (only when there is one replica)
    /replica/{i}/metrics       replica i
    /truth, /replica/{i}/truth the ground-truth intervals so far (JSON lines, last hour)
    POST /v1/completions, /v1/chat/completions, /api/generate (and under /replica/{i}/)
                               streamed answers timed by the engine (``app.sim.serving``)
    /healthz
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from app.sim.engine import Replica
from app.sim.exposition import CONTENT_TYPE, TextWriter
from app.sim.families import replica_families
from app.sim.httpbase import QuietHandler, QuietServer
from app.sim.scenario import Scenario, load
from app.sim.serving import ROUTES, answer
from app.sim.truth import Account, Verdict, row

_ROUTE = re.compile(r"^/replica/(\d+)/(metrics|truth)$")
_POST_ROUTE = re.compile(
    r"^(?:/replica/(\d+))?(/v1/completions|/v1/chat/completions|/api/generate)$"
)
TRUTH_KEEP = 720


class _Engine:
    """One simulated engine with its lock and its recent truth rows."""

    def __init__(self, sim: Fleet, index: int, scenario: Scenario) -> None:
        self.lock = threading.Lock()
        self.truth: deque[dict[str, Any]] = deque(maxlen=TRUTH_KEEP)
        epoch = sim.start_unix

        def keep(acct: Account, verdict: Verdict, phase: Any) -> None:
            delay = phase.config.faults.frontend_delay_s
            self.truth.append(
                row(acct, verdict, epoch, phase.name, phase.expect, phase.cause, delay)
            )

        self.replica = Replica(
            scenario,
            seed=sim.seed + 7919 * index,
            version=page_of(sim.version, index),
            on_interval=keep,
        )
        self.writer = TextWriter(replica_families(self.replica), created_ts=sim.start_unix)
        self.model_label = f'model_name="{self.replica.config.served_model_name}"'.encode()
        self.page: bytes | None = None
        self.page_at = -1.0

    def render(self, t: float, tick: float) -> bytes:
        """The page at sim time ``t``; the last one again while it is under ``tick`` old."""
        with self.lock:
            if self.page is None or not 0.0 <= t - self.page_at < tick:
                self.replica.advance_to(t)
                self.page, self.page_at = self.writer.render(), t
            return self.page


def page_of(version: str, index: int) -> str:
    """The page engine ``index`` prints: ``version``, or for "mixed" (a fleet of both
    engines) vLLM's newest on even engines and SGLang's on odd ones."""
    if version != "mixed":
        return version
    return "sglang" if index % 2 else "0.33"


class _Slot:
    """One replica: the engine it shows, and its own ``model_name`` label if it has one
    (the engine's page with the label replaced: one render serves every replica)."""

    def __init__(self, sim: Fleet, index: int, engine: _Engine) -> None:
        self.engine = engine
        self.model_label: bytes | None = None
        if sim.model_per_replica:
            name = f"{engine.replica.config.served_model_name}-{index}"
            self.model_label = f'model_name="{name}"'.encode()


class Fleet:
    """N replicas of one scenario sharing a start time; thread-safe.

    ``engines`` (default: one per replica) simulated engines drive the replicas: replica
    ``i`` shows engine ``i mod engines`` (seed ``seed + 7919 * (i mod engines)``), so
    replicas that share an engine show the same values. ``model_per_replica`` names the
    model ``{served_model_name}-{i}`` on replica ``i``'s page. A replica in
    ``replica_scenarios`` runs that scenario on an engine of its own (seed
    ``seed + 7919 * i``), shared with no other replica. ``page_tick`` (sim seconds,
    default 0: every request renders): an engine's page is served again to requests
    under that much sim time later — a load generator for a thousand replicas that
    renders each engine once a tick instead of once a request.
    """

    def __init__(
        self,
        scenario: Scenario,
        replicas: int = 1,
        seed: int = 0,
        version: str = "0.33",
        speed: float = 1.0,
        clock: Callable[[], float] = time.time,
        *,
        engines: int | None = None,
        model_per_replica: bool = False,
        replica_scenarios: Mapping[int, Scenario] | None = None,
        page_tick: float = 0.0,
        per_request_metrics: bool = True,
    ) -> None:
        if replicas < 1:
            raise ValueError("replicas must be >= 1")
        own = dict(replica_scenarios or {})
        if any(not 0 <= i < replicas for i in own):
            raise ValueError("replica_scenarios names a replica that does not exist")
        if speed <= 0:
            raise ValueError("speed must be positive")
        if engines is not None and not 1 <= engines <= replicas:
            raise ValueError("engines must be between 1 and the number of replicas")
        self.scenario = scenario
        self.n = replicas
        self.engines = replicas if engines is None else engines
        self.model_per_replica = model_per_replica
        self.replica_scenarios = own
        self.seed = seed
        self.page_tick = page_tick
        # Answers carry vLLM's per-request metrics (``--enable-per-request-metrics``).
        self.per_request_metrics = per_request_metrics
        self.version = version
        self.speed = speed
        self.clock = clock
        self.start_unix = clock()
        self._engines: dict[tuple[str, int], _Engine] = {}
        self._slots: dict[int, _Slot] = {}
        self._lock = threading.Lock()

    def _slot(self, i: int) -> _Slot:
        with self._lock:
            slot = self._slots.get(i)
            if slot is None:
                own = self.replica_scenarios.get(i)
                key = ("shared", i % self.engines) if own is None else ("own", i)
                engine = self._engines.get(key)
                if engine is None:
                    engine = self._engines[key] = _Engine(self, key[1], own or self.scenario)
                slot = self._slots[i] = _Slot(self, i, engine)
            return slot

    def sim_time(self) -> float:
        return max(0.0, (self.clock() - self.start_unix) * self.speed)

    def page(self, i: int) -> bytes:
        """The current ``/metrics`` page of replica ``i``."""
        slot = self._slot(i)
        body = slot.engine.render(self.sim_time(), self.page_tick)
        if slot.model_label is None:
            return body
        return body.replace(slot.engine.model_label, slot.model_label)

    def truth(self, i: int) -> list[dict[str, Any]]:
        """The truth rows of replica ``i``'s engine (the last hour)."""
        engine = self._slot(i).engine
        with engine.lock:
            engine.replica.advance_to(self.sim_time())
            return list(engine.truth)


class _Handler(QuietHandler):
    server: SimHTTPServer
    # Keep-alive, as vLLM's uvicorn does: a scraper reuses its connections.
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        fleet = self.server.fleet
        m = _POST_ROUTE.match(self.path.split("?", 1)[0])
        index = None if m is None else int(m.group(1) or 0)
        if m is None or index is None or index >= fleet.n or (m.group(1) is None and fleet.n > 1):
            self.close_connection = True
            return self._send(404, b"not found\n", "text/plain")
        slot = fleet._slot(index)
        label = slot.model_label or slot.engine.model_label
        model = label.decode().split('"')[1]
        answer(self, slot.engine, fleet, ROUTES[m.group(2)], model)

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        fleet = self.server.fleet
        path = self.path.split("?", 1)[0]
        if path == "/healthz":
            return self._send(200, b"ok\n", "text/plain; charset=utf-8")
        index, what = None, None
        m = _ROUTE.match(path)
        if m:
            index, what = int(m.group(1)), m.group(2)
        elif path in ("/metrics", "/truth") and fleet.n == 1:
            index, what = 0, path[1:]
        if index is None or index >= fleet.n:
            hint = "/metrics" if fleet.n == 1 else f"/replica/{{0..{fleet.n - 1}}}/metrics"
            return self._send(404, f"not found; try {hint}\n".encode(), "text/plain")
        if what == "metrics":
            return self._send(200, fleet.page(index), CONTENT_TYPE)
        lines = "".join(json.dumps(r) + "\n" for r in fleet.truth(index))
        return self._send(200, lines.encode(), "application/x-ndjson")


class SimHTTPServer(QuietServer):
    def __init__(self, address: tuple[str, int], fleet: Fleet) -> None:
        super().__init__(address, _Handler)
        self.fleet = fleet


def start_server(
    scenario: str | Scenario,
    port: int = 0,
    replicas: int = 1,
    seed: int = 0,
    *,
    version: str = "0.33",
    host: str = "127.0.0.1",
    overrides: Mapping[str, Any] | None = None,
    speed: float = 1.0,
    engines: int | None = None,
    model_per_replica: bool = False,
    replica_scenarios: Mapping[int, Scenario] | None = None,
    page_tick: float = 0.0,
    per_request_metrics: bool = True,
) -> tuple[SimHTTPServer, threading.Thread, str]:
    """Serve in a background thread; returns (server, thread, base URL).

    ``engines``, ``model_per_replica``, ``replica_scenarios``, ``page_tick`` and
    ``per_request_metrics`` as in :class:`Fleet`. Stop with
    ``server.shutdown(); server.server_close()``.
    """
    sc = scenario if isinstance(scenario, Scenario) else load(scenario, dict(overrides or {}))
    fleet = Fleet(
        sc,
        replicas=replicas,
        seed=seed,
        version=version,
        speed=speed,
        engines=engines,
        model_per_replica=model_per_replica,
        replica_scenarios=replica_scenarios,
        page_tick=page_tick,
        per_request_metrics=per_request_metrics,
    )
    server = SimHTTPServer((host, port), fleet)
    thread = threading.Thread(target=server.serve_forever, name="phasewatch-sim", daemon=True)
    thread.start()
    bound_port = server.server_address[1]
    return server, thread, f"http://{host}:{bound_port}"
