"""Query parameter types shared by the routes: finite, bounded numbers and list pages.

Every float a route takes is one of these, so ``nan``, ``inf`` and ``1e300`` are a 422
naming the parameter, never a 500 or a computation that does not end. Bounds that depend
on the settings (a window no longer than the history kept) are checked by the query
functions (``app.read.windows.check_windows``) and answered 422 as well.

A list that grows with the fleet (targets, fleets, alerts, silences, SLOs) answers one
:class:`Page` of it — ``limit`` (default :data:`DEFAULT_LIMIT`, at most
:data:`MAX_LIMIT`) items from ``offset`` — and the length of the whole list in the
``X-Total-Count`` header, so the body stays a JSON array.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, TypeVar

from fastapi import Depends, HTTPException, Query, Response
from pydantic import AllowInfNan, Field

from app.api.deps import StorageConfigDep
from app.read.windows import LATEST_TIME, MIN_STEP

T = TypeVar("T")

FiniteFloat = Annotated[float, AllowInfNan(False)]
"""A float that is a number: ``nan``, ``inf`` and ``-inf`` are refused."""
UnixTime = Annotated[FiniteFloat, Field(ge=0, le=LATEST_TIME)]
"""Unix seconds from 1970 to the end of year 9999 (what ``datetime`` can show)."""
Seconds = Annotated[FiniteFloat, Field(gt=0)]
"""A positive duration; a window is bounded by the history kept (422 naming it beyond)."""
Step = Annotated[FiniteFloat, Field(ge=MIN_STEP, le=LATEST_TIME)]
"""Seconds between windows or points; how many there may be is capped per route."""

MAX_ANSWER_BYTES = 10_000_000
"""The largest JSON answer a route writes; a larger one is a 422 that says how to ask."""

DEFAULT_LIMIT = 1000
MAX_LIMIT = 10_000
MAX_OFFSET = 1_000_000_000
TOTAL_HEADER = "X-Total-Count"

Limit = Annotated[
    int, Query(ge=1, le=MAX_LIMIT, description=f"items to return, at most {MAX_LIMIT:,}")
]


@dataclass(frozen=True)
class Page:
    """``limit`` items from ``offset`` of a list."""

    limit: int = DEFAULT_LIMIT
    offset: int = 0

    def take(self, items: Sequence[T], response: Response) -> list[T]:
        """This page of ``items``; their count goes in the ``X-Total-Count`` header."""
        response.headers[TOTAL_HEADER] = str(len(items))
        return list(items[self.offset : self.offset + self.limit])


def get_page(
    limit: Limit = DEFAULT_LIMIT,
    offset: Annotated[
        int, Query(ge=0, le=MAX_OFFSET, description="items to skip (X-Total-Count: all)")
    ] = 0,
) -> Page:
    return Page(limit, offset)


PageDep = Annotated[Page, Depends(get_page)]


def history_kept(storage: StorageConfigDep) -> float:
    """Seconds of history the store keeps: the longest window worth computing."""
    return min(storage.retention_days * 86400.0, LATEST_TIME)


HistoryKeptDep = Annotated[float, Depends(history_kept)]


def json_answer(body: bytes) -> Response:
    """``body`` as a JSON response, or a 422 when it is over :data:`MAX_ANSWER_BYTES`
    (the window cap bounds the work; sizes vary with the data, so this bounds the answer)."""
    if len(body) > MAX_ANSWER_BYTES:
        raise HTTPException(
            422,
            f"the answer would be {len(body) / 1e6:.1f} MB, over the "
            f"{MAX_ANSWER_BYTES / 1e6:.0f} MB limit: raise step or narrow the range",
        )
    return Response(body, media_type="application/json")
