"""Colours, patterns and text labels of the diagnosis classes, and the charts' colours.

Colours come from the Okabe–Ito palette, which stays distinguishable under the common
colour-vision deficiencies. Colour is never the only carrier: every class also has a
text label (legends, cards, hover, the band's own text) and a fill pattern in the band.
Each class's label, colour, pattern and severity are its entry in the vocabulary
(``app.diagnose.classes``); this module draws with them.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.diagnose import classes


@dataclass(frozen=True, slots=True)
class ClassStyle:
    """How one class is drawn: ``colour`` fill, ``text`` colour on it, ``pattern`` shape."""

    label: str
    short: str
    colour: str
    text: str
    pattern: str
    severity: int


# Okabe–Ito: orange, sky blue, bluish green, yellow, blue, vermillion, reddish purple.
ORANGE = "#E69F00"
SKY = "#56B4E9"
GREEN = "#009E73"
YELLOW = "#F0E442"
BLUE = "#0072B2"
VERMILLION = "#D55E00"
PURPLE = "#CC79A7"
GREY = "#999999"
BLACK = "#000000"
# One more fill for transfer_bound: a dark red, far (CIE76 ΔE ≥ 30) from every replica
# line colour and darker than the vermillion of KV pressure.
DARK_RED = "#920000"
# The class strip where no window was computed (the style sheet's .mini-band grey).
EMPTY_STRIP = "#eeeeee"
# Every colour a class may be filled with: Okabe–Ito, grey for "no data", and dark red.
SWATCHES = (ORANGE, SKY, GREEN, YELLOW, BLUE, VERMILLION, PURPLE, GREY, BLACK, DARK_RED)

STYLES: dict[str, ClassStyle] = {
    t.cls: ClassStyle(t.label, t.short, t.colour, t.text, t.pattern, classes.severity(t.cls))
    for t in classes.VOCABULARY
}
UNKNOWN = ClassStyle("Unknown", "?", "#dddddd", "#000000", "", classes.severity(""))

# Line colours of the five-metric charts (also told apart by dash style and legend text).
P50 = BLUE
P99 = VERMILLION
SLO = BLACK
RUNNING = GREEN
WAITING = PURPLE
ARRIVALS = SKY  # requests/s arriving (estimated) and completed: the requests row's right axis
COMPLETIONS = BLACK
KV = ORANGE
PREEMPTION = BLACK


def style(cls: str) -> ClassStyle:
    """The style of a class value (``"queue_bound"``); unknown values get a neutral one."""
    return STYLES.get(cls, UNKNOWN)


def severity(cls: str) -> int:
    """Higher is worse (``classes.severity``); unknown values lowest."""
    return classes.severity(cls)


def label(cls: str, sub_cause: str | None = None) -> str:
    """``"Decode-bound (prefill interference)"`` style text for a class and sub-cause."""
    return classes.label(cls, sub_cause, unknown=UNKNOWN.label)


# Replicas side by side: each replica a colour *and* a dash style, so lines stay apart in
# grey and under colour-vision deficiencies; the legend names every line. The colours are
# a categorical set of their own, none of them a class colour (nor close to one: CIE76
# ΔE ≥ 30 from every swatch above), so no replica reads as a class — a KV-pressure
# replica is never drawn in Healthy's green.
REPLICA_COLOURS = (
    "#332288",  # indigo
    "#AD1457",  # raspberry
    "#827717",  # olive
    "#8C564B",  # brown
    "#00838F",  # dark cyan
    "#9C27B0",  # violet
    "#DDCC77",  # sand
)
REPLICA_DASHES = ("solid", "dot", "dash", "longdash", "dashdot")
FLEET = BLACK  # the fleet's own line (percentiles of all requests)
# An imbalanced replica: a vermillion "x" marker and a text label, never colour alone.
# The marker is a thin open cross drawn behind the lines, so the line it flags stays
# visible through it.
IMBALANCED = VERMILLION
IMBALANCED_LABEL = "imbalanced"
IMBALANCED_SYMBOL = "x-thin-open"
IMBALANCED_PATTERN = "x"
TARGET_LINE = BLACK  # an SLO's target ratio, and zero budget


def replica_style(index: int) -> tuple[str, str]:
    """(colour, dash) of the ``index``-th replica of a fleet (sorted by name); the pairs
    repeat only after 35 replicas (7 colours × 5 dashes)."""
    colour = REPLICA_COLOURS[index % len(REPLICA_COLOURS)]
    return colour, REPLICA_DASHES[index % len(REPLICA_DASHES)]
