"""Property-based fuzzing of the scrape client's answer reader
(``app.scrape.http11_answer.AnswerReader``): the bytes come from every target, untrusted.

Examples per property: ``PHASEWATCH_FUZZ_EXAMPLES`` (default 200, what ``make test``
runs); ``make fuzz`` runs them with 10,000 each.

* **Differential, against h11** (the parser httpx stands on): any bytes — arbitrary, or
  answers built with their framing varied and then cut, spliced or corrupted — get the
  same verdict from the reader as from h11 driven directly: complete (same status, same
  body, same reuse of the connection), incomplete, or an error in the head or in the
  body (and the same status when in the body); after the server's close the same again.
* **Any split of the bytes** reads alike: fed whole or in random pieces, the reader ends
  the same way, and raises nothing but its own named errors.
* **Valid answers read as built**: Content-Length, chunked (extensions, trailers) or
  close-delimited, LF or CRLF heads, 1xx first, gzip or deflate, HTTP/1.0 or ``Connection:
  close``: the body is the page (decoded), complete at its last byte and not before, the
  connection kept exactly when it may be; a non-2xx is complete at its head; a page over
  the cap is refused, by its Content-Length at the head when it is plain.
"""

from __future__ import annotations

import gzip
import os
import zlib
from dataclasses import dataclass

import h11
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from app.scrape.http11_answer import (
    MAX_HEAD,
    AnswerReader,
    BodyTruncated,
    DecodingError,
    RemoteProtocolError,
    TooLarge,
    Unsupported,
)

EXAMPLES = int(os.environ.get("PHASEWATCH_FUZZ_EXAMPLES", "200"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
BIG_CAP = 2**40  # no page is over it: the differential compares framing only


@dataclass(frozen=True)
class Verdict:
    """How reading some bytes ended: ``complete`` (status, body, kept), ``incomplete``,
    ``head_error`` or ``body_error`` (status); ``refused`` for the reader's own limits."""

    kind: str
    status: int = 0
    body: bytes | None = None
    kept: bool = False


def _h11_verdict(wire: bytes, closed: bool) -> Verdict:
    """h11 as httpx drives it, reading the answer to one GET."""
    conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)
    conn.send(h11.Request(method="GET", target="/", headers=[("Host", "t")]))
    conn.send(h11.EndOfMessage())
    if wire:  # h11 takes no bytes for the close
        conn.receive_data(wire)
    if closed:
        conn.receive_data(b"")
    status, body = 0, bytearray()
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError:
            return Verdict("body_error", status) if status else Verdict("head_error")
        if isinstance(event, h11.Response):
            status = event.status_code
            if not 200 <= status < 300:
                return Verdict("complete", status, None, False)
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            kept = conn.their_state is h11.DONE and not conn.trailing_data[0] and not closed
            return Verdict("complete", status, bytes(body), kept)
        elif event is h11.NEED_DATA:
            return Verdict("incomplete")
        elif isinstance(event, h11.ConnectionClosed):
            return Verdict("head_error")


def _read(pieces: list[bytes], closed: bool, max_bytes: int = BIG_CAP) -> Verdict:
    """The reader fed ``pieces`` (then the server's close when ``closed``)."""
    reader = AnswerReader(max_bytes)
    done, past = False, False
    try:
        for piece in pieces:
            if done:  # bytes after the answer: the connection closes them (not reused)
                past = True
                break
            done = reader.feed(piece)
        if not done:
            if not closed:
                return Verdict("incomplete")
            reader.eof()
    except BodyTruncated as exc:
        return Verdict("body_error", exc.status)
    except RemoteProtocolError:  # ServerDisconnected too
        return Verdict("head_error")
    except (TooLarge, Unsupported, DecodingError) as exc:
        return Verdict(f"refused:{type(exc).__name__}", reader.status)
    answer = reader.answer
    assert answer is not None
    kept = reader.keep_alive and not closed and not past
    return Verdict("complete", answer.status, answer.body, kept)


def _split(wire: bytes, cuts: list[int]) -> list[bytes]:
    """``wire`` in pieces (none when it is empty: a connection is never fed nothing)."""
    points = sorted({c % (len(wire) + 1) for c in cuts} | {0, len(wire)})
    return [wire[a:b] for a, b in zip(points, points[1:], strict=False) if b > a]


# --- answers: built, then varied --------------------------------------------------------

PAGE = st.binary(max_size=3000) | st.sampled_from(
    [b"", b"vllm:num_requests_running 1\n" * 40, b"\r\n0\r\n\r\n", b"HTTP/1.1 200 OK\r\n\r\n"]
)
STATUS = st.sampled_from([200, 200, 200, 201, 203, 204, 206, 299, 304, 302, 404, 500, 503])
ODD_STATUS = st.sampled_from(["101", "199", "100", "099", "000", "600", "999", "20", "2000"])


@st.composite
def answers(draw: st.DrawFn) -> bytes:
    """An answer whose head and framing are drawn (often valid, often not quite)."""
    eol = draw(st.sampled_from([b"\r\n", b"\r\n", b"\n"]))
    version = draw(
        st.sampled_from([b"HTTP/1.1", b"HTTP/1.1", b"HTTP/1.0", b"HTTP/2.0", b"HTTP/1.x"])
    )
    status = draw(STATUS.map(str) | ODD_STATUS) if draw(st.booleans()) else str(draw(STATUS))
    reason = draw(st.sampled_from([b" OK", b"", b" ", b" Not \x80 Found"]))
    page = draw(PAGE)
    framing = draw(st.sampled_from(["length", "length", "chunked", "close", "both"]))
    body = page
    headers: list[bytes] = []
    if framing in ("length", "both"):
        n = len(page) + draw(st.sampled_from([0, 0, 0, -1, 1, 10**6]))
        value = draw(
            st.sampled_from(
                [str(max(n, 0)), f"{n}, {n}", f"{n},{n + 1}", " 1e3", "-1", "9" * 21, "0x10"]
            )
            if draw(st.integers(0, 3)) == 0
            else st.just(str(max(n, 0)))
        )
        headers.append(b"Content-Length: " + value.encode())
        if draw(st.integers(0, 5)) == 0:
            headers.append(b"content-length: " + value.encode())
    if framing in ("chunked", "both"):
        te = draw(st.sampled_from([b"chunked", b"chunked", b"Chunked", b"gzip", b"chunked, gzip"]))
        headers.append(b"Transfer-Encoding: " + te)
        sizes = draw(st.lists(st.integers(1, 700), max_size=6))
        ext = draw(st.sampled_from([b"", b";a=b", b" ;x", b'; q="1"']))
        trailer = draw(st.sampled_from([b"", b"X-T: 1" + eol]))
        pieces, at = [], 0
        for size in sizes:
            if at < len(page):
                pieces.append(page[at : at + size])
                at += size
        if at < len(page):
            pieces.append(page[at:])
        body = b"".join(b"%x%s%s%s%s" % (len(p), ext, eol, p, eol) for p in pieces)
        body += b"0" + eol + trailer + eol
    if draw(st.integers(0, 3)) == 0:
        headers.append(draw(st.sampled_from([b"Connection: close", b"connection: keep-alive"])))
    if draw(st.integers(0, 4)) == 0:
        headers.append(
            draw(st.sampled_from([b"Content-Encoding: identity", b"content-encoding: br"]))
        )
    if draw(st.integers(0, 6)) == 0:
        headers.append(
            draw(
                st.sampled_from([b"X: a" + eol + b" folded", b"NoColon", b"X : y", b" X: y", b":v"])
            )
        )
    headers += draw(st.lists(st.sampled_from([b"Server: s", b"Date: d", b"X-Empty:"]), max_size=3))
    interim = draw(st.sampled_from([b"", b"", b"HTTP/1.1 100 Continue" + eol + eol]))
    head = version + b" " + status.encode() + reason + eol + b"".join(h + eol for h in headers)
    wire = interim + head + eol + body
    if draw(st.booleans()):
        wire += draw(st.sampled_from([b"", b"HTTP/1.1 200 OK\r\n\r\n", b"junk"]))
    return wire


@st.composite
def varied(draw: st.DrawFn) -> bytes:
    """An answer cut short, with bytes spliced in, or with one byte changed."""
    wire = draw(answers())
    how = draw(st.sampled_from(["as built", "as built", "cut", "splice", "flip"]))
    if how == "cut":
        return wire[: draw(st.integers(0, len(wire)))]
    at = draw(st.integers(0, len(wire)))
    if how == "splice":
        return wire[:at] + draw(st.binary(min_size=1, max_size=8)) + wire[at:]
    if how == "flip" and wire:
        at %= len(wire)
        return wire[:at] + bytes([wire[at] ^ draw(st.integers(1, 255))]) + wire[at + 1 :]
    return wire


WIRE = varied() | st.binary(max_size=400)
CUTS = st.lists(st.integers(0, 10**6), max_size=8)


# --- the properties -----------------------------------------------------------------------


def _same_as_h11(got: Verdict, wire: bytes, closed: bool) -> None:
    want = _h11_verdict(wire, closed)
    if got.kind.startswith("refused:"):  # the reader's limits: a valid 2xx head came first
        assert want.kind in ("complete", "incomplete", "body_error"), (got, want)
        assert 200 <= got.status < 300
        return
    assert got == want, (wire, closed)


@FUZZ
@given(wire=WIRE, cuts=CUTS, closed=st.booleans())
def test_the_reader_reads_any_bytes_as_h11_does(wire: bytes, cuts: list[int], closed: bool) -> None:
    _same_as_h11(_read(_split(wire, cuts), closed), wire, closed)


@FUZZ
@given(wire=WIRE, cuts=CUTS, closed=st.booleans(), cap=st.integers(0, 5000))
def test_any_split_of_the_bytes_reads_alike(
    wire: bytes, cuts: list[int], closed: bool, cap: int
) -> None:
    whole = _read([wire] if wire else [], closed, cap)
    assert _read(_split(wire, cuts), closed, cap) == whole
    assert _read([wire[i : i + 1] for i in range(len(wire))], closed, cap) == whole


ENCODE = {
    "": lambda b: b,
    "gzip": lambda b: gzip.compress(b, 6),
    "deflate": lambda b: zlib.compress(b, 6),
    "raw-deflate": lambda b: zlib.compress(b, 6)[2:-4],  # what some servers send as deflate
}


@FUZZ
@given(
    page=PAGE,
    status=STATUS,
    framing=st.sampled_from(["length", "chunked", "close"]),
    encoding=st.sampled_from(list(ENCODE)),
    http10=st.booleans(),
    close=st.booleans(),
    interim=st.booleans(),
    eol=st.sampled_from([b"\r\n", b"\n"]),
    cap=st.integers(0, 4000) | st.just(BIG_CAP),
    cuts=CUTS,
)
def test_valid_answers_read_as_built(
    page: bytes,
    status: int,
    framing: str,
    encoding: str,
    http10: bool,
    close: bool,
    interim: bool,
    eol: bytes,
    cap: int,
    cuts: list[int],
) -> None:
    assume(status not in (204, 304))  # no body: read alike by the differential above
    data = ENCODE[encoding](page)
    name = encoding.removeprefix("raw-")
    headers = [b"Content-Type: text/plain"] + (
        [b"Content-Encoding: " + name.encode()] if name else []
    )
    if framing == "length":
        headers.append(b"Content-Length: %d" % len(data))
        body = data
    elif framing == "chunked":  # its lines end in CRLF (h11 and httpx take no bare LF there)
        headers.append(b"Transfer-Encoding: chunked")
        half = len(data) // 2 if encoding != "raw-deflate" else len(data)
        pieces = (data[:half], data[half:])
        body = b"".join(b"%x;e=1\r\n%s\r\n" % (len(p), p) for p in pieces if p)
        body += b"0\r\nX-Trailer: 1\r\n\r\n"
    else:
        body = data
    if close:
        headers.append(b"Connection: close")
    version = b"HTTP/1.0" if http10 else b"HTTP/1.1"
    head = b"%s %d Whatever%s" % (version, status, eol) + b"".join(h + eol for h in headers) + eol
    wire = (b"HTTP/1.1 100 Continue" + eol + eol if interim else b"") + head + body
    framed = framing != "close"
    # Raw deflate is told from zlib-wrapped deflate by the body's first piece, as httpx
    # tells it (a first piece of one byte fails in both): its body comes in one piece.
    raw = encoding == "raw-deflate"

    got = _read(_split(wire, [] if raw else cuts), not framed, cap)
    if not 200 <= status < 300:
        assert got == Verdict("complete", status, None, False)
        return
    # fetch()'s rule, as with httpx: a body not gzipped is refused by its Content-Length.
    declared = framing == "length" and name != "gzip" and len(data) > cap
    if declared or len(page) > cap:
        assert got.kind == "refused:TooLarge" and got.status == status
        reader = AnswerReader(cap)
        try:
            reader.feed(wire[: len(wire) - len(body)])  # the head alone
            assert not declared, "a plain page over the cap by its length is refused at the head"
        except TooLarge as exc:
            assert declared and exc.declared == str(len(data))
        return
    kept = framed and not http10 and not close
    assert got == Verdict("complete", status, page, kept)
    # Complete at the last byte, not before (a close-delimited body: at the close).
    reader = AnswerReader(cap)
    ahead = wire[: len(wire) - len(body)] if raw else wire
    steps = [ahead[i : i + 1] for i in range(len(ahead))] + ([body] if raw else [])
    assert not any(reader.feed(step) for step in steps[:-1])
    assert reader.feed(steps[-1]) is framed
