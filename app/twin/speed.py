"""The server's speed over the span, window by window (pure).

A server is not equally fast all through a span: other work on the host, a neighbour on
the same bus, clocks and throttling, the interpreter's pauses. The fitted step time
(:mod:`app.twin.steptime`) prices each window's mean inter-token gap from that window's
batch, prompt chunks and context; what it leaves unexplained — the measured gap over the
priced one — is the window's speed factor. Normalised to a mean of 1 (weighted as the
fit weighs the windows; the calibration sets the level), the factors are replayed as a
timeline, as the arrivals are: the twin's step in a window is the fitted one times that
window's factor.

Near saturation this is most of a queue: the wait grows with the variance of the service
time (Kingman), so a few windows 10–20 % slower than the mean build a queue that a server
at its mean speed never has. Where the fit explains every window (a steady server), the
factors are 1 and nothing changes. What a factor cannot tell apart: a window slow for
the host's sake from one slow for a cause the step time lacks; both are replayed where
they were.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.twin.steptime import Observation, StepModel, predict

# A window's factor is kept within this range of the mean: one stray window must not
# stall (or race) the replay.
MIN_FACTOR, MAX_FACTOR = 0.5, 2.0


def timeline(
    obs: Sequence[Observation], model: StepModel, starts: Sequence[float]
) -> tuple[tuple[float, float], ...]:
    """(window start, factor) for every window of ``starts``; () with fewer than two
    windows to compare. A window without a decode observation gets 1."""
    raw: dict[int, tuple[float, float]] = {}
    for o in obs:
        if o.kind != "decode" or not 0 <= o.tile < len(starts):
            continue
        priced = predict(o, model)
        if priced > 0:
            raw[o.tile] = (o.y / priced, o.weight)
    if len(raw) < 2:
        return ()
    total = sum(w for _, w in raw.values())
    mean = sum(k * w for k, w in raw.values()) / total
    if not mean > 0:
        return ()
    out = []
    for i, t0 in enumerate(starts):
        k = raw[i][0] / mean if i in raw else 1.0
        out.append((t0, min(max(k, MIN_FACTOR), MAX_FACTOR)))
    return tuple(out)
