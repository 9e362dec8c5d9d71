"""A page whose last line is bad: its complete lines used, what the cut could hide withheld.

Prometheus uses a page it can parse and counts what it cannot; one bad last line (a
page cut in the middle of a line, the parser's ``cut_last_line``) no longer drops the
whole page. Its complete lines are used and the bad one is counted in ``parse_errors``;
the snapshot names it with a ``cut_last_line`` problem, a partial kind, so the target
stays up. What a cut can make wrong is left out of the scrape (:func:`withhold_cut`):

* the signals the cut line may belong to, in every stream that carries them: the lines
  of its family stop at the cut (a histogram's upper buckets, ``_sum`` and ``_count``;
  another engine's counter), so its sum would read as a fall (a phantom reset) now and a
  rise later. The family is the sample name the line starts with (``DISPATCH``); a name
  itself cut (nothing after it) may begin any name phasewatch reads, so all of those. A
  comment line, or a family phasewatch does not read, withholds nothing;
* the counters and histograms the previous snapshot had and this one lacks: their lines
  may come after the cut.

Both are listed in the stream's ``withheld`` (and ``missing``): a counter or histogram
keeps its previous value as the baseline, so the next delta covers the gap
(``app.sources.process``); a gauge is left out for the scrape. A series this page does
not show and no earlier page had has no baseline: after a cut page it starts one rather
than counting from zero (:func:`after_cut`, ``app.sources.process``).
"""

from __future__ import annotations

import re
from dataclasses import replace

from app.model import ErrorKind, Problem, Snapshot, StreamSnapshot
from app.scrape.signals import (
    ALL_SIGNALS,
    COUNTER_SOURCES,
    DISPATCH,
    FINISHED,
    GAUGE_SOURCES,
    HISTOGRAM_SOURCES,
    INFO,
    Spec,
)

__all__ = ["after_cut", "last_line", "signals_of", "withhold_cut"]

_NAME = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_FINISHED_PREFIX = "finished:"
# How much of the cut line a problem's detail quotes.
_QUOTED = 60


def _signals_by_family() -> dict[str, frozenset[str]]:
    """vLLM family → the signals it carries (a labelled family: those of all its values)."""
    out: dict[str, frozenset[str]] = {}
    for sources in (HISTOGRAM_SOURCES, GAUGE_SOURCES, COUNTER_SOURCES):
        for signal, families in sources.items():
            for family in families:
                base = family.split("{", 1)[0]
                out[base] = out.get(base, frozenset()) | {signal}
    return out


_SIGNALS_OF_FAMILY = _signals_by_family()


def last_line(text: str) -> str:
    """The last line of ``text`` that is not blank (``""`` if none)."""
    for line in reversed(text.replace("\r\n", "\n").split("\n")):
        if line.strip():
            return line
    return ""


def _of_spec(spec: Spec) -> frozenset[str]:
    kind, family, _ = spec
    if kind == FINISHED:
        return frozenset({_FINISHED_PREFIX})
    if kind == INFO:
        return frozenset()
    return _SIGNALS_OF_FAMILY.get(family, frozenset())


def signals_of(line: str) -> frozenset[str]:
    """The signals a bad last line may belong to: ``ttft`` for a line that starts
    ``vllm:time_to_first_token_seconds_bucket{``; ``finished:`` stands for every
    ``finished:<reason>`` counter. Empty for a comment or a family phasewatch does not
    read."""
    text = line.lstrip()
    found = _NAME.match(text)
    if found is None or text.startswith("#"):
        return frozenset()
    name = found.group()
    if len(name) < len(text):  # the name ends where its labels or value begin
        spec = DISPATCH.get(name)
        return frozenset() if spec is None else _of_spec(spec)
    out: frozenset[str] = frozenset()
    for known, spec in DISPATCH.items():
        if known.startswith(name):
            out |= _of_spec(spec)
    return out


def _hit(key: str, signals: frozenset[str]) -> bool:
    return key in signals or (key.startswith(_FINISHED_PREFIX) and _FINISHED_PREFIX in signals)


def _without(
    stream: StreamSnapshot, signals: frozenset[str], before: StreamSnapshot | None
) -> tuple[StreamSnapshot, list[str]]:
    """``stream`` with ``signals`` left out, and the counters and histograms ``before``
    had that it lacks listed as withheld; return it and the signals it had that left."""
    held = [k for k in (*stream.histograms, *stream.counters, *stream.gauges) if _hit(k, signals)]
    lacking = []
    if before is not None:
        have = stream.histograms.keys() | stream.counters.keys()
        lacking = [k for k in (*before.histograms, *before.counters) if k not in have]
    if not held and not lacking:
        return stream, []
    drop = set(held)
    withheld = tuple(dict.fromkeys((*stream.withheld, *held, *lacking)))
    gone = set(stream.missing) | drop | set(lacking)
    return replace(
        stream,
        histograms={k: v for k, v in stream.histograms.items() if k not in drop},
        counters={k: v for k, v in stream.counters.items() if k not in drop},
        gauges={k: v for k, v in stream.gauges.items() if k not in drop},
        engines={
            e: {k: v for k, v in g.items() if k not in drop} for e, g in stream.engines.items()
        },
        missing=tuple(s for s in ALL_SIGNALS if s in gone),
        withheld=withheld,
    ), held


def withhold_cut(snap: Snapshot, line: str, before: Snapshot | None) -> Snapshot:
    """``snap``, read from a page whose last line ``line`` is bad, with what the cut
    could make wrong withheld (module rules) and a ``cut_last_line`` problem naming it.
    ``before``: the previous snapshot of the target (None: there is none)."""
    signals = signals_of(line)
    streams: dict[str, StreamSnapshot] = {}
    left: list[str] = []
    for model, stream in snap.streams.items():
        prior = None if before is None else before.streams.get(model)
        streams[model], held = _without(stream, signals, prior)
        left.extend(f"{signal} of {model!r}" for signal in held)
    quoted = line[:_QUOTED] + ("…" if len(line) > _QUOTED else "")
    detail = f"the last line is cut: {quoted!r}; the complete lines are used"
    if left:
        more = f" and {len(left) - 5} more" if len(left) > 5 else ""
        detail += "; left out this scrape: " + ", ".join(left[:5]) + more
    problem = Problem(ErrorKind.CUT_LAST_LINE, detail)
    return replace(snap, streams=streams, problems=(*snap.problems, problem))


def after_cut(snap: Snapshot) -> bool:
    """Whether ``snap`` was read from a page whose last line was bad."""
    return any(p.kind == ErrorKind.CUT_LAST_LINE for p in snap.problems)
