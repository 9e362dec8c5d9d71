"""Page templates: a page laid out like one parsed before, read in bulk.

A target's page has the same lines every scrape; only sample values change. A template
keeps the layout of a page already parsed: for each line, where its value starts, and a
digest of everything that must not change. If every line of a new page starts with the
text before the value of the same line last time, and its comment, blank and unparsable
lines are unchanged (the heads and those whole lines, cut in C and compared as one
digest: a template keeps 8 bytes rather than the text itself), then its samples are the
old series with the new values: no lookup and no Python code per line. Lines of other
prefixes are not looked at beyond their series text, as on the cached path.

A page's template is found by :func:`probe` (prefix, line count, and the series text of
two lines); a page that does not fit it falls back to the careful path, which counts what
the template could not read.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import compress, repeat
from operator import getitem
from typing import cast

from app.model import Sample
from app.scrape.lines import SKIP, Entry, Labels, Series, read_floats
from app.scrape.result import ParseResult

__all__ = ["Probe", "Slices", "Template", "probe"]

# What finds a page's template: prefix, line count, series text of two lines.
Probe = tuple[str | tuple[str, ...] | None, int, str]
# Slice objects shared by the templates of one cache (each template holds hundreds).
Slices = dict[tuple[int | None, int | None], slice]

_WHOLE = slice(None)


class Template:
    """The layout of a page already parsed: read a page with the same layout in bulk."""

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

    def __init__(
        self,
        original: list[tuple[str, str, str]],
        entries: list[Entry | None],
        series: dict[str, Entry],
        result: ParseResult,
        slices: Slices,
    ) -> None:
        """Record the layout of a page: its lines split at their last blank
        (``original``), what each line turned out to be (``entries``; None for comment,
        blank and bad lines), the series cache the page was read with, and its result.
        """
        self.kept = [bool(entry) for entry in entries]
        # Lines that must not change: comments, blank and bad lines, and skipped lines
        # whose series text is not what decided they are skipped (no blank before a value).
        # Their whole text goes into the digest; of the others, the text before the value.
        fixed = [
            entry is None or (entry is SKIP and series.get(key) is not SKIP)
            for (key, _, _), entry in zip(original, entries, strict=True)
        ]
        lengths = [len(key) + len(sep) for key, sep, _ in original]
        self.lines = len(lengths)
        self.heads = [
            _WHOLE if whole else _slice(slices, None, n)
            for n, whole in zip(lengths, fixed, strict=True)
        ]
        self.skeleton = _skeleton(
            key + sep + value if whole else key + sep
            for (key, sep, value), whole in zip(original, fixed, strict=True)
        )
        self.kept_slices = [_slice(slices, n, None) for n in compress(lengths, self.kept)]
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
            floats = read_floats(values)
        except ValueError:
            return None  # let the careful path count the bad values
        rows: Iterable[tuple[str, Labels, float, None]]
        rows = zip(self.names, self.labels, floats, repeat(None))
        if self.has_created:
            rows = compress(rows, self.names)  # leave out _created series before building
        samples = list(map(tuple.__new__, repeat(Sample), rows))
        types, helps = self.types.copy(), self.helps.copy()
        return ParseResult(samples, types, self.errors, self.cut, helps, self.skipped, self.memo)


def _slice(slices: Slices, start: int | None, stop: int | None) -> slice:
    """``slice(start, stop)``, one shared object per bounds in ``slices``."""
    cut = slices.get((start, stop))
    if cut is None:
        cut = slice(start, stop)
        if (start or 0) < 4096 and (stop or 0) < 4096:
            slices[(start, stop)] = cut
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


def probe(prefix: str | tuple[str, ...] | None, lines: list[str]) -> Probe:
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
