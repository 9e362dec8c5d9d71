"""Reading one HTTP/1.1 answer from the bytes a connection receives: pure, no I/O.

:class:`AnswerReader` is fed what arrives (:mod:`app.scrape.http11` owns the
connection) and says when the answer is complete. The framing is h11's (the sans-I/O
parser httpx stands on, so a page reads the same whichever client fetched it: heads,
Content-Length, chunked, close-delimited bodies, 1xx, keep-alive); this module adds what
a scrape needs on top. The exceptions carry httpx's class names and h11's messages, so
an error reads the same too.

- **Head.** Over 64 kB, not HTTP, a Transfer-Encoding other than chunked or
  disagreeing Content-Lengths are a :class:`RemoteProtocolError` (h11's message).
- **Non-2xx.** Complete at its head: the body is not read, the connection not reused.
- **Body.** gzip and deflate are decoded a piece at a time with ``max_length``, so the
  cap is counted after decoding and a compressed bomb never inflates past it; unknown
  encodings pass through as in httpx; two stacked encodings raise :class:`Unsupported`
  before the body is read (the caller asks httpx instead). Bytes past the answer, or a
  server that said it closes, make the connection unfit for reuse.
- **Edges.** :class:`TooLarge` for a plain body whose Content-Length is over the cap
  (raised at the head) or any body that grows past it; :class:`BodyTruncated` for any
  error after the head (a body shorter than its Content-Length, chunking cut or
  malformed: httpx names these a cut page too); :class:`ServerDisconnected` for a close
  before any byte; :class:`DecodingError` for broken gzip or deflate.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import h11

__all__ = [
    "Answer",
    "AnswerReader",
    "BodyTruncated",
    "ConnectFailed",
    "DecodingError",
    "ReadError",
    "RemoteProtocolError",
    "ServerDisconnected",
    "TooLarge",
    "Unsupported",
]

MAX_HEAD = 64 * 1024  # bytes of an answer's status line and headers (and of a chunk line)
_DECODERS = frozenset({"gzip", "deflate"})
# What h11 is told was sent: its state machine reads an answer only to a request.
_REQUEST = h11.Request(method="GET", target="/", headers=[("Host", "scrape")])
_END = h11.EndOfMessage()


class RemoteProtocolError(Exception):
    """The server's answer is not HTTP/1.1 as agreed."""


class ServerDisconnected(RemoteProtocolError):
    """Closed or reset before any byte of the answer (a stale kept-alive connection)."""


class BodyTruncated(RemoteProtocolError):
    """The body ended early: shorter than its Content-Length, or broken chunking."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class ReadError(Exception):
    """The connection failed after the answer began (a reset)."""


class DecodingError(Exception):
    """The body's gzip or deflate encoding is broken."""


class ConnectFailed(OSError):
    """No connection (or TLS session) could be made; the cause holds the OSError(s)."""


class TooLarge(Exception):
    """The body is over the cap: ``declared`` (its plain Content-Length) or counted."""

    def __init__(self, status: int, declared: str | None) -> None:
        super().__init__(declared)
        self.status = status
        self.declared = declared


class Unsupported(Exception):
    """An answer this client does not read (stacked content encodings)."""


@dataclass(frozen=True, slots=True)
class Answer:
    """A status and, for a 2xx, the decoded body (None otherwise: it was not read)."""

    status: int
    body: bytes | None


class _Inflate:
    """gzip or deflate, decoded a piece at a time, never more than asked (httpx's
    decoders: deflate tries the zlib wrapper first, then raw deflate)."""

    __slots__ = ("d", "raw_fallback")

    def __init__(self, encoding: str) -> None:
        gz = encoding == "gzip"
        self.d = zlib.decompressobj(zlib.MAX_WBITS | 16 if gz else zlib.MAX_WBITS)
        self.raw_fallback = not gz

    def decode(self, data: bytes, max_length: int) -> bytes:
        try:
            out = self.d.decompress(data, max_length)
        except zlib.error as exc:
            if not self.raw_fallback:
                raise DecodingError(str(exc)) from exc
            self.raw_fallback = False
            self.d = zlib.decompressobj(-zlib.MAX_WBITS)
            return self.decode(data, max_length)
        self.raw_fallback = False
        return out

    def flush(self) -> bytes:
        try:
            return self.d.flush()
        except zlib.error as exc:  # pragma: no cover - zlib's flush does not check
            raise DecodingError(str(exc)) from exc


class AnswerReader:
    """Reads one answer from the bytes it is fed (module docstring: head, body, edges)."""

    __slots__ = (
        "answer",
        "conn",
        "decoder",
        "keep_alive",
        "max_bytes",
        "parts",
        "size",
        "started",
        "status",
    )

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)
        self.conn.send(_REQUEST)
        self.conn.send(_END)
        self.started = False  # any byte of the answer came
        self.status = 0  # the final head's, once read
        self.keep_alive = True
        self.decoder: _Inflate | None = None
        self.parts: list[bytes] = []
        self.size = 0  # decoded body bytes
        self.answer: Answer | None = None

    def feed(self, data: bytes) -> bool:
        """Take bytes from the wire; True when the answer is complete."""
        if not data:  # h11 would take it for the close
            return False
        self.started = True
        self.conn.receive_data(data)
        return self._events()

    def eof(self) -> None:
        """The server closed: complete a close-delimited body, else say what is missing."""
        self.keep_alive = False
        if not self.started:
            raise ServerDisconnected("Server disconnected without sending a response.")
        self.conn.receive_data(b"")
        if not self._events():
            raise RemoteProtocolError("peer closed connection in the middle of the answer")

    def _events(self) -> bool:
        """Read what h11 makes of the bytes so far; True once the answer is complete."""
        conn = self.conn
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                if self.status:
                    raise BodyTruncated(str(exc), self.status) from None
                raise RemoteProtocolError(str(exc)) from None
            if isinstance(event, h11.Data):
                self._emit(event.data)
            elif isinstance(event, h11.EndOfMessage):
                return self._complete()
            elif isinstance(event, h11.Response):
                if self._head(event):
                    return True
            elif event is h11.NEED_DATA:
                return False
            elif not isinstance(event, h11.InformationalResponse):  # 1xx: the head follows
                # ConnectionClosed before a head, or PAUSED (no protocol switch was asked).
                raise RemoteProtocolError(f"unexpected {event!r} before the answer's end")

    def _head(self, event: h11.Response) -> bool:
        """Take the final head; True when that completes the answer (a non-2xx)."""
        status = self.status = event.status_code
        if not 200 <= status < 300:
            self.keep_alive = False  # its body is left unread
            self.answer = Answer(status, None)
            return True
        declared = ""
        encodings: list[bytes] = []
        for name, value in event.headers:
            if name == b"content-length":
                declared = value.decode("latin-1")
            elif name == b"content-encoding":
                encodings.append(value)
        # fetch()'s rule: a plain body over the cap by its Content-Length is refused unread.
        plain = "gzip" not in b", ".join(encodings).decode("latin-1")
        if plain and declared.isdigit() and int(declared) > self.max_bytes:
            raise TooLarge(status, declared)
        names = [v.strip().lower() for e in encodings for v in e.decode("latin-1").split(",")]
        used = [n for n in names if n in _DECODERS]
        if len(used) > 1:
            raise Unsupported(f"content encodings {', '.join(used)}")
        if used:
            self.decoder = _Inflate(used[0])
        return False

    def _emit(self, data: bytes) -> None:
        if self.decoder is not None:
            data = self.decoder.decode(data, self.max_bytes - self.size + 1)
        self.size += len(data)
        if self.size > self.max_bytes:
            raise TooLarge(self.status, None)
        if data:
            self.parts.append(data)

    def _complete(self) -> bool:
        if self.decoder is not None:
            tail = self.decoder.flush()
            self.size += len(tail)
            if self.size > self.max_bytes:
                raise TooLarge(self.status, None)
            self.parts.append(tail)
        conn = self.conn
        if conn.their_state is not h11.DONE or conn.trailing_data[0]:
            self.keep_alive = False  # it closes, or bytes came past the answer
        self.answer = Answer(self.status, b"".join(self.parts))
        return True
