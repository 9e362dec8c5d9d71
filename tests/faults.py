"""A loopback vLLM ``/metrics`` server whose misbehaviour is switchable per path at run time.

One :class:`FaultServer` (a ``ThreadingHTTPServer`` on 127.0.0.1, port 0 unless given)
serves any number of paths. Each path is a :class:`Route` with a page counter ``n`` that
grows by one per successful page, so consecutive scrapes see increasing counters. Modes:

``ok``          the page for ``n`` (:func:`vllm_page`, or the server's ``source``)
``hang``        read the request, answer nothing until the fault is cleared or the server
                stops (bounded by ``HANG_MAX_S``)
``status``      an empty answer with ``route.status`` (500, 404, …)
``html``        an HTML error page with status 200 (a proxy in front of a dead server)
``junk``        binary bytes with status 200
``truncated``   half the page, with a Content-Length for the whole, then the socket closes
``huge``        ``HUGE_BYTES`` of comment lines, Content-Length declared
``huge_stream`` the same without a Content-Length (close-delimited), so only counting helps
``gzip_bomb``   ``Content-Encoding: gzip``: ~200 kB on the wire, ``BOMB_BYTES`` decoded
``flap``        odd requests answer 503, even ones the page

A POST (a notification receiver) records its JSON body in ``route.bodies`` and answers
200 in mode ``ok``; ``status`` and ``hang`` work as for GET, and so does :meth:`refuse`.

Shape changes that keep the mode ``ok``: :meth:`FaultServer.restart` (the counter goes
back down: a vLLM restart), ``route.layout`` (another TTFT bucket layout) and
``route.engines`` (engines added or removed). :meth:`FaultServer.refuse` stops listening
altogether (connections are refused) and :meth:`FaultServer.listen` comes back on the
same port. Everything binds 127.0.0.1; :meth:`FaultServer.close` ends hangs and stops.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.waiting import wait_for

HUGE_BYTES = 50 * 1024 * 1024
BOMB_BYTES = 100 * 1024 * 1024
HANG_MAX_S = 60.0
MODES = frozenset(
    {
        "ok",
        "hang",
        "status",
        "html",
        "junk",
        "truncated",
        "huge",
        "huge_stream",
        "gzip_bomb",
        "flap",
    }
)

# Per-scrape increments of the cumulative buckets (last entry: +Inf), as in tests/pages.py.
TTFT_STEP = (6, 9, 10, 10, 10)  # 10 requests per page step, sum 3.0 s
LAYOUTS: tuple[tuple[float, ...], ...] = ((0.1, 0.5, 1.0, 2.5), (0.05, 0.2, 1.0, 5.0))
ITL_BOUNDS = (0.01, 0.025, 0.05, 0.1)
ITL_STEP = (0, 50, 90, 98, 100)  # 100 tokens per page step, sum 4.0 s
HTML = b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head></html>\n"
JUNK = bytes(range(256)) * 64

_bomb: bytes | None = None
_bomb_lock = threading.Lock()


def gzip_bomb() -> bytes:
    """``BOMB_BYTES`` of one repeated line, gzip-compressed (~1000:1); built once."""
    global _bomb
    with _bomb_lock:
        if _bomb is None:
            buf = io.BytesIO()
            chunk = b"# padding\n" * 104_858  # ~1 MiB
            with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=9) as gz:
                for _ in range(BOMB_BYTES // len(chunk)):
                    gz.write(chunk)
            _bomb = buf.getvalue()
        return _bomb


def _hist(name: str, bounds: Sequence[float], cum: Sequence[float], total: float, lab: str) -> str:
    lines = [f"# HELP {name} h", f"# TYPE {name} histogram"]
    for b, c in zip([*map(repr, map(float, bounds)), "+Inf"], cum, strict=True):
        lines.append(f'{name}_bucket{{{lab},le="{b}"}} {float(c)}')
    lines.append(f"{name}_count{{{lab}}} {float(cum[-1])}")
    lines.append(f"{name}_sum{{{lab}}} {total}")
    return "\n".join(lines)


def vllm_page(
    n: int,
    *,
    engines: Sequence[str] = ("0",),
    layout: int = 0,
    model: str = "llama",
    engine_n: dict[str, int] | None = None,
) -> str:
    """A vLLM 0.33-style page after ``n`` steps, per engine (``engine_n`` overrides ``n``
    per engine, e.g. for an engine that joined later). Each engine adds, per step, 10
    first tokens (TTFT ``TTFT_STEP`` over ``LAYOUTS[layout]``), 100 token gaps, 1000 prompt
    tokens and 100 generated ones."""
    bounds = LAYOUTS[layout]
    families: dict[str, list[str]] = {}
    for engine in engines:
        k = (engine_n or {}).get(engine, n)
        lab = f'engine="{engine}",model_name="{model}"'
        parts = {
            "ttft": _hist(
                "vllm:time_to_first_token_seconds",
                bounds,
                [k * c for c in TTFT_STEP],
                k * 3.0,
                lab,
            ),
            "itl": _hist(
                "vllm:inter_token_latency_seconds",
                ITL_BOUNDS,
                [k * c for c in ITL_STEP],
                k * 4.0,
                lab,
            ),
            "running": f"vllm:num_requests_running{{{lab}}} 4.0",
            "waiting": f"vllm:num_requests_waiting{{{lab}}} 1.0",
            "kv": f"vllm:kv_cache_usage_perc{{{lab}}} 0.5",
            "prompt": f"vllm:prompt_tokens_total{{{lab}}} {float(1000 * k)}",
            "gen": f"vllm:generation_tokens_total{{{lab}}} {float(100 * k)}",
        }
        for key, text in parts.items():
            families.setdefault(key, []).append(text)
    header = {
        "running": "# HELP vllm:num_requests_running r\n# TYPE vllm:num_requests_running gauge",
        "waiting": "# HELP vllm:num_requests_waiting w\n# TYPE vllm:num_requests_waiting gauge",
        "kv": "# HELP vllm:kv_cache_usage_perc k\n# TYPE vllm:kv_cache_usage_perc gauge",
        "prompt": "# HELP vllm:prompt_tokens_total p\n# TYPE vllm:prompt_tokens_total counter",
        "gen": "# HELP vllm:generation_tokens_total g\n# TYPE vllm:generation_tokens_total counter",
    }
    out: list[str] = []
    for key, texts in families.items():
        if key in header:
            out.append(header[key])
        out.extend(texts)
    return "\n".join(out) + "\n"


@dataclass
class Route:
    """What one path does now, and what it has done."""

    mode: str = "ok"
    status: int = 500
    n: int = 0
    layout: int = 0
    engines: tuple[str, ...] = ("0",)
    engine_n: dict[str, int] = field(default_factory=dict)
    hits: int = 0
    pages: int = 0  # complete pages served
    flap_phase: int = 0
    bodies: list[Any] = field(default_factory=list)  # JSON bodies POSTed while ok


PageSource = Callable[[str, Route], bytes]


class FaultServer:
    """The switchable server; see the module docstring for the modes."""

    def __init__(self, port: int = 0, *, source: PageSource | None = None) -> None:
        self.routes: dict[str, Route] = {}
        self.lock = threading.Lock()
        self.source = source
        self._release = threading.Event()  # set: every hang ends
        self._httpd: ThreadingHTTPServer | None = None
        self._conns: set[socket.socket] = set()  # open client connections
        self._thread: threading.Thread | None = None
        self.port = port
        self.listen()

    # -- control ---------------------------------------------------------------------------
    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return self.base + path

    def route(self, path: str) -> Route:
        with self.lock:
            return self.routes.setdefault(path, Route())

    def set(self, path: str, mode: str, **params: Any) -> Route:
        """Switch ``path`` to ``mode`` (``status=…``, ``layout=…``, ``engines=…``)."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}")
        r = self.route(path)
        with self.lock:
            if r.mode == "hang" and mode != "hang":
                self._release.set()
                self._release = threading.Event()
            r.mode = mode
            for key, value in params.items():
                if not hasattr(r, key):
                    raise ValueError(f"unknown route field {key!r}")
                setattr(r, key, value)
        return r

    def restart(self, path: str) -> None:
        """The target restarts: its counters start again from zero."""
        r = self.route(path)
        with self.lock:
            r.n = 0
            r.engine_n = {}

    def refuse(self) -> None:
        """Stop listening: every connection to the port is refused until :meth:`listen`."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        with self.lock:  # a dead process takes its keep-alive connections with it
            conns, self._conns = self._conns, set()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def listen(self) -> None:
        """Listen (again) on ``self.port`` (port 0: any free one, remembered)."""
        if self._httpd is not None:
            return
        handler = _handler(self)
        # The port it had may take a moment to be free again after a close.
        httpd = wait_for(
            lambda: _Server(("127.0.0.1", self.port), handler),
            5,
            f"port {self.port} free to listen again",
            retry_on=(OSError,),
        )
        httpd.daemon_threads = True
        httpd.handle_error = _quiet_error  # type: ignore[method-assign]
        self._httpd = httpd
        self.port = httpd.server_address[1]
        self._thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._release.set()
        self.refuse()

    def __enter__(self) -> FaultServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- serving ---------------------------------------------------------------------------
    def next_page(self, path: str, r: Route) -> bytes:
        """Advance ``path``'s counter and render its page."""
        with self.lock:
            r.n += 1
            for e in r.engines:
                if e in r.engine_n:
                    r.engine_n[e] += 1
            r.pages += 1
        if self.source is not None:
            return self.source(path, r)
        return vllm_page(r.n, engines=r.engines, layout=r.layout, engine_n=r.engine_n).encode()


class _Server(ThreadingHTTPServer):
    # socketserver listens with a backlog of 5: more connections at once (a scrape round
    # reconnecting to many paths) lose their SYN and retry it a second later.
    request_queue_size = 128


def _quiet_error(request: object, client_address: object) -> None:
    """Clients that hang up (a size cap, a timeout) are part of the game: stay quiet."""


def _handler(server: FaultServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            with server.lock:
                server._conns.add(self.connection)

        def finish(self) -> None:
            with server.lock:
                server._conns.discard(self.connection)
            with contextlib.suppress(OSError):
                super().finish()

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            path = self.path.split("?", 1)[0]
            r = server.route(path)
            with server.lock:
                r.hits += 1
                mode = r.mode
                release = server._release
            # A client that gives up (size cap, timeout) breaks the pipe: expected.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self._serve(path, r, mode, release)

        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            path = self.path.split("?", 1)[0]
            r = server.route(path)
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with server.lock:
                r.hits += 1
                mode = r.mode
                release = server._release
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                if mode == "hang":
                    release.wait(HANG_MAX_S)
                    self.close_connection = True
                elif mode == "status":
                    self._send(r.status, b"receiver says no\n", "text/plain")
                else:
                    with server.lock:
                        r.bodies.append(json.loads(body))
                    self._send(200, b"", "text/plain")

        def _serve(self, path: str, r: Route, mode: str, release: threading.Event) -> None:
            if mode == "flap":
                with server.lock:
                    r.flap_phase += 1
                    down = r.flap_phase % 2 == 1
                if down:
                    return self._send(503, b"flapping\n", "text/plain")
                mode = "ok"
            if mode == "ok":
                return self._send(200, server.next_page(path, r), "text/plain; version=0.0.4")
            if mode == "hang":
                release.wait(HANG_MAX_S)
                self.close_connection = True
                return None
            if mode == "status":
                return self._send(r.status, b"", "text/plain")
            if mode == "html":
                return self._send(200, HTML, "text/html")
            if mode == "junk":
                return self._send(200, JUNK, "application/octet-stream")
            if mode == "truncated":
                body = server.next_page(path, r)
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                self.close_connection = True
                return None
            if mode in ("huge", "huge_stream"):
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                if mode == "huge":
                    self.send_header("Content-Length", str(HUGE_BYTES))
                else:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()
                line = b"# " + b"x" * 1021 + b"\n"
                chunk = line * 1024  # 1 MiB
                for _ in range(HUGE_BYTES // len(chunk)):
                    self.wfile.write(chunk)
                return None
            if mode == "gzip_bomb":
                body = gzip_bomb()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return None
            raise AssertionError(mode)

        def _send(self, code: int, body: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler
