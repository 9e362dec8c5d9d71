"""The incident model on a real vLLM pushed past its knee (tests/data/vllm_real/knee.tar.gz).

The recording (tests/vllm_real/record_knee.sh) holds a phased open-loop load: below the
server's probed capacity, then a surge above it (the queue grows the whole time), then
back below it (the queue drains). This reads the recording **cut at the surge's end** —
the pages up to that moment only, what an on-call engineer has when the traffic falls —
as ``phasewatch whatif`` does (30-second tiles, ``app.twin.incident``), asks the fluid
model for the change that then happened (traffic × post-surge rate ÷ surge rate, one
replica), and compares with what the server did, from the rest of the recording:

* **λ** — the requests the load generator sent over the tiles λ was fitted on
  (``load.jsonl``'s ``send``), per second;
* **μ** — the requests that ended (``send + total``, outcome ok) over the tiles μ was fitted
  on (those with a queue from their start: the engine saturated), per second;
* **drain** — from the surge's end to the first page whose ``num_requests_waiting`` is
  0 (the pages are 5 s apart: ±5 s);
* **under SLO** — from the surge's end to the start of the first 10-second bucket of
  arrivals from which every bucket's client TTFT p99 is under the SLO (all but 5 % of the
  later ones), the definition ``bench/incident.py`` judges the simulator by
  (``app.sim.scale_out.under_slo``); and, less strict, the start of the first bucket
  under the SLO (``under_slo_first``): on a shared host one stall after the drain (a
  bucket of 3 s) moves the strict reading by tens of seconds.

And why it is off where it is: the completion rate the server kept **while draining**
(requests ended from the surge's end to the drain, per second) and the engine's speed in
both stretches (``vllm:generation_tokens_total`` per second on the pages), with the drain
the fluid model gives from that drained μ (``B / (μ_drain − λ·k)``): a host whose speed
moves between the surge and the drain moves μ, which the surge's pages cannot show.

Reproduce: ``.venv/bin/python bench/knee.py tests/data/vllm_real/knee.tar.gz``
(``--json`` for one JSON object). The same cut read by the CLI:
``phasewatch whatif CUT --set rate_scale=K --json`` (the command is printed).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.read.whatif import from_scrapes  # noqa: E402
from app.sim.scale_out import under_slo  # noqa: E402
from app.sources.recording import read_scrapes  # noqa: E402
from app.twin.incident import QUEUED, RECENT_TILES, Drain, Incident, incident_of  # noqa: E402

if TYPE_CHECKING:
    from app.sim.scheduler import Request

SLO_TTFT = 2.0
_WAITING = re.compile(r"^vllm:num_requests_waiting(?:\{[^}]*\})?\s+(\S+)", re.M)


@dataclass(frozen=True)
class Knee:
    """The model's answer at the surge's end and what the server did next."""

    surge_start: float  # Unix s
    surge_end: float
    surge_rate: float  # scheduled, req/s
    post_rate: float
    cut_at: float  # the last page read (≤ surge_end)
    incident: Incident
    rate_scale: float  # post-surge rate ÷ surge rate (the change that happened)
    predicted: Drain | None
    lam_window: tuple[float, float]
    lam_measured: float
    mu_window: tuple[float, float]
    mu_measured: float
    backlog_measured: float  # waiting on the last page read
    drain_measured: float | None  # s from surge_end; None: never within the recording
    under_slo_measured: float | None
    under_slo_first: float | None  # the first 10 s bucket of arrivals under the SLO
    mu_drain_measured: float | None  # requests ended per s from surge_end to the drain
    tokens_surge: float  # generation tokens per s over μ's tiles (pages)
    tokens_drain: float | None  # … from the surge's end to the drain

    def drain_at_drain_mu(self) -> float | None:
        """The fluid model's drain with the μ the server kept while draining."""
        if self.mu_drain_measured is None:
            return None
        net = self.mu_drain_measured - self.post_rate
        return None if net <= 0 else self.backlog_measured / net

    def to_dict(self) -> dict[str, Any]:
        inc = self.incident.to_dict()
        return {
            "surge": [round(self.surge_start, 3), round(self.surge_end, 3)],
            "surge_rate": self.surge_rate,
            "post_rate": self.post_rate,
            "cut_at": self.cut_at,
            "rate_scale": round(self.rate_scale, 4),
            "incident": inc,
            "lambda_measured": round(self.lam_measured, 3),
            "lambda_window": [round(v, 3) for v in self.lam_window],
            "mu_measured": round(self.mu_measured, 3),
            "mu_window": [round(v, 3) for v in self.mu_window],
            "backlog_measured": self.backlog_measured,
            "predicted": None if self.predicted is None else self.predicted.to_dict(),
            "drain_measured_s": self.drain_measured,
            "under_slo_measured_s": self.under_slo_measured,
            "under_slo_first_s": self.under_slo_first,
            "mu_drain_measured": _r(self.mu_drain_measured),
            "generation_tokens_per_s": {
                "surge": round(self.tokens_surge, 1),
                "drain": _r(self.tokens_drain),
            },
            "drain_at_drain_mu_s": _r(self.drain_at_drain_mu()),
        }


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


_GEN = re.compile(r"^vllm:generation_tokens_total(?:\{[^}]*\})?\s+(\S+)", re.M)


def tokens_per_s(folder: Path, t0: float, t1: float) -> float | None:
    """Generation tokens per second between the pages nearest ``t0`` and ``t1``."""
    ps = pages(folder)
    if not ps:
        return None
    a = min(ps, key=lambda x: abs(x[0] - t0))
    b = min(ps, key=lambda x: abs(x[0] - t1))
    if b[0] <= a[0]:
        return None
    n0 = sum(float(v) for v in _GEN.findall(a[1].read_text()))
    n1 = sum(float(v) for v in _GEN.findall(b[1].read_text()))
    return (n1 - n0) / (b[0] - a[0])


def phases_of(meta: dict[str, Any]) -> list[tuple[float, float, float]]:
    """(start, end, rate) of the load's phases, Unix s."""
    out, t = [], float(meta["start"])
    for seconds, rate in meta["load"]["phases"]:
        out.append((t, t + float(seconds), float(rate)))
        t += float(seconds)
    return out


def pages(folder: Path) -> list[tuple[float, Path]]:
    return sorted((float(p.name[: -len(".prom")]), p) for p in folder.glob("*.prom"))


def waiting_of(page: Path) -> float:
    return sum(float(v) for v in _WAITING.findall(page.read_text()))


def cut(folder: Path, until: float, dest: Path) -> Path:
    """A copy of the recording with its pages up to ``until`` (Unix s) only."""
    dest.mkdir(parents=True, exist_ok=True)
    for t, p in pages(folder):
        if t <= until:
            shutil.copy2(p, dest / p.name)
    return dest


def records(folder: Path) -> list[dict[str, Any]]:
    with (folder / "load.jsonl").open() as f:
        return [json.loads(line) for line in f if line.strip()]


def analyse(folder: Path, slo_ttft: float = SLO_TTFT) -> Knee:
    """The model at the surge's end (the recording cut there) against what happened."""
    meta = json.loads((folder / "meta.json").read_text())
    ph = phases_of(meta)
    surge = max(range(len(ph)), key=lambda i: ph[i][2])
    s0, s1, surge_rate = ph[surge]
    post_rate = ph[surge + 1][2]
    with tempfile.TemporaryDirectory() as tmp:
        part = cut(folder, s1, Path(tmp) / "cut")
        span = from_scrapes(read_scrapes(part))
    cut_at = max(t for t, _ in pages(folder) if t <= s1)
    inc = incident_of(span.tiles, slo_ttft, span.whole)
    k = post_rate / surge_rate
    pred = inc.drain(1, k) if inc.growing else None
    tiles = [w for w in span.tiles if w.covered > 0]
    stretch = [w for w in tiles if inc.since is not None and w.start >= inc.since]
    recent = stretch[-RECENT_TILES:] or tiles[-1:]
    full = [w for w in recent if (w.gauges["waiting"].first or 0.0) >= QUEUED]
    full = full if len(full) >= 2 else recent
    lam_w = (recent[0].start, recent[-1].end)
    mu_w = (full[0].start, full[-1].end)
    recs = records(folder)
    sent = [r for r in recs if r["outcome"] != "dropped"]
    lam = sum(lam_w[0] <= r["send"] < lam_w[1] for r in sent) / (lam_w[1] - lam_w[0])
    done = [r["send"] + r["total"] for r in recs if r["outcome"] == "ok"]
    mu = sum(mu_w[0] <= e < mu_w[1] for e in done) / (mu_w[1] - mu_w[0])
    later = [(t, waiting_of(p)) for t, p in pages(folder) if t >= s1]
    drained = next((t - s1 for t, w in later if w < 1.0), None)
    # under_slo reads only a request's arrival and first_token
    after = cast(
        "list[Request]",
        [
            SimpleNamespace(
                arrival=r["send"],
                first_token=None if r.get("ttft") is None else r["send"] + r["ttft"],
            )
            for r in sent
            if r["send"] >= s1
        ],
    )
    under = under_slo(after, s1, slo_ttft)
    first = next(
        (
            t
            for t in range(0, int(max((a.arrival for a in after), default=s1) - s1) + 1, 10)
            if under_slo(
                [a for a in after if s1 + t <= a.arrival < s1 + t + 10],
                s1 + t,
                slo_ttft,
            )
            == 0.0
        ),
        None,
    )
    backlog = waiting_of(dict(pages(folder))[cut_at])
    mu_drain = tok_drain = None
    if drained is not None and drained > 0:
        mu_drain = sum(s1 <= e < s1 + drained for e in done) / drained
        tok_drain = tokens_per_s(folder, s1, s1 + drained)
    tok_surge = tokens_per_s(folder, mu_w[0], mu_w[1]) or 0.0
    return Knee(
        s0, s1, surge_rate, post_rate, cut_at, inc, k, pred, lam_w, lam, mu_w, mu,
        backlog, drained, under, None if first is None else float(first), mu_drain, tok_surge,
        tok_drain,
    )  # fmt: skip


def _s(v: float | None) -> str:
    return "never" if v is None else f"{v:.0f} s"


def _err(pred: float | None, meas: float | None) -> str:
    if pred is None or meas is None:
        return "n/a"
    return f"{(pred - meas) / meas:+.0%}"


def report(k: Knee, source: str) -> str:
    inc = k.incident
    lines = [
        f"{source}: surge {k.surge_rate:g} req/s for {k.surge_end - k.surge_start:.0f} s, "
        f"then {k.post_rate:g} req/s; cut at the surge's end ({k.surge_end - k.cut_at:.1f} s "
        f"after the last page read)",
        f"regime: {inc.regime} ({inc.why})",
    ]
    lam, mu, p = inc.arrival_rate, inc.completion_rate, k.predicted
    if lam is None or mu is None or p is None:
        return "\n".join(lines)

    def within(v: float, lo: float, hi: float) -> str:
        return "within" if lo <= v <= hi else "OUTSIDE"

    lines += [
        f"λ fitted {lam.mid:.2f} ({lam.low:.2f}–{lam.high:.2f}) req/s; sent {k.lam_measured:.2f}"
        f" ({_err(lam.mid, k.lam_measured)}, {within(k.lam_measured, lam.low, lam.high)})",
        f"μ fitted {mu.mid:.2f} ({mu.low:.2f}–{mu.high:.2f}) req/s; completed "
        f"{k.mu_measured:.2f} ({_err(mu.mid, k.mu_measured)}, "
        f"{within(k.mu_measured, mu.low, mu.high)})",
        f"backlog {inc.backlog:.0f}; change: rate_scale={k.rate_scale:.4g} "
        f"(λ × k = {lam.mid * k.rate_scale:.2f} req/s against {k.post_rate:g} scheduled)",
    ]
    lines += [
        f"drain: predicted {_s(p.drain_s)} ({_s(p.drain_range[0])}–{_s(p.drain_range[1])}); "
        f"measured {_s(k.drain_measured)} (±5 s, pages) → {_err(p.drain_s, k.drain_measured)}",
        f"TTFT p99 under {inc.slo_ttft:g} s: predicted {_s(p.under_slo_after_s)} "
        f"({_s(p.under_slo_range[0])}–{_s(p.under_slo_range[1])}); measured "
        f"{_s(k.under_slo_measured)} (10 s buckets) → "
        f"{_err(p.under_slo_after_s, k.under_slo_measured)}; the first bucket under it: "
        f"{_s(k.under_slo_first)} → {_err(p.under_slo_after_s, k.under_slo_first)}",
        f"while draining: completions {k.mu_drain_measured or 0:.2f} req/s (μ fitted on the "
        f"surge {mu.mid:.2f}); generation tokens {k.tokens_drain or 0:.0f}/s against "
        f"{k.tokens_surge:.0f}/s on μ's tiles; the fluid model at the drain's own μ: "
        f"{_s(k.drain_at_drain_mu())}",
    ]
    return "\n".join(lines)


def open_recording(path: Path, tmp: Path) -> Path:
    if path.is_dir():
        return path
    with tarfile.open(path) as tar:
        tar.extractall(tmp, filter="data")
    return next(p for p in tmp.iterdir() if p.is_dir())


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("recording", type=Path, help="a recording folder or its .tar.gz")
    ap.add_argument("--slo-ttft-p99", type=float, default=SLO_TTFT)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = open_recording(args.recording, Path(tmp))
        k = analyse(folder, args.slo_ttft_p99)
    if args.json:
        print(json.dumps(k.to_dict(), indent=2))
    else:
        print(report(k, args.recording.name))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
