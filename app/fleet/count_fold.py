"""What a stream's SLO count cache keeps as it ages: chunks near the edges, a day of
hours, whole days beyond — so its size stops growing with the age of the store.

:class:`~app.fleet.count_cache.CountCache` counts a range as its two partial edges,
cached 5-minute chunks, whole hours and whole days. Which of them an evaluation needs:

* **chunks**: those of the open hour (every window's last hour), and at each window's
  start the chunks from it to its hour's end (the start moves a chunk every five
  minutes; the chunks before it are not needed again) — some 40 chunks, not a day's 288;
* **hours**: those of the last day and an hour (the windows up to a day), those of the
  day not complete yet, and at each budget period's start the hours from it to its day's
  end (a period starts on an hour);
* **days**: every complete day, for the budget's period (30 by default).

A day is folded once its 24 hours are counted; its hours are dropped but those still
needed one by one. When a period's start enters a folded day (a day before it passes),
that day's hours are read again from the source — from its hour roll-ups, 24 rows, where
the source has them — and kept until the start has passed them.

Pure: the indexes are given, nothing is read.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, MutableMapping

from app.fleet.slo import SloCounts

__all__ = ["DAY_HOURS", "RECENT_HOURS", "edge_chunks", "edge_hours", "fold_days"]

DAY_HOURS = 24
RECENT_HOURS = 1  # hours of chunks kept up to the open one (every window's last hour)


def edge_chunks(now: float, chunk_s: float, per_hour: int, windows: Iterable[float]) -> list[range]:
    """The chunks a sliding evaluation at ``now`` needs again: the last hours' and those
    from each window's start to its hour's end (and the partial chunk before it)."""
    k_now = math.floor(now / chunk_s)
    out = [range((k_now // per_hour - RECENT_HOURS + 1) * per_hour, k_now + 1)]
    for w in windows:
        a = math.ceil((now - w) / chunk_s)
        out.append(range(a - 1, (a // per_hour + 1) * per_hour + 1))
    return out


def edge_hours(now: float, hour_s: float, period_starts: Iterable[float]) -> list[range]:
    """The hours a sliding evaluation at ``now`` needs one by one: the last day's and an
    hour, and from each period's start to its day's end."""
    h_now = math.floor(now / hour_s)
    out = [range(h_now - DAY_HOURS - 1, h_now + 1)]
    for start in period_starts:
        h = math.floor(start / hour_s)
        if h % DAY_HOURS:  # a period starting on a day's start takes the whole day
            out.append(range(h, (h // DAY_HOURS + 1) * DAY_HOURS))
    return out


def fold_days(
    hours: MutableMapping[int, SloCounts],
    days: MutableMapping[int, SloCounts],
    keep: list[range],
) -> None:
    """Fold every complete day into ``days``; drop the hours of folded days that ``keep``
    does not hold."""
    by_day: dict[int, list[int]] = {}
    for h in hours:
        by_day.setdefault(h // DAY_HOURS, []).append(h)
    for d, members in by_day.items():
        first = d * DAY_HOURS
        if d not in days:
            if len(members) < DAY_HOURS:  # not complete (today, a young stream's first day)
                continue
            total = SloCounts()
            for h in range(first, first + DAY_HOURS):
                total = total + hours[h]
            days[d] = total
        for h in members:
            if not any(h in r for r in keep):
                del hours[h]
