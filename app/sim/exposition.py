"""Render metric families as text format 0.0.4 (never OpenMetrics).

Two renderers over the same ``Family`` list (``app.sim.families``): ``TextWriter``
(line prefixes computed once; cheap enough for a thousand replicas) and ``SimCollector``
(a prometheus_client collector, so ``generate_latest`` on a fresh ``CollectorRegistry``
prints the same bytes; a test holds them to that).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.metrics_core import Metric
from prometheus_client.utils import floatToGoString as _float_to_go

from app.sim.families import replica_families
from app.sim.family_parts import Child, Family
from app.sim.metrics import Hist

__all__ = ["CONTENT_TYPE", "SimCollector", "TextWriter", "fmt_float", "replica_families"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Go-style float text, exactly as prometheus_client prints sample values and `le`.
fmt_float: Callable[[float], str] = _float_to_go


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _labels(labels: dict[str, str]) -> str:
    return ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))


def _help(name: str, text: str) -> str:
    escaped = text.replace("\\", r"\\").replace("\n", r"\n")
    return f"# HELP {name} {escaped}\n"


class TextWriter:
    """Renders ``families`` with line prefixes computed once."""

    def __init__(self, fams: list[Family], created_ts: float) -> None:
        self.created = fmt_float(created_ts)
        self.plan: list[tuple[Family, str, list[tuple[Child, list[str]]], str]] = []
        for fam in fams:
            exposed = fam.name + "_total" if fam.kind == "counter" else fam.name
            head = _help(exposed, fam.help) + f"# TYPE {exposed} {fam.kind}\n"
            created_head = (
                _help(fam.name + "_created", fam.help) + f"# TYPE {fam.name}_created gauge\n"
            )
            kids = []
            for child in fam.children:
                lab = _labels(child.labels)
                if fam.kind == "histogram":
                    h = child.value()
                    assert isinstance(h, Hist)
                    les = [fmt_float(b) for b in h.bounds] + ["+Inf"]
                    prefixes = [
                        f"{fam.name}_bucket{{{_labels({**child.labels, 'le': le})}}} " for le in les
                    ]
                    prefixes += [f"{fam.name}_count{{{lab}}} ", f"{fam.name}_sum{{{lab}}} "]
                else:
                    prefixes = [f"{exposed}{{{lab}}} "]
                prefixes.append(f"{fam.name}_created{{{lab}}} ")
                kids.append((child, prefixes))
            self.plan.append((fam, head, kids, created_head))

    def render(self) -> bytes:
        out: list[str] = []
        fmt = fmt_float
        for fam, head, kids, created_head in self.plan:
            out.append(head)
            created: list[str] = []
            for child, prefixes in kids:
                if child.visible is not None and not child.visible():
                    continue
                v = child.value()
                if isinstance(v, Hist):
                    acc = 0
                    for prefix, c in zip(prefixes, v.counts, strict=False):
                        acc += c
                        out.append(f"{prefix}{fmt(acc)}\n")
                    out.append(f"{prefixes[-3]}{fmt(v.count)}\n")
                    out.append(f"{prefixes[-2]}{fmt(v.sum)}\n")
                else:
                    out.append(f"{prefixes[0]}{fmt(v)}\n")
                if fam.created:
                    created.append(f"{prefixes[-1]}{self.created}\n")
            if created:
                out.append(created_head)
                out.extend(created)
        return "".join(out).encode("utf-8")


class SimCollector:
    """A prometheus_client collector over the same families (reference renderer)."""

    def __init__(self, fams: list[Family], created_ts: float) -> None:
        self.fams = fams
        self.created_ts = created_ts

    def collect(self) -> Iterator[Metric]:
        for fam in self.fams:
            metric = Metric(fam.name, fam.help, fam.kind)
            add: Callable[[str, dict[str, str], float], None] = metric.add_sample
            for child in fam.children:
                if child.visible is not None and not child.visible():
                    continue
                v = child.value()
                if isinstance(v, Hist):
                    acc = 0
                    for b, c in zip([*v.bounds, float("inf")], v.counts, strict=True):
                        acc += c
                        le = fmt_float(b)
                        add(fam.name + "_bucket", {**child.labels, "le": le}, acc)
                    add(fam.name + "_count", child.labels, v.count)
                    add(fam.name + "_sum", child.labels, v.sum)
                elif fam.kind == "counter":
                    add(fam.name + "_total", child.labels, v)
                else:
                    add(fam.name, child.labels, v)
                if fam.created:
                    add(fam.name + "_created", child.labels, self.created_ts)
            yield metric
