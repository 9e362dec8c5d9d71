"""Prometheus text exposition (format 0.0.4) → samples, fast and tolerant.

The parser never raises on any ``str``. Lines it cannot read are skipped and counted in
``ParseResult.errors``; when the last non-blank line is one of them (a page cut mid-line,
as in pasted excerpts or a scrape that hit its size cap) ``cut_last_line`` is set.

Rules:
* With ``prefix`` set, only samples whose name starts with it are returned. Other sample
  lines are only sanity-checked (they must start like a metric name and hold a blank
  before a value) and counted in ``skipped``.
* ``*_created`` samples and ``*_created`` families are dropped: they are the creation
  times prometheus_client adds to counters and histograms, never measurements. Their
  lines are still checked like any other (a bad value is an error).
* Label values unescape ``\\\\``, ``\\"`` and ``\\n``; any other backslash pair is kept as
  is (as prometheus_client does). Labels come back sorted by name; a repeated label name
  makes the line an error.
* Values are Go-style floats (``NaN``, ``+Inf``, ``-Inf``, exponents); ``_`` digit
  separators, which Python's ``float`` would take, are errors. A timestamp must be an
  integer number of milliseconds and comes back in seconds.
* ``types`` and ``helps`` are kept for every family, prefix or not, so that a caller can
  tell "vLLM families declared but empty" from "no vLLM families at all".
* ``looks_like_prometheus`` judges the first 40 lines: some must parse (a sample, TYPE or
  HELP) and no more than that many may fail; HTML, JSON and binary pages fail.

Speed (bench/parse.py): a vLLM page repeats the same series every scrape; only the values
change. Three layers, each falling back to the next:
1. Template: the layout of a page seen before (its lines up to each value). If every line
   of the new page starts the same and its comment lines are unchanged, the samples are
   the known series with the new values, read in bulk by C-level ``map`` calls.
2. Series cache: the text before each value (``name{labels}``) → parsed series; misses
   first try the *shape* of the series (its text with label values cut out), which one
   histogram's buckets all share, so even a first scrape avoids a label scan per line.
3. The careful parser, for new shapes, escapes, timestamps and odd spacing.
Memory: about 0.8 kB per cached series and 130 kB per template for a 0.33.0 page; both
maps are bounded (see ``LabelCache``). Label pairs are shared between series (interned),
so a template of a page whose series are all distinct (every target its own
``model_name``) costs about the same.

A scraper of many targets uses its own cache sized for the fleet (``max_templates`` above
the number of targets, ``eager_templates``), so every target keeps its template even when
the series cache cannot hold all of the fleet's series: with the default process-wide
cache, 1,000 targets with distinct label values would keep evicting each other's series
and never get a template (about 14 ms a page instead of 0.4 ms).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import getitem, itemgetter
from typing import cast

from app.model import Sample

__all__ = [
    "DEFAULT_PREFIX",
    "LabelCache",
    "ParseResult",
    "clear_cache",
    "looks_like_prometheus",
    "parse",
]

DEFAULT_PREFIX = "vllm:"

Labels = tuple[tuple[str, str], ...]
Series = tuple[str, Labels]
# A cached series: (name, labels); _CREATED for a `_created` series, whose value is read
# (so that a bad one is an error whatever the cache holds) and then dropped; _SKIP (falsy)
# for a sample line outside the prefix.
Entry = Series | int
# A label-block shape: label names sorted, and the written slot of each (None: in order).
Shape = tuple[tuple[str, ...], tuple[int, ...] | None]
# A comment line: ("TYPE" | "HELP", family, text); () for any other comment.
Comment = tuple[str, str, str] | tuple[()]

_VALID_TYPES = frozenset({"counter", "gauge", "histogram", "summary", "untyped"})
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# Between the values of an escape-free label block: `name=` first, `,name=` after, and an
# optional trailing comma; blanks allowed around each part, as the Go parser allows.
_FIRST_NAME_TOKEN = re.compile(r"[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*")
_NEXT_NAME_TOKEN = re.compile(r"[ \t]*,[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*")
_TAIL_TOKEN = re.compile(r"[ \t]*,?[ \t]*")
_NAME_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_:")
_UNESCAPE = {"\\": "\\", '"': '"', "n": "\n"}
# _CREATED has an empty name, so compress(samples, names) drops it in C. _SKIP is falsy,
# so filter()/compress() drop it in C; it is counted in ParseResult.skipped.
_CREATED: Series = ("", ())
_SKIP = 0
_UNKNOWN: Comment = ("", "", "")
_KEY = itemgetter(0)
_VALUE = itemgetter(2)
# How much of a page looks_like_prometheus() reads.
_SNIFF_CHARS = 8192
_SNIFF_LINES = 40


@dataclass(frozen=True, slots=True)
class ParseResult:
    """Samples of one page plus what a caller needs to judge the page itself."""

    samples: list[Sample]
    types: dict[str, str]
    errors: int
    cut_last_line: bool
    helps: dict[str, str] = field(default_factory=dict)
    # Sample lines left out by the prefix filter (sanity-checked, not parsed).
    skipped: int = 0
    # Read through a template: its ``memo``, shared by every page of that layout, where
    # a consumer may keep what it derives from the samples' series (they are the same,
    # in the same order, every time). None for a page read line by line.
    memo: dict[str, object] | None = field(default=None, compare=False, repr=False)


class _Tables:
    """The cached series and shapes of one prefix (a key known here starts with it)."""

    __slots__ = ("has_skips", "names", "pairs", "series", "shapes")

    def __init__(self) -> None:
        """Start empty."""
        self.series: dict[str, Entry] = {}
        # Metric names seen in valid samples → kept (True) or dropped `_created` (False).
        self.names: dict[str, bool] = {}
        self.shapes: dict[tuple[str, ...], Shape] = {}
        # One shared object per distinct (label, value) pair: a page repeats each pair on
        # many series (model_name on all of them), and templates keep the series alive.
        self.pairs: dict[tuple[str, str], tuple[str, str]] = {}
        self.has_skips = False

    def labels(self, pairs: Iterable[tuple[str, str]]) -> Labels:
        """Return ``pairs`` as a labels tuple made of the shared pair objects."""
        known = self.pairs.setdefault
        return tuple([known(pair, pair) for pair in pairs])


class LabelCache:
    """Bounded memo of series text → parsed series, of series shapes and comment lines.

    Series repeat every scrape, so one cache per process (or per target) turns parsing
    into lookups. Past ``max_entries`` a map is emptied rather than evicted entry by
    entry: cheap, and a thrashing cache only costs the first-scrape speed (the series
    map is emptied alone; the few shapes and names that make a miss cheap stay). Past
    ``max_templates`` the least recently used page layout is dropped.

    ``eager_templates``: keep a template of a page whose series were not all cached yet
    (a first scrape, or a series map too small for the fleet) rather than waiting for a
    page whose series all were. Right for a scraper, whose pages come back every round;
    a reader of one-off pages leaves it off and builds templates only for layouts seen
    at least twice.
    """

    __slots__ = (
        "comments",
        "eager_templates",
        "max_entries",
        "max_templates",
        "tables",
        "templates",
    )

    def __init__(
        self, max_entries: int = 100_000, max_templates: int = 256, *, eager_templates: bool = False
    ) -> None:
        """Create an empty cache: ``max_entries`` per map, ``max_templates`` page layouts."""
        self.max_entries = max_entries
        self.max_templates = max_templates
        self.eager_templates = eager_templates
        self.tables: dict[str | None, _Tables] = {}
        self.comments: dict[str, Comment | None] = {}
        self.templates: dict[tuple[str | None, int, str], _Template] = {}

    def clear(self) -> None:
        """Forget everything."""
        self.tables.clear()
        self.comments.clear()
        self.templates.clear()

    def keep_template(self, probe: tuple[str | None, int, str], template: _Template) -> None:
        """Remember the layout of a page."""
        templates = self.templates
        templates.pop(probe, None)
        while templates and len(templates) >= self.max_templates:
            del templates[next(iter(templates))]  # the least recently used
        templates[probe] = template

    def tables_for(self, prefix: str | None) -> _Tables:
        """Return the tables of ``prefix``, emptying any map that outgrew the bound."""
        tables = self.tables.get(prefix)
        if tables is None:
            tables = self.tables[prefix] = _Tables()
        if len(tables.series) > self.max_entries:
            tables.series.clear()
            tables.has_skips = False
        if len(tables.pairs) > self.max_entries:
            tables.pairs.clear()
        if len(tables.shapes) > self.max_entries or len(tables.names) > self.max_entries:
            tables.shapes.clear()
            tables.names.clear()
        if len(self.comments) > self.max_entries:
            self.comments.clear()
        return tables


_DEFAULT_CACHE = LabelCache()
# looks_like_prometheus() parses page heads: small, and no templates (heads are cut).
_SNIFF_CACHE = LabelCache(max_entries=5_000, max_templates=0)


def clear_cache() -> None:
    """Empty the process-wide parse cache."""
    _DEFAULT_CACHE.clear()


def parse(
    text: str, *, prefix: str | None = DEFAULT_PREFIX, cache: LabelCache | None = None
) -> ParseResult:
    """Parse an exposition page; keep samples whose name starts with ``prefix`` (None: all)."""
    # ``cache`` defaults to one shared by the process; a fresh LabelCache() parses
    # without history. The result never depends on what the cache holds.
    if not isinstance(text, str):  # the contract is "never raise", even on bad callers
        return ParseResult([], {}, 1 if text else 0, False)
    if not prefix:
        prefix = None
    cache = _DEFAULT_CACHE if cache is None else cache
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    lines = text.split("\n")
    probe = _probe(prefix, lines)
    templates = cache.templates
    template = templates.pop(probe, None)
    if template is not None:
        templates[probe] = template  # now the most recently used
        result = template.apply(lines)
        if result is not None:
            return result
    page = _Page(cache, prefix)
    samples = page.run(lines)
    cut = page.errors > 0 and _last_line_is_bad(lines, prefix)
    result = ParseResult(samples, page.types, page.errors, cut, page.helps, page.skipped)
    if page.clean and (cache.eager_templates or not page.learned) and cache.max_templates > 0:
        # By default only a page whose series were all known: a first scrape stays as
        # cheap as it can be, and the template comes with the second.
        cache.keep_template(probe, _Template(page, result))
    return result


def looks_like_prometheus(text: str) -> bool:
    """Tell whether ``text`` reads as an exposition page (not HTML, JSON or binary)."""
    # Judged on the first lines only (an error page shows itself at once), so that
    # calling it before every parse costs little.
    if not isinstance(text, str):
        return False
    head = text[:_SNIFF_CHARS]
    if "\x00" in head:
        return False
    lines = head.split("\n", _SNIFF_LINES)[:_SNIFF_LINES]
    if len(head) < len(text) or len(lines) == _SNIFF_LINES:
        lines = lines[:-1] or lines  # the sniffed piece may end mid-line
    result = parse("\n".join(lines), prefix=None, cache=_SNIFF_CACHE)
    good = len(result.samples) + len(result.types) + len(result.helps)
    return good > 0 and result.errors <= good


class _Page:
    """One parse: turns lines into samples and keeps types, helps and counts."""

    __slots__ = (
        "clean",
        "comments",
        "entries",
        "errors",
        "helps",
        "learned",
        "original",
        "prefix",
        "skipped",
        "tables",
        "types",
    )

    def __init__(self, cache: LabelCache, prefix: str | None) -> None:
        """Start a parse that uses ``cache`` and keeps names starting with ``prefix``."""
        self.prefix = prefix
        # What a template of this page needs: every line split at its last blank, what
        # each line turned out to be, and whether each sample value read as it stands.
        self.original: list[tuple[str, str, str]] = []
        self.entries: list[Entry | None] = []
        self.clean = True
        self.learned = 0  # series not in the cache before this page
        self.tables = cache.tables_for(prefix)
        self.comments = cache.comments
        self.types: dict[str, str] = {}
        self.helps: dict[str, str] = {}
        self.errors = 0
        self.skipped = 0

    def run(self, lines: list[str]) -> list[Sample]:
        """Return the samples of ``lines`` in page order."""
        # The common case runs in C: split each line at its last blank, look the part
        # before it up in the cache, keep the hits. Only misses (comments, blank lines,
        # series not seen before) are handled in Python, one line at a time.
        parts = list(map(str.rpartition, lines, repeat(" ")))
        entries: list[Entry | None] = list(map(self.tables.series.get, map(_KEY, parts)))
        self.original = parts
        self.entries = entries
        stamps: dict[int, float] = {}
        if None in entries:
            parts = parts.copy()  # _misses rewrites it; the template needs the original
            self._misses(lines, parts, entries, stamps)
            self.clean = self.clean and not stamps
        if self.tables.has_skips:
            self.skipped += entries.count(_SKIP)
        kept = cast(list[Series], list(filter(None, entries)))
        if not kept:
            return []
        values = list(compress(map(_VALUE, parts), entries))
        if stamps:
            stamps = _renumber(stamps, entries)
        return self._samples(kept, values, stamps)

    def _misses(
        self,
        lines: list[str],
        parts: list[tuple[str, str, str]],
        entries: list[Entry | None],
        stamps: dict[int, float],
    ) -> None:
        """Resolve each line the cache did not know, filling in entries and parts."""
        find = entries.index
        known_comment = self.comments.get
        series = self.tables.series
        index = -1
        while True:
            try:
                index = find(None, index + 1)
            except ValueError:
                return
            line = lines[index]
            # Most misses are HELP/TYPE lines seen before: settle them inline.
            comment = known_comment(line, _UNKNOWN)
            if comment is not _UNKNOWN:
                if comment:
                    (self.types if comment[0] == "TYPE" else self.helps)[comment[1]] = comment[2]
                elif comment is None:
                    self.errors += 1
                continue
            key = parts[index][0]
            entry = self._by_shape(key) if key and line[0] != "#" else None
            if entry is not None:
                entries[index] = series[key] = entry
                self.learned += 1
                continue
            sample = self._line(line, key)
            if sample is not None:
                entry, value, stamp = sample
                entries[index] = entry
                if entry and value != parts[index][2]:
                    self.clean = False  # odd spacing: a template could not find the value
                parts[index] = ("", " ", value)
                if stamp is not None:
                    stamps[index] = stamp

    def _by_shape(self, key: str) -> Entry | None:
        """Build the series of ``key`` from a known name and label shape; None if unknown."""
        if "\\" in key:
            return None
        tables = self.tables
        brace = key.find("{")
        name = key if brace < 0 else key[:brace]
        keep = tables.names.get(name)
        if keep is None:
            keep = self._learn_name(name)
            if keep is None:
                return None
        if brace < 0:
            return (sys.intern(key), ()) if keep else _CREATED
        pieces = key[brace:].split('"')
        # An even count is an odd number of quotes: a text between them would take the
        # place of the last separator (`{a="1"}"}` looks like `{a="1"}`).
        shape = tables.shapes.get(tuple(pieces[::2])) if len(pieces) % 2 else None
        if shape is None:
            return None
        if not keep:
            return _CREATED
        label_names, order = shape
        values = pieces[1::2]
        if order is not None:
            values = [values[i] for i in order]
        # The shape fixes how many values there are, so zip needs no length check. The
        # name is interned: templates keep one per series, and a page has few names.
        return sys.intern(name), tables.labels(zip(label_names, values, strict=False))

    def _learn_name(self, name: str) -> bool | None:
        """Check a metric name against the rules and the prefix; remember if it is kept."""
        prefix = self.prefix
        if (prefix is not None and not name.startswith(prefix)) or not _METRIC_NAME.fullmatch(name):
            return None
        keep = self.tables.names[name] = not name.endswith("_created")
        return keep

    def _line(self, line: str, key: str) -> tuple[Entry, str, float | None] | None:
        """Handle one uncached line; return (entry, value text, timestamp) for a sample."""
        if not line:
            return None
        first = line[0]
        if first == "#":
            self._comment(line)
            return None
        if first == " " or first == "\t":
            stripped = line.strip()
            # An indented line's own key is not a series key, so it is never cached.
            return self._line(stripped, "") if stripped else None
        prefix = self.prefix
        if prefix is None or line.startswith(prefix):
            return self._sample(line)
        if first in _NAME_START and (" " in line or "\t" in line):
            # A sample of another family: counted (as _SKIP entries), not parsed. Its key
            # decides this check (same first character, holds a blank), so it is cached.
            if key and key[0] == first:
                self.tables.series[key] = _SKIP
            self.tables.has_skips = True
            return _SKIP, "", None
        self.errors += 1
        return None

    def _comment(self, line: str) -> None:
        """Record a TYPE or HELP line and cache what it said."""
        parsed = self.comments[line] = _parse_comment(line)
        if parsed is None:
            self.errors += 1
        elif parsed:
            kind, family, text = parsed
            (self.types if kind == "TYPE" else self.helps)[family] = text

    def _sample(self, line: str) -> tuple[Entry, str, float | None] | None:
        """Parse a sample line in full; cache its series and its shape."""
        parsed = _parse_sample(line)
        if parsed is None:
            self.errors += 1
            return None
        key, entry, value, stamp = parsed
        name = _name_of(key)
        if self.prefix is not None and not name.startswith(self.prefix):
            return None  # a prefix reaching into the labels, e.g. "vllm:x{": nothing kept
        self.learned += 1
        tables = self.tables
        if isinstance(entry, tuple) and entry is not _CREATED:
            entry = (sys.intern(entry[0]), tables.labels(entry[1]) if entry[1] else ())
        tables.series[key] = entry
        tables.names[name] = not name.endswith("_created")
        brace = len(name)
        plain = key[brace : brace + 1] == "{" and "\\" not in key
        if plain and isinstance(entry, tuple) and entry[0]:
            pieces = key[brace:].split('"')
            tables.shapes[tuple(pieces[::2])] = _shape_of(entry, pieces)
        return entry, value, stamp

    def _samples(
        self, kept: list[Series], values: list[str], stamps: dict[int, float]
    ) -> list[Sample]:
        """Build Samples from cached series and value texts (in C when all values read)."""
        try:
            floats = _floats(values)
        except ValueError:
            self.clean = False
            return self._samples_checked(kept, values, stamps)
        names, labels = zip(*kept, strict=True)
        rows = zip(names, labels, floats, repeat(None))
        out = list(map(tuple.__new__, repeat(Sample), rows))
        for index, stamp in stamps.items():
            out[index] = out[index]._replace(timestamp=stamp)
        if "" in names:  # _created series: their values are read, then dropped
            out = list(compress(out, names))
        return out

    def _samples_checked(
        self, kept: list[Series], values: list[str], stamps: dict[int, float]
    ) -> list[Sample]:
        """Build Samples one by one, counting and dropping unreadable values."""
        out: list[Sample] = []
        for index, ((name, labels), text) in enumerate(zip(kept, values, strict=True)):
            # The text after a cached series' last space may still hold a timestamp behind
            # another blank (a tab): read it as the careful path reads the rest of a line.
            read = _parse_value_and_stamp(text)
            if read is None:
                self.errors += 1
            elif name:  # not a _created series
                value, stamp = read
                out.append(Sample(name, labels, float(value), stamps.get(index, stamp)))
        return out


class _Template:
    """The layout of a page already parsed: read a page with the same layout in bulk.

    A target's page has the same lines every scrape; only sample values change. If every
    line of a new page starts with the text before the value of the same line last time,
    and its comment, blank and unparsable lines are unchanged (the heads and those whole
    lines, cut in C and compared as one digest: a template keeps 8 bytes rather than the
    text itself), then its samples are the old series with the new values: no lookup and no Python
    code per line. Lines of other prefixes are not looked at beyond their series
    text, as on the cached path.
    """

    __slots__ = (
        "cut",
        "errors",
        "has_created",
        "helps",
        "kept",
        "kept_slices",
        "heads",
        "labels",
        "lines",
        "memo",
        "names",
        "skeleton",
        "skipped",
        "types",
    )

    def __init__(self, page: _Page, result: ParseResult) -> None:
        """Record the layout of the lines ``page`` parsed into ``result``."""
        entries = page.entries
        self.kept = [bool(entry) for entry in entries]
        # Lines that must not change: comments, blank and bad lines, and skipped lines
        # whose series text is not what decided they are skipped (no blank before a value).
        # Their whole text goes into the digest; of the others, the text before the value.
        series = page.tables.series
        fixed = [
            entry is None or (entry is _SKIP and series.get(key) is not _SKIP)
            for (key, _, _), entry in zip(page.original, entries, strict=True)
        ]
        lengths = [len(key) + len(sep) for key, sep, _ in page.original]
        self.lines = len(lengths)
        self.heads = [
            _WHOLE if whole else _slice_to(n) for n, whole in zip(lengths, fixed, strict=True)
        ]
        self.skeleton = _skeleton(
            key + sep + value if whole else key + sep
            for (key, sep, value), whole in zip(page.original, fixed, strict=True)
        )
        self.kept_slices = list(compress(map(_slice_from, lengths), self.kept))
        kept = cast(list[Series], list(filter(None, entries)))
        self.names = [name for name, _ in kept]
        self.labels = [labels for _, labels in kept]
        self.has_created = "" in self.names
        self.types = result.types.copy()
        self.helps = result.helps.copy()
        self.errors = result.errors
        self.cut = result.cut_last_line
        self.skipped = result.skipped
        self.memo: dict[str, object] = {}

    def apply(self, lines: list[str]) -> ParseResult | None:
        """Parse ``lines`` if they have this layout; None if they do not."""
        if len(lines) != self.lines or _skeleton(map(getitem, lines, self.heads)) != self.skeleton:
            return None
        values = cast(list[str], list(map(getitem, compress(lines, self.kept), self.kept_slices)))
        try:
            floats = _floats(values)
        except ValueError:
            return None  # let the careful path count the bad values
        rows: Iterable[tuple[str, Labels, float, None]]
        rows = zip(self.names, self.labels, floats, repeat(None))
        if self.has_created:
            rows = compress(rows, self.names)  # leave out _created series before building
        samples = list(map(tuple.__new__, repeat(Sample), rows))
        types, helps = self.types.copy(), self.helps.copy()
        return ParseResult(samples, types, self.errors, self.cut, helps, self.skipped, self.memo)


def _slice_from(start: int) -> slice:
    """``slice(start, None)``, one shared object per start (templates hold hundreds each)."""
    return _shared_slice(start, None)


def _slice_to(stop: int) -> slice:
    """``slice(None, stop)``, shared the same way."""
    return _shared_slice(None, stop)


def _shared_slice(start: int | None, stop: int | None) -> slice:
    cut = _SLICES.get((start, stop))
    if cut is None:
        cut = slice(start, stop)
        if (start or 0) < 4096 and (stop or 0) < 4096:
            _SLICES[(start, stop)] = cut
    return cut


def _skeleton(heads: Iterable[str]) -> int:
    """A digest of a page's lines without their values: what a template must see again.

    Python's own string hash (SipHash, keyed at random per process), of the heads joined
    by newlines (no head holds one, so the joined text tells the heads apart): two
    different layouts with the same line count and probe lines get the same digest with
    a probability of about 2**-64. It costs 8 bytes where the heads themselves are most
    of the page (about 80 kB a target as strings), and less time than a cryptographic
    digest (BLAKE2b took twice as long as the comparison it replaces).
    """
    return hash("\n".join(heads))


_SLICES: dict[tuple[int | None, int | None], slice] = {}
_WHOLE = slice(None)


def _probe(prefix: str | None, lines: list[str]) -> tuple[str | None, int, str]:
    """Return what finds a page's template: prefix, line count, and the series text of
    the last line and of the middle one.

    The last line alone does not tell pages of different models apart: a vLLM 0.33
    page ends with ``vllm:cache_config_info``, which has no ``model_name``, so a fleet
    serving many models would keep replacing one template with another.
    """
    last = lines[-1] or (lines[-2] if len(lines) > 1 else "")
    mid = len(lines) // 2
    middle = lines[mid]
    for line in lines[mid : mid + 8]:  # the first sample line from the middle on
        if line[:1] != "#":
            middle = line
            break
    return prefix, len(lines), last.rpartition(" ")[0] + "\n" + middle.rpartition(" ")[0]


def _name_of(key: str) -> str:
    """Return the metric name a valid series text starts with."""
    brace = key.find("{")
    return key if brace < 0 else key[:brace].rstrip(" \t")


def _shape_of(entry: Series, pieces: list[str]) -> Shape:
    """Derive the shape of a parsed label block whose text split at quotes gave ``pieces``."""
    names = tuple(label for label, _ in entry[1])
    written = [_any_name_token(piece).group(1) for piece in pieces[:-1:2]]
    if tuple(written) == names:
        return names, None
    # Written out of order: for each label in sorted order, the slot it was written in.
    return names, tuple(written.index(label) for label in names)


def _any_name_token(piece: str) -> re.Match[str]:
    """Match the label name in a piece between values (first or later)."""
    tail = piece[1:] if piece[:1] == "{" else piece
    match = _FIRST_NAME_TOKEN.fullmatch(tail) or _NEXT_NAME_TOKEN.fullmatch(tail)
    assert match is not None  # the piece came from a label block that parsed
    return match


def _floats(values: list[str]) -> list[float]:
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


def _renumber(stamps: dict[int, float], entries: list[Entry | None]) -> dict[int, float]:
    """Re-key timestamps from line index to index among the kept samples."""
    out: dict[int, float] = {}
    kept = 0
    for index, entry in enumerate(entries):
        if entry:
            if index in stamps:
                out[kept] = stamps[index]
            kept += 1
    return out


def _last_line_is_bad(lines: list[str], prefix: str | None) -> bool:
    """Tell whether the last non-blank line is unparsable (the page was cut)."""
    for line in reversed(lines):
        if line.strip():
            page = _Page(LabelCache(), prefix)
            page.run([line])
            return page.errors > 0
    return False


def _parse_comment(line: str) -> Comment | None:
    """Parse ``# TYPE name type`` / ``# HELP name text``; () for other comments, None if bad."""
    parts = line.split(None, 3)
    if len(parts) < 3 or parts[0] != "#" or parts[1] not in ("TYPE", "HELP"):
        return ()
    family = parts[2]
    if not _METRIC_NAME.fullmatch(family):
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


def _parse_sample(line: str) -> tuple[str, Entry, str, float | None] | None:
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
    if labels is None or not _METRIC_NAME.fullmatch(name):
        return None
    value_and_stamp = _parse_value_and_stamp(rest)
    if value_and_stamp is None:
        return None
    value, stamp = value_and_stamp
    entry: Entry = _CREATED if name.endswith("_created") else (name, labels)
    return key, entry, value, stamp


def _parse_value_and_stamp(rest: str) -> tuple[str, float | None] | None:
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
