"""Prometheus text exposition (format 0.0.4), one line at a time: the careful parser.

Every function here reads one line (or a piece of one) and returns None for text it
cannot read; none of them raises on any ``str``. ``app.scrape.parse`` calls them for the
lines its caches do not know yet.

Rules:
* A sample line is ``name{labels} value [timestamp]``; blanks may stand between its
  parts and inside the label block, as the Go parser allows.
* Label values unescape ``\\\\``, ``\\"`` and ``\\n``; any other backslash pair is kept as
  is (as prometheus_client does). Labels come back sorted by name; a repeated label name
  makes the line an error. A trailing comma in the label block is allowed.
* Values are Go-style floats (``NaN``, ``+Inf``, ``-Inf``, exponents); ``_`` digit
  separators, which Python's ``float`` would take, are errors. A timestamp must be an
  integer number of milliseconds and comes back in seconds.
* ``# TYPE name type`` needs a known type; ``# HELP name text`` unescapes ``\\\\`` and
  ``\\n``. Other comments are ignored, and so are TYPE and HELP lines of ``*_created``
  families (the creation times prometheus_client adds, never measurements).
"""

from __future__ import annotations

import re

__all__ = [
    "CREATED",
    "METRIC_NAME",
    "NAME_START",
    "SKIP",
    "Comment",
    "Entry",
    "Labels",
    "Series",
    "label_name_in",
    "labels_of",
    "name_of",
    "parse_comment",
    "parse_sample",
    "parse_value_and_stamp",
    "read_floats",
]

Labels = tuple[tuple[str, str], ...]
Series = tuple[str, Labels]
# A parsed series: (name, labels); CREATED for a `_created` series, whose value is read
# (so that a bad one is an error whatever a cache holds) and then dropped; SKIP (falsy)
# for a sample line outside the prefix.
Entry = Series | int
# A comment line: ("TYPE" | "HELP", family, text); () for any other comment.
Comment = tuple[str, str, str] | tuple[()]

# CREATED has an empty name, so compress(samples, names) drops it in C. SKIP is falsy,
# so filter()/compress() drop it in C; it is counted in ParseResult.skipped.
CREATED: Series = ("", ())
SKIP = 0

METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
NAME_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_:")
_VALID_TYPES = frozenset({"counter", "gauge", "histogram", "summary", "untyped"})
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# Between the values of an escape-free label block: `name=` first, `,name=` after, and an
# optional trailing comma; blanks allowed around each part, as the Go parser allows.
_FIRST_NAME_TOKEN = re.compile(r"[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*")
_NEXT_NAME_TOKEN = re.compile(r"[ \t]*,[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*")
_TAIL_TOKEN = re.compile(r"[ \t]*,?[ \t]*")
_UNESCAPE = {"\\": "\\", '"': '"', "n": "\n"}


def name_of(key: str) -> str:
    """Return the metric name a valid series text starts with."""
    brace = key.find("{")
    return key if brace < 0 else key[:brace].rstrip(" \t")


def labels_of(key: str) -> Labels:
    """Return the labels of a series text that :func:`parse_sample` read, sorted by name."""
    brace = key.find("{")
    if brace < 0:
        return ()
    return _parse_labels(key[brace + 1 : key.rfind("}")]) or ()


def label_name_in(piece: str) -> str:
    """Return the label name in a piece between the values of a label block that parsed
    (the first piece may still hold the ``{``)."""
    tail = piece[1:] if piece[:1] == "{" else piece
    match = _FIRST_NAME_TOKEN.fullmatch(tail) or _NEXT_NAME_TOKEN.fullmatch(tail)
    assert match is not None  # the piece came from a label block that parsed
    return match.group(1)


def read_floats(values: list[str]) -> list[float]:
    """Convert value texts to floats; raise ValueError if one is not a Go-style float."""
    # Values repeat a lot within a page (zero counters, empty low buckets, top buckets
    # equal to the count): when at most half are distinct, each distinct text is read once.
    distinct = dict.fromkeys(values)
    if len(distinct) * 2 > len(values):
        if "_" in "".join(values):  # float() would take digit separators
            raise ValueError("digit separator")
        return list(map(float, values))
    texts = list(distinct)
    if "_" in "".join(texts):
        raise ValueError("digit separator")
    converted = dict(zip(texts, map(float, texts), strict=True))
    return list(map(converted.__getitem__, values))


def parse_comment(line: str) -> Comment | None:
    """Parse ``# TYPE name type`` / ``# HELP name text``; () for other comments, None if bad."""
    parts = line.split(None, 3)
    if len(parts) < 3 or parts[0] != "#" or parts[1] not in ("TYPE", "HELP"):
        return ()
    family = parts[2]
    if not METRIC_NAME.fullmatch(family):
        return None
    if parts[1] == "TYPE":
        text = parts[3].strip() if len(parts) == 4 else ""
        if text not in _VALID_TYPES:
            return None  # also a TYPE line cut inside its type
    else:
        text = _unescape_help(parts[3].strip()) if len(parts) == 4 else ""
    if family.endswith("_created"):
        return ()
    return (parts[1], family, text)


def _unescape_help(text: str) -> str:
    """Undo HELP escaping: ``\\\\`` and ``\\n`` (nothing else is escaped in HELP)."""
    if "\\" not in text:
        return text
    out: list[str] = []
    i, end = 0, len(text)
    while i < end:
        char = text[i]
        if char == "\\" and i + 1 < end and text[i + 1] in "\\n":
            out.append("\n" if text[i + 1] == "n" else "\\")
            i += 2
        else:
            out.append(char)
            i += 1
    return "".join(out)


def parse_sample(line: str) -> tuple[str, Entry, str, float | None] | None:
    """Parse a sample line → (series text, entry, value text, timestamp); None if bad."""
    brace = line.find("{")
    labels: Labels | None
    if brace < 0:
        name, _, rest = line.partition(" ")
        if "\t" in name:
            name, _, more = name.partition("\t")
            rest = more + " " + rest
        key = name
        labels = ()
    else:
        close = line.rfind("}")  # a value or timestamp never holds a brace
        if close < brace:
            return None
        name = line[:brace].rstrip(" \t")
        key = line[: close + 1]
        rest = line[close + 1 :]
        labels = _parse_labels(line[brace + 1 : close])
    if labels is None or not METRIC_NAME.fullmatch(name):
        return None
    value_and_stamp = parse_value_and_stamp(rest)
    if value_and_stamp is None:
        return None
    value, stamp = value_and_stamp
    entry: Entry = CREATED if name.endswith("_created") else (name, labels)
    return key, entry, value, stamp


def parse_value_and_stamp(rest: str) -> tuple[str, float | None] | None:
    """Split what follows the series into a checked value text and a timestamp."""
    tokens = rest.split()
    if not tokens or len(tokens) > 2 or _parse_value(tokens[0]) is None:
        return None
    if len(tokens) == 1:
        return tokens[0], None
    stamp = tokens[1]
    digits = stamp[1:] if stamp[:1] in ("-", "+") else stamp
    if not (digits.isascii() and digits.isdigit()):
        return None
    return tokens[0], int(stamp) / 1000.0


def _parse_value(text: str) -> float | None:
    """Read a Go-style float; None when ``text`` is not one."""
    if "_" in text:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _parse_labels(block: str) -> Labels | None:
    """Parse the text between ``{`` and ``}`` into pairs sorted by name; None if bad."""
    pairs = _split_plain_labels(block) if "\\" not in block else _scan_labels(block)
    if pairs is None:
        return None
    pairs.sort()
    names = {name for name, _ in pairs}
    if len(names) != len(pairs):
        return None
    return tuple(pairs)


def _split_plain_labels(block: str) -> list[tuple[str, str]] | None:
    """Parse a label block without backslashes, where every quote is a delimiter."""
    parts = block.split('"')
    if len(parts) % 2 == 0 or not _TAIL_TOKEN.fullmatch(parts[-1]):
        return None
    pairs: list[tuple[str, str]] = []
    for index in range(0, len(parts) - 1, 2):
        pattern = _FIRST_NAME_TOKEN if index == 0 else _NEXT_NAME_TOKEN
        match = pattern.fullmatch(parts[index])
        if match is None:
            return None
        pairs.append((match.group(1), parts[index + 1]))
    return pairs


def _scan_labels(block: str) -> list[tuple[str, str]] | None:
    """Parse a label block holding escapes, one character at a time."""
    pairs: list[tuple[str, str]] = []
    i, end = 0, len(block)
    while True:
        i = _skip_blanks(block, i)
        if i >= end:
            return pairs
        if pairs:
            if block[i] != ",":
                return None
            i = _skip_blanks(block, i + 1)
            if i >= end:
                return pairs  # a trailing comma is allowed
        match = _LABEL_NAME.match(block, i)
        if match is None:
            return None
        i = _skip_blanks(block, match.end())
        if i >= end or block[i] != "=":
            return None
        i = _skip_blanks(block, i + 1)
        if i >= end or block[i] != '"':
            return None
        value, i = _scan_quoted(block, i + 1)
        if value is None:
            return None
        pairs.append((match.group(0), value))


def _skip_blanks(text: str, i: int) -> int:
    """Return the index of the first character at or after ``i`` that is not a blank."""
    end = len(text)
    while i < end and text[i] in " \t":
        i += 1
    return i


def _scan_quoted(text: str, i: int) -> tuple[str | None, int]:
    """Read a label value from just after its opening quote; return it and the next index."""
    out: list[str] = []
    end = len(text)
    while i < end:
        char = text[i]
        if char == '"':
            return "".join(out), i + 1
        if char == "\\" and i + 1 < end:
            nxt = text[i + 1]
            out.append(_UNESCAPE.get(nxt, "\\" + nxt))
            i += 2
            continue
        out.append(char)
        i += 1
    return None, i
