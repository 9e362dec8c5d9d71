"""Prometheus text exposition (format 0.0.4) → samples, fast and tolerant.

The parser never raises on any ``str``. Lines it cannot read are skipped and counted in
``ParseResult.errors``; when the last non-blank line is one of them (a page cut mid-line,
as in pasted excerpts or a scrape that hit its size cap) ``cut_last_line`` is set. The
grammar of one line, and what makes it an error: :mod:`app.scrape.lines`.

Rules:
* With ``prefix`` set (one, or a tuple: vLLM's and SGLang's by default), only samples
  whose name starts with it are returned. Other sample
  lines are only sanity-checked (they must start like a metric name and hold a blank
  before a value) and counted in ``skipped``.
* ``*_created`` samples and ``*_created`` families are dropped: they are the creation
  times prometheus_client adds to counters and histograms, never measurements. Their
  lines are still checked like any other (a bad value is an error).
* ``types`` and ``helps`` are kept for every family, prefix or not, so that a caller can
  tell "vLLM families declared but empty" from "no vLLM families at all".
* ``looks_like_prometheus`` judges the first 40 lines: some must parse (a sample, TYPE or
  HELP) and no more than that many may fail; HTML, JSON and binary pages fail.
* With ``limits`` (:class:`~app.scrape.label_limits.LabelLimits`), a kept series with too
  many labels, or a label name or value too long, is named in ``over_limit`` (the first
  one); its sample is still returned, the caller refuses the page. ``_created`` series
  are checked too (they are on the page, only their values are dropped); lines that do
  not parse are errors, never checked. Such a series is never cached (nor its label
  pairs, nor the page's template), so it is checked again on every page that holds it,
  while a series the caches know was checked once, when it was learnt.

Speed (bench/parse.py): a vLLM page repeats the same series every scrape; only the values
change. What earlier pages taught is kept in a :class:`~app.scrape.cache.ParseCache`,
passed in by its owner (the collector keeps one sized for its fleet); without one, a
parse starts from an empty cache and keeps nothing. Three layers, each falling back to
the next:
1. Template (:mod:`app.scrape.templates`): the layout of a page seen before. If every
   line of the new page starts the same and its comment lines are unchanged, the samples
   are the known series with the new values, read in bulk by C-level ``map`` calls.
2. Series cache: the text before each value (``name{labels}``) → parsed series; misses
   first try the *shape* of the series (its text with label values cut out), which one
   histogram's buckets all share, so even a first scrape avoids a label scan per line.
3. The careful parser (:mod:`app.scrape.lines`), for new shapes, escapes, timestamps and
   odd spacing.
"""

from __future__ import annotations

import sys
from itertools import compress, repeat
from operator import itemgetter
from typing import cast

from app.model import Sample
from app.scrape.cache import ParseCache, shape_of
from app.scrape.label_limits import LabelLimits
from app.scrape.lines import (
    CREATED,
    METRIC_NAME,
    NAME_START,
    SKIP,
    Comment,
    Entry,
    Series,
    labels_of,
    name_of,
    parse_comment,
    parse_sample,
    parse_value_and_stamp,
    read_floats,
)
from app.scrape.result import ParseResult
from app.scrape.templates import Template, probe

__all__ = [
    "DEFAULT_PREFIX",
    "Prefix",
    "looks_like_prometheus",
    "parse",
]

# The engines' families: vLLM's and SGLang's (``app.scrape.signals.ENGINE_PREFIXES``).
DEFAULT_PREFIX: tuple[str, ...] = ("vllm:", "sglang:")
# One prefix, several (a name starting with any is kept), or None (every name).
Prefix = str | tuple[str, ...] | None

_UNKNOWN: Comment = ("", "", "")
_KEY = itemgetter(0)
_VALUE = itemgetter(2)
# How much of a page looks_like_prometheus() reads.
_SNIFF_CHARS = 8192
_SNIFF_LINES = 40


def parse(
    text: str,
    *,
    prefix: Prefix = DEFAULT_PREFIX,
    cache: ParseCache | None = None,
    limits: LabelLimits | None = None,
) -> ParseResult:
    """Parse an exposition page; keep samples whose name starts with ``prefix`` (None: all)
    and name the first kept series over ``limits`` (None: no limits)."""
    # ``cache``: what the caller's earlier pages taught (None: a fresh one, kept by no
    # one). The result never depends on what the cache holds.
    if not isinstance(text, str):  # the contract is "never raise", even on bad callers
        return ParseResult([], {}, 1 if text else 0, False)
    if not prefix:
        prefix = None
    if cache is None:
        cache = ParseCache()
    cache.use_limits(limits)
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    lines = text.split("\n")
    key = probe(prefix, lines)
    templates = cache.templates
    template = templates.pop(key, None)
    if template is not None:
        templates[key] = template  # now the most recently used
        result = template.apply(lines)
        if result is not None:
            return result
    page = _Page(cache, prefix)
    samples = page.run(lines)
    cut = page.errors > 0 and _last_line_is_bad(lines, prefix)
    result = ParseResult(
        samples, page.types, page.errors, cut, page.helps, page.skipped, over_limit=page.breach
    )
    if page.clean and (cache.eager_templates or not page.learned) and cache.max_templates > 0:
        # By default only a page whose series were all known: a first scrape stays as
        # cheap as it can be, and the template comes with the second.
        template = Template(page.original, page.entries, page.tables.series, result, cache.slices)
        cache.keep_template(key, template)
    return result


def looks_like_prometheus(text: str, *, cache: ParseCache | None = None) -> bool:
    """Tell whether ``text`` reads as an exposition page (not HTML, JSON or binary).

    ``cache``: one made by ``ParseCache.for_sniffing()`` that the caller keeps for the
    page heads it sniffs (None: a fresh one).
    """
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
    sniff = ParseCache.for_sniffing() if cache is None else cache
    result = parse("\n".join(lines), prefix=None, cache=sniff)
    good = len(result.samples) + len(result.types) + len(result.helps)
    return good > 0 and result.errors <= good


class _Page:
    """One parse: turns lines into samples and keeps types, helps and counts."""

    __slots__ = (
        "breach",
        "cache",
        "clean",
        "comments",
        "entries",
        "errors",
        "helps",
        "learned",
        "limits",
        "original",
        "prefix",
        "skipped",
        "tables",
        "types",
    )

    def __init__(self, cache: ParseCache, prefix: Prefix) -> None:
        """Start a parse that uses ``cache`` (and its label limits) and keeps names
        starting with ``prefix``."""
        self.prefix = prefix
        self.cache = cache
        self.limits = cache.limits
        self.breach: str | None = None  # the first kept series over a label limit
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
            self.skipped += entries.count(SKIP)
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
                self.tables.chars += len(key)
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
            return (sys.intern(key), ()) if keep else CREATED
        pieces = key[brace:].split('"')
        # An even count is an odd number of quotes: a text between them would take the
        # place of the last separator (`{a="1"}"}` looks like `{a="1"}`).
        shape = tables.shapes.get(tuple(pieces[::2])) if len(pieces) % 2 else None
        if shape is None:
            return None
        label_names, order = shape
        values = pieces[1::2]
        limits = self.limits
        if limits is not None and not limits.values_within(values):
            return None  # the careful path names it (the shape's names and count passed)
        if not keep:
            return CREATED
        if order is not None:
            values = [values[i] for i in order]
        # The shape fixes how many values there are, so zip needs no length check. The
        # name is interned: templates keep one per series, and a page has few names.
        return sys.intern(name), tables.labels(zip(label_names, values, strict=False))

    def _learn_name(self, name: str) -> bool | None:
        """Check a metric name against the rules and the prefix; remember if it is kept."""
        prefix = self.prefix
        if (prefix is not None and not name.startswith(prefix)) or not METRIC_NAME.fullmatch(name):
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
        if first in NAME_START and (" " in line or "\t" in line):
            # A sample of another family: counted (as SKIP entries), not parsed. Its key
            # decides this check (same first character, holds a blank), so it is cached.
            if key and key[0] == first:
                self.tables.series[key] = SKIP
                self.tables.chars += len(key)
            self.tables.has_skips = True
            return SKIP, "", None
        self.errors += 1
        return None

    def _comment(self, line: str) -> None:
        """Record a TYPE or HELP line and cache what it said."""
        parsed = self.comments[line] = parse_comment(line)
        self.cache.comment_chars += len(line)
        if parsed is None:
            self.errors += 1
        elif parsed:
            kind, family, text = parsed
            (self.types if kind == "TYPE" else self.helps)[family] = text

    def _sample(self, line: str) -> tuple[Entry, str, float | None] | None:
        """Parse a sample line in full; cache its series and its shape."""
        parsed = parse_sample(line)
        if parsed is None:
            self.errors += 1
            return None
        key, entry, value, stamp = parsed
        name = name_of(key)
        if self.prefix is not None and not name.startswith(self.prefix):
            return None  # a prefix reaching into the labels, e.g. "vllm:x{": nothing kept
        limits = self.limits
        if limits is not None and isinstance(entry, tuple):
            labels = entry[1] if entry is not CREATED else labels_of(key)
            breach = limits.breach(name, labels)
            if breach is not None:
                self.clean = False  # no template: the page's next copy is checked again
                if self.breach is None:
                    self.breach = breach
                return entry, value, stamp  # neither the series nor its pairs cached
        self.learned += 1
        tables = self.tables
        if isinstance(entry, tuple) and entry is not CREATED:
            entry = (sys.intern(entry[0]), tables.labels(entry[1]) if entry[1] else ())
        tables.series[key] = entry
        tables.chars += len(key)
        tables.names[name] = not name.endswith("_created")
        brace = len(name)
        plain = key[brace : brace + 1] == "{" and "\\" not in key
        if plain and isinstance(entry, tuple) and entry[0]:
            pieces = key[brace:].split('"')
            tables.shapes[tuple(pieces[::2])] = shape_of(entry, pieces)
        return entry, value, stamp

    def _samples(
        self, kept: list[Series], values: list[str], stamps: dict[int, float]
    ) -> list[Sample]:
        """Build Samples from cached series and value texts (in C when all values read)."""
        try:
            floats = read_floats(values)
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
            read = parse_value_and_stamp(text)
            if read is None:
                self.errors += 1
            elif name:  # not a _created series
                value, stamp = read
                out.append(Sample(name, labels, float(value), stamps.get(index, stamp)))
        return out


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


def _last_line_is_bad(lines: list[str], prefix: Prefix) -> bool:
    """Tell whether the last non-blank line is unparsable (the page was cut)."""
    for line in reversed(lines):
        if line.strip():
            page = _Page(ParseCache(), prefix)
            page.run([line])
            return page.errors > 0
    return False
