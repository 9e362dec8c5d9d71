"""Reading one HTTP/1.1 answer from the bytes a connection receives: pure, no I/O.

:class:`AnswerReader` is fed what arrives (:mod:`app.scrape.http11` owns the
connection) and says when the answer is complete, following h11's rules where httpx
would (so a page reads the same whichever client fetched it). The exceptions carry
httpx's class names, so an error message reads the same too.

- **Head.** ``HTTP/1.x`` status line and headers, lines ended by ``\\r\\n`` or ``\\n``;
  1xx answers but 101 are skipped; a head over 64 kB, not HTTP, a Transfer-Encoding
  other than chunked or disagreeing Content-Lengths are a :class:`RemoteProtocolError`.
- **Non-2xx.** Complete at its head: the body is not read, the connection not reused.
- **Body.** Content-Length, chunked (extensions and trailers skipped) or, with neither,
  up to the server's close (that connection is not reused); 204 and 304 have none.
  gzip and deflate are decoded a piece at a time with ``max_length``, so the cap is
  counted after decoding and a compressed bomb never inflates past it; unknown
  encodings pass through as in httpx; two stacked encodings raise :class:`Unsupported`
  before the body is read (the caller asks httpx instead).
- **Edges.** :class:`TooLarge` for a plain body whose Content-Length is over the cap
  (raised at the head) or any body that grows past it; :class:`BodyTruncated` for a
  body shorter than its Content-Length or a chunked body cut or malformed;
  :class:`ServerDisconnected` for a close before any byte; :class:`DecodingError` for
  broken gzip or deflate.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from typing import NoReturn

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

MAX_HEAD = 64 * 1024  # bytes of an answer's status line and headers
MAX_CHUNK_LINE = 4096  # bytes of a chunk-size line or a trailer line
_END_OF_HEAD = re.compile(rb"\n\r?\n")  # h11 ends a head the same way
_STATUS_LINE = re.compile(rb"HTTP/(\d)\.(\d) (\d{3})(?: [^\r\n]*)?")
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")
_DECODERS = frozenset({"gzip", "deflate"})


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


_HEAD, _BODY, _CHUNK_SIZE_LINE, _CHUNK_DATA, _CHUNK_END, _TRAILER = range(6)


class AnswerReader:
    """Reads one answer from the bytes it is fed (module docstring: head, body, edges)."""

    __slots__ = (
        "answer",
        "buf",
        "chunk_left",
        "decoder",
        "keep_alive",
        "left",
        "max_bytes",
        "parts",
        "phase",
        "received",
        "size",
        "started",
        "status",
    )

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.phase = _HEAD
        self.buf = bytearray()  # the head, or chunked framing not read yet
        self.started = False  # any byte of the answer came
        self.status = 0
        self.keep_alive = True
        self.left: int | None = None  # body bytes still due; None: up to the close
        self.received = 0  # body bytes on the wire (Content-Length framing)
        self.chunk_left = 0
        self.decoder: _Inflate | None = None
        self.parts: list[bytes] = []
        self.size = 0  # decoded body bytes
        self.answer: Answer | None = None

    def feed(self, data: bytes) -> bool:
        """Take bytes from the wire; True when the answer is complete."""
        self.started = True
        if self.phase == _HEAD:
            self.buf += data
            m = _END_OF_HEAD.search(self.buf)
            if m is None:
                if len(self.buf) > MAX_HEAD:
                    raise RemoteProtocolError("the answer's head is over 64 kB")
                return False
            head, rest = bytes(self.buf[: m.start()]), bytes(self.buf[m.end() :])
            self.buf.clear()
            if not self._head(head):  # 1xx: the real head follows
                return self.feed(rest) if rest else False
            if self.answer is not None:
                return True
            if self.left == 0 and self.phase == _BODY:
                if rest:
                    self.keep_alive = False
                return self._complete()
            if not rest:
                return False
            data = rest
        if self.phase == _BODY:
            left = self.left
            if left is None:
                self._emit(data)
                return False
            n = len(data)
            if n < left:
                self.received += n
                self.left = left - n
                self._emit(data)
                return False
            if n > left:
                self.keep_alive = False  # bytes past the body: not fit for reuse
                data = data[:left]
            self.received += left
            self.left = 0
            self._emit(data)
            return self._complete()
        return self._chunks(data)

    def eof(self) -> None:
        """The server closed: complete a close-delimited body, else say what is missing."""
        self.keep_alive = False
        if self.phase == _HEAD:
            if not self.started:
                raise ServerDisconnected("Server disconnected without sending a response.")
            raise RemoteProtocolError("peer closed connection in the middle of the head")
        if self.phase == _BODY and self.left is None:
            self._complete()
            return
        if self.phase == _BODY:
            assert self.left is not None
            raise BodyTruncated(
                "peer closed connection without sending complete message body: "
                f"received {self.received} bytes, expected {self.received + self.left}",
                self.status,
            )
        raise BodyTruncated(
            "peer closed connection without sending complete message body: incomplete chunked read",
            self.status,
        )

    def _head(self, head: bytes) -> bool:
        """Read a head; False for an interim (1xx) answer."""
        lines = head.split(b"\n")
        m = _STATUS_LINE.fullmatch(lines[0].rstrip(b"\r"))
        if m is None:
            raise RemoteProtocolError(f"not an HTTP/1.x status line: {lines[0][:60]!r}")
        status = int(m[3])
        if 100 <= status < 200 and status != 101:
            return False
        if status < 100:
            raise RemoteProtocolError(f"status {status} out of range")
        lengths: list[bytes] = []
        encodings: list[bytes] = []
        transfer: list[bytes] = []
        for raw in lines[1:]:
            line = raw.rstrip(b"\r")
            name, sep, value = line.partition(b":")
            if not sep or not name or name != name.strip() or line[:1] in (b" ", b"\t"):
                raise RemoteProtocolError(f"malformed header line: {line[:60]!r}")
            name = name.lower()
            value = value.strip(b" \t")
            if name == b"content-length":
                lengths.append(value)
            elif name == b"content-encoding":
                encodings.append(value)
            elif name == b"transfer-encoding":
                transfer.append(value)
            elif name == b"connection" and b"close" in value.lower():
                self.keep_alive = False
        if (m[1], m[2]) != (b"1", b"1"):
            self.keep_alive = False  # HTTP/1.0: no reuse (h11 the same)
        self.status = status
        if len(transfer) > 1:
            raise RemoteProtocolError("multiple Transfer-Encoding headers")
        if transfer and transfer[0].lower() != b"chunked":
            raise RemoteProtocolError("Only Transfer-Encoding: chunked is supported")
        chunked = bool(transfer)
        values = {v.strip() for joined in lengths for v in joined.split(b",")}
        if len(values) > 1:
            raise RemoteProtocolError("conflicting Content-Length headers")
        declared = values.pop().decode("latin-1") if values else ""
        if lengths and not (declared.isdigit() and len(declared) <= 20):
            raise RemoteProtocolError("bad Content-Length")
        length = int(declared) if declared and not chunked else None
        if not 200 <= status < 300:
            self.keep_alive = False  # its body is left unread
            self.answer = Answer(status, None)
            return True
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
        if chunked:
            self.phase = _CHUNK_SIZE_LINE
        else:
            self.phase = _BODY
            if status in (204, 304):
                length = 0
            if length is None:
                self.keep_alive = False  # ends with the connection
            self.left = length
        return True

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
        parts = self.parts
        self.answer = Answer(self.status, parts[0] if len(parts) == 1 else b"".join(parts))
        self.phase = -1
        return True

    def _chunks(self, data: bytes) -> bool:
        buf = self.buf
        buf += data
        pos = 0
        end = len(buf)
        while pos < end:
            phase = self.phase
            if phase == _CHUNK_DATA:
                take = min(self.chunk_left, end - pos)
                self._emit(bytes(buf[pos : pos + take]))
                pos += take
                self.chunk_left -= take
                if self.chunk_left:
                    break
                self.phase = _CHUNK_END
            elif phase == _CHUNK_END:  # CRLF (or LF, as h11 takes) after a chunk's data
                if buf[pos] == 0x0A:
                    pos += 1
                elif buf[pos] != 0x0D:
                    self._broken("chunk data not followed by CRLF")
                elif end - pos < 2:
                    break
                elif buf[pos + 1] != 0x0A:
                    self._broken("chunk data not followed by CRLF")
                else:
                    pos += 2
                self.phase = _CHUNK_SIZE_LINE
            else:  # a chunk-size line, or a trailer line
                nl = buf.find(b"\n", pos)
                if nl < 0:
                    if end - pos > MAX_CHUNK_LINE:
                        self._broken("chunk line too long")
                    break
                line = bytes(buf[pos:nl]).rstrip(b"\r")
                pos = nl + 1
                if phase == _TRAILER:
                    if not line:
                        if pos < end:
                            self.keep_alive = False
                        buf.clear()
                        return self._complete()
                    continue
                size = line.split(b";", 1)[0].strip(b" \t")
                if not _CHUNK_SIZE.fullmatch(size):
                    self._broken("illegal chunk header")
                n = int(size, 16)
                if n == 0:
                    self.phase = _TRAILER
                else:
                    self.chunk_left = n
                    self.phase = _CHUNK_DATA
        del buf[:pos]
        return False

    def _broken(self, why: str) -> NoReturn:
        raise BodyTruncated(f"malformed chunked encoding: {why}", self.status)
