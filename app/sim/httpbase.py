"""What the simulator's HTTP servers share: a handler that answers quietly and a threaded
server with room for a thousand scrapers' connections."""

from __future__ import annotations

import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class QuietHandler(BaseHTTPRequestHandler):
    def _send(self, code: int, body: bytes, ctype: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Stay quiet: one line per scrape would drown the output."""


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    # A scraper of a thousand replicas opens its connections at once: socketserver's
    # backlog of 5 drops the SYNs beyond it, and each retries a second or more later.
    request_queue_size = 1024

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet when a client hangs up (a scraper that timed out); report the rest."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)
