"""A prediction past the steps the span showed says so, with a wider interval (pure).

The step time is fitted on the steps the span's windows show (``Twin.seen``: the largest
prompt chunk beside the decodes, the most sequences running). A change can ask for
steps the span never took — a larger token budget makes larger chunks, more traffic or a
larger ``max_num_seqs`` larger batches — and there the fitted line is the roofline's
prior, not the server's: a compute-bound chunk may carry a fixed charge the span could
not tell from its price per token, a K/V read may cost more or less of a weight read, the
two sides of the roofline may overlap better or worse. Each of those is a fit as
consistent with the span as the twin's own (``app.twin.stepobs.alternatives``); they
agree on the steps the span took and part past them.

Where the prediction's runs spend ``BEYOND`` of their step time or more in steps larger
than the span's (by ``app.twin.engine.GROW``), each alternative is run too and the
interval spans them, and the prediction carries a note naming the range seen and the
range asked.
"""

from __future__ import annotations

import dataclasses
import statistics

from app.twin.engine import Knobs, Outcome, run
from app.twin.fit import Twin

# The share of a prediction's step time in steps beyond the span's from which it is said
# to extrapolate.
BEYOND = 0.02


def widen(
    twin: Twin,
    scale: float,
    bounds: dict[str, tuple[float, ...]],
    knobs: Knobs,
    runs: list[Outcome],
) -> tuple[list[Outcome], str | None]:
    """The alternatives' runs and the note, where the prediction's ``runs`` extrapolate
    (module docstring); nothing otherwise. ``scale``: the calibration's step scale,
    ``bounds``: its histogram bounds."""
    seen = twin.seen
    extents = [o.extent for o in runs if o.extent is not None]
    if seen is None or not extents:
        return [], None
    tokens = statistics.median(e.beyond_tokens for e in extents)
    seqs = statistics.median(e.beyond_seqs for e in extents)
    if tokens < BEYOND and seqs < BEYOND:
        return [], None
    parts = []
    if tokens >= BEYOND:
        top = max(e.tokens for e in extents)
        parts.append(
            f"steps of up to {top:,} new tokens (the span's up to {seen.tokens:,.0f}) for "
            f"{tokens:.0%} of its step time"
        )
    if seqs >= BEYOND:
        top = max(e.seqs for e in extents)
        parts.append(
            f"batches of up to {top:,} sequences (the span's up to {seen.running:,.0f}) for "
            f"{seqs:.0%} of its step time"
        )
    # Past the span's chunks, what a compute-bound step pays; past its batches, what the
    # decodes' reads and their overlap with the compute cost.
    keys = ({"overlap", "compute_base"} if tokens >= BEYOND else set()) | (
        {"overlap", "pool_read"} if seqs >= BEYOND else set()
    )
    chosen = [(why, model) for key, why, model in twin.alternatives if key in keys]
    scaled = dataclasses.replace(knobs, step_scale=knobs.step_scale * scale)
    outs = [
        run(dataclasses.replace(twin, step=model), scaled, seed=0, **bounds) for _, model in chosen
    ]
    why = "; ".join(w for w, _ in chosen) or "none fitted"
    note = (
        "the prediction extrapolates the step time: " + " and ".join(parts) + ". Past the "
        "span's steps the step time is the roofline prior's; the interval spans the fits "
        f"that explain the span as well with other priors ({why})"
    )
    return outs, note
