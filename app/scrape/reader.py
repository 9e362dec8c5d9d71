"""``PageReader``: the caches one owner reads its run of pages through.

Reading a scraped page is three steps — sniff (is it exposition text at all?), parse,
normalise — and each is cheap only with what the previous pages taught: the parser's
series and page templates, the sniffer's comment lines, the normaliser's label splits
and bucket layouts. A reader keeps those for whoever owns it: the collector one for its
whole fleet (sized for it), a target processed on its own (a replay, ``phasewatch
diagnose``) one of its own. Two services in one process, or two tests, share nothing.
"""

from __future__ import annotations

from app.model import Snapshot
from app.scrape.cache import ParseCache
from app.scrape.label_limits import LabelLimits
from app.scrape.normalize import NormalizeCache, normalize
from app.scrape.parse import looks_like_prometheus, parse
from app.scrape.result import ParseResult

__all__ = ["PageReader"]


class PageReader:
    """Sniffs, parses (``vllm:`` samples) and normalises pages through caches it owns."""

    __slots__ = ("normalize_cache", "parse_cache", "sniff_cache")

    def __init__(self, *, max_templates: int = 256, eager_templates: bool = False) -> None:
        """Start with empty caches; ``max_templates`` and ``eager_templates`` size the
        parse cache (:class:`~app.scrape.cache.ParseCache`: a scraper of many targets
        wants a template per target, kept from the first scrape)."""
        self.parse_cache = ParseCache(max_templates=max_templates, eager_templates=eager_templates)
        self.sniff_cache = ParseCache.for_sniffing()
        self.normalize_cache = NormalizeCache()

    def looks_like_prometheus(self, text: str) -> bool:
        """Tell whether ``text`` reads as an exposition page (not HTML, JSON or binary)."""
        return looks_like_prometheus(text, cache=self.sniff_cache)

    def parse(self, text: str, *, limits: LabelLimits | None = None) -> ParseResult:
        """The ``vllm:`` samples of a page, and what judges the page itself (with
        ``limits``: its first series over them, ``ParseResult.over_limit``)."""
        return parse(text, cache=self.parse_cache, limits=limits)

    def normalize(self, parsed: ParseResult, *, target: str, ts: float) -> Snapshot:
        """One parsed page of ``target`` at ``ts`` as canonical signals per model_name."""
        return normalize(parsed, target=target, ts=ts, cache=self.normalize_cache)
