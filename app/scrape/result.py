"""What parsing one exposition page gives: ``ParseResult``."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.model import Sample

__all__ = ["ParseResult"]


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
    # Parsed with label limits (``app.scrape.label_limits``): what the first kept series
    # over one of them breaks (its sample is still in ``samples``). None: none over.
    over_limit: str | None = None
