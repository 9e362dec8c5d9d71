"""When a target was last scraped, from the ``scrapes`` table (one indexed look-up:
the table's key is ``(target, ts)``), for a target no longer scraped."""

from __future__ import annotations

from app.store.sqlite import Store

__all__ = ["last_scrape"]


def last_scrape(store: Store, target: str) -> float | None:
    """When ``target`` was last scraped (None: never)."""
    rows = store.fetchall("SELECT MAX(ts) FROM scrapes WHERE target = ?", (target,))
    return None if not rows or rows[0][0] is None else float(rows[0][0])
