"""``ParseCache``: what the pages parsed before teach the parser about the next ones.

A vLLM page repeats the same series every scrape; only the values change. A cache owned
by whoever parses a run of pages (the collector, for its fleet; a replay, for one
recording) turns parsing into lookups. Per prefix it holds:

* series: the text before each value (``name{labels}``) → parsed series;
* shapes: a label block's text with its values cut out → its label names, sorted, and
  the slot each was written in. One histogram's buckets all share a shape, so even a
  first scrape avoids a label scan per line;
* names: metric names seen in valid samples → kept, or a dropped ``_created`` series;
* pairs: one shared object per distinct (label, value) pair;

and, whatever the prefix, the comment lines seen and the page templates
(:mod:`app.scrape.templates`). The answer of a parse never depends on what it holds.

Memory: about 0.8 kB per cached series and 130 kB per template for a 0.33.0 page. Label
pairs are shared between series (interned), so a template of a page whose series are
all distinct (every target its own ``model_name``) costs about the same. Past
``max_entries`` a map is emptied rather than evicted entry by entry: cheap, and a
thrashing cache only costs the first-scrape speed (the series map is emptied alone; the
few shapes and names that make a miss cheap stay). Entries are counted in characters
too: past ``max_chars`` of series texts learnt, the series map is emptied with the label
pairs those texts brought, and past ``max_chars`` of comment lines the comment map (a
page's series and comments may be long: a count alone bounds nothing). Past
``max_templates`` the least recently used page layout is dropped; a template holds the
labels of its page's series, so it is bounded by the scrape's page size.

Label limits (:class:`~app.scrape.label_limits.LabelLimits`): a cache holds only series
checked under the limits it was last used with; parsing under other limits empties the
series, shapes, pairs and templates first (:meth:`ParseCache.use_limits`).
"""

from __future__ import annotations

from collections.abc import Iterable

from app.scrape.label_limits import LabelLimits
from app.scrape.lines import Comment, Entry, Labels, Series, label_name_in
from app.scrape.templates import Probe, Slices, Template

__all__ = ["ParseCache", "SeriesTables", "Shape", "shape_of"]

# A label-block shape: label names sorted, and the written slot of each (None: in order).
Shape = tuple[tuple[str, ...], tuple[int, ...] | None]


class SeriesTables:
    """The cached series and shapes of one prefix (a key known here starts with it)."""

    __slots__ = ("chars", "has_skips", "names", "pairs", "series", "shapes")

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
        # Characters of the series texts learnt since the pairs were last emptied.
        self.chars = 0

    def labels(self, pairs: Iterable[tuple[str, str]]) -> Labels:
        """Return ``pairs`` as a labels tuple made of the shared pair objects."""
        known = self.pairs.setdefault
        return tuple([known(pair, pair) for pair in pairs])


class ParseCache:
    """Bounded memo of series text → parsed series, of series shapes, comment lines and
    page templates, for one owner.

    ``eager_templates``: keep a template of a page whose series were not all cached yet
    (a first scrape, or a series map too small for the fleet) rather than waiting for a
    page whose series all were. Right for a scraper, whose pages come back every round;
    a reader of one-off pages leaves it off and builds templates only for layouts seen
    at least twice.

    A scraper of many targets sizes its cache for the fleet (``max_templates`` above the
    number of targets, ``eager_templates``), so every target keeps its template even
    when the series map cannot hold all of the fleet's series: with a cache of the
    default size, 1,000 targets with distinct label values would keep evicting each
    other's series and never get a template (about 14 ms a page instead of 0.4 ms).
    """

    __slots__ = (
        "comment_chars",
        "comments",
        "eager_templates",
        "limits",
        "max_chars",
        "max_entries",
        "max_templates",
        "slices",
        "tables",
        "templates",
    )

    def __init__(
        self,
        max_entries: int = 100_000,
        max_templates: int = 256,
        *,
        eager_templates: bool = False,
        max_chars: int = 32_000_000,
    ) -> None:
        """Create an empty cache: ``max_entries`` per map (and ``max_chars`` of series
        texts, of comment lines), ``max_templates`` page layouts."""
        self.max_entries = max_entries
        self.max_templates = max_templates
        self.max_chars = max_chars
        self.eager_templates = eager_templates
        self.tables: dict[str | tuple[str, ...] | None, SeriesTables] = {}
        # Comment lines seen → what they said (None: a bad one), and their characters.
        self.comments: dict[str, Comment | None] = {}
        self.comment_chars = 0
        self.templates: dict[Probe, Template] = {}
        self.slices: Slices = {}
        # The label limits every cached series and template was checked under.
        self.limits: LabelLimits | None = None

    @classmethod
    def for_sniffing(cls) -> ParseCache:
        """A cache for ``looks_like_prometheus``, which parses page heads: small, and no
        templates (heads are cut)."""
        return cls(max_entries=5_000, max_templates=0, max_chars=1_000_000)

    def clear(self) -> None:
        """Forget everything."""
        self.tables.clear()
        self.comments.clear()
        self.comment_chars = 0
        self.templates.clear()
        self.slices.clear()

    def use_limits(self, limits: LabelLimits | None) -> None:
        """Parse under ``limits`` from now on: unless they are the ones in use, forget
        what was checked under others (series, shapes, pairs, templates)."""
        if limits != self.limits:
            self.tables.clear()
            self.templates.clear()
            self.limits = limits

    def keep_template(self, probe: Probe, template: Template) -> None:
        """Remember the layout of a page."""
        templates = self.templates
        templates.pop(probe, None)
        while templates and len(templates) >= self.max_templates:
            del templates[next(iter(templates))]  # the least recently used
        templates[probe] = template

    def resize(self, max_templates: int) -> None:
        """Keep at most ``max_templates`` page layouts from now on, dropping the least
        recently used beyond it (a fleet that shrank)."""
        self.max_templates = max_templates
        templates = self.templates
        while len(templates) > max_templates:
            del templates[next(iter(templates))]

    def tables_for(self, prefix: str | tuple[str, ...] | None) -> SeriesTables:
        """Return the tables of ``prefix``, emptying any map that outgrew the bound."""
        tables = self.tables.get(prefix)
        if tables is None:
            tables = self.tables[prefix] = SeriesTables()
        if len(tables.series) > self.max_entries:
            tables.series.clear()
            tables.has_skips = False
        if tables.chars > self.max_chars:
            tables.series.clear()
            tables.has_skips = False
            tables.pairs.clear()
            tables.chars = 0
        if len(tables.pairs) > self.max_entries:
            tables.pairs.clear()
        if len(tables.shapes) > self.max_entries or len(tables.names) > self.max_entries:
            tables.shapes.clear()
            tables.names.clear()
        if len(self.comments) > self.max_entries or self.comment_chars > self.max_chars:
            self.comments.clear()
            self.comment_chars = 0
        return tables


def shape_of(entry: Series, pieces: list[str]) -> Shape:
    """Derive the shape of a parsed label block whose text split at quotes gave ``pieces``."""
    names = tuple(label for label, _ in entry[1])
    written = [label_name_in(piece) for piece in pieces[:-1:2]]
    if tuple(written) == names:
        return names, None
    # Written out of order: for each label in sorted order, the slot it was written in.
    return names, tuple(written.index(label) for label in names)
