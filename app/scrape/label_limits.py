"""``LabelLimits``: how many labels a series may carry, and how long their names and
values may be — Prometheus' ``label_limit``, ``label_name_length_limit`` and
``label_value_length_limit`` per scrape.

A label value is copied into everything keyed by its stream: the parser's caches, the
store, every window of the API (``model_name`` is in each one), ``/metrics``, the fleet
and SLO answers. One value of a million characters once made six anonymous window
requests hold 1.3 GB. A page with a series over a limit is therefore a failed scrape
(``label_limit``, :func:`app.sources.process.process`): nothing of it is used.

The parser checks a series once, when it first meets it (:mod:`app.scrape.parse`): a
series in its caches was checked under the same limits, and a series over a limit is
never cached, so a page read through a template costs nothing more.

Edge cases:
* 0 is no limit (as in Prometheus), for each limit on its own.
* Lengths are in characters (Prometheus counts bytes) of the value as unescaped:
  ``\\n`` is one character.
* Only the page's own labels count: not the metric name (Prometheus counts
  ``__name__`` and the target's labels too, after relabelling).
* Names in a message are cut to 50 characters, as Prometheus cuts them: the message
  must not carry what it refuses.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.config import ScrapeConfig

__all__ = ["LabelLimits"]

_SHOWN = 50


@dataclass(frozen=True, slots=True)
class LabelLimits:
    """Limits on one series' labels (0: none); :meth:`breach` says what a series breaks."""

    labels: int = 0
    name_length: int = 0
    value_length: int = 0

    @classmethod
    def of(cls, scrape: ScrapeConfig) -> LabelLimits:
        """The limits a scrape configuration sets."""
        return cls(
            scrape.label_limit, scrape.label_name_length_limit, scrape.label_value_length_limit
        )

    def breach(self, name: str, labels: tuple[tuple[str, str], ...]) -> str | None:
        """What the first label of series ``name`` over a limit breaks; None within them."""
        if self.labels and len(labels) > self.labels:
            return (
                f"label limit exceeded: {_cut(name)} has {len(labels):,} labels, over "
                f"scrape.label_limit ({self.labels:,})"
            )
        if self.name_length:
            for label, _ in labels:
                if len(label) > self.name_length:
                    return (
                        f"label name length limit exceeded: a label of {_cut(name)} "
                        f"({_cut(label)}) is {len(label):,} characters long, over "
                        f"scrape.label_name_length_limit ({self.name_length:,})"
                    )
        if self.value_length:
            for label, value in labels:
                if len(value) > self.value_length:
                    return (
                        f"label value length limit exceeded: {_cut(label)} of {_cut(name)} "
                        f"is {len(value):,} characters long, over "
                        f"scrape.label_value_length_limit ({self.value_length:,})"
                    )
        return None

    def values_within(self, values: list[str]) -> bool:
        """Whether every one of ``values`` is within the value length limit."""
        limit = self.value_length
        return not limit or not values or max(map(len, values)) <= limit


def _cut(text: str) -> str:
    """``text`` as shown in a message: at most 50 characters, then an ellipsis."""
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "…"
