"""What changed: a problem window against its stream's own healthy baseline (pure).

:func:`rank` compares the derived numbers of the current window (``Window.derived``)
with those of the stream's baseline — the windows classed healthy in the hour before the
current run of problem windows began, at least :data:`MIN_HEALTHY_S` of them (until a
stream has that much, a short baseline of at least :data:`MIN_SHORT_S`), assembled by
``app.evaluate.baseline`` — and ranks the signals that moved by **how much of the
symptom each explains under the physics** (``docs/concepts.md``), not by raw ratio.

Each symptom is modelled as a product of the signals that drive it, so its growth in
logs is a sum of their log-ratios: a signal's *contribution* is its term of that sum
(what it multiplied the symptom's driver by), its ``share`` its contribution over the
sum of the positive ones (the moves that made it worse; below ×1.1 a move is noise).
Where a driver is a sum (a context of prompt plus output), its log change is split over
the terms by the logarithmic mean (LMDI), so the parts add up exactly. A signal that is a
consequence of others is credited only with what they leave unexplained: the batch grows
with arrivals and answer length (Little's law), so ``running_avg`` gets only the growth
those do not account for. Latencies are the symptom, never a candidate.

The modules: ``pair`` (the two sides as log-ratios, the tally), ``models`` (what drives
each class's symptom), ``rank`` (the ranking and the headline), ``attach`` (the changes
on a diagnosis, and read back from its JSON form). Every name is imported from here.
"""

from __future__ import annotations

from app.diagnose.changes.attach import (
    LOOKBACK_S,
    MIN_HEALTHY_S,
    MIN_SHORT_S,
    Baseline,
    change_of,
    with_changes,
)
from app.diagnose.changes.models import COMPARED
from app.diagnose.changes.pair import NOISE, SIGNALS
from app.diagnose.changes.rank import headline, rank

__all__ = [
    "COMPARED",
    "LOOKBACK_S",
    "MIN_HEALTHY_S",
    "MIN_SHORT_S",
    "NOISE",
    "SIGNALS",
    "Baseline",
    "change_of",
    "headline",
    "rank",
    "with_changes",
]
