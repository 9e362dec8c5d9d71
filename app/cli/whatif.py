"""``phasewatch whatif SOURCE --set KEY=VALUE …``: what a change would do to a server's p99.

SOURCE is a recording folder (the replay format), a live ``/metrics`` URL (watched for
``--duration``), or nothing with ``--target NAME --start T --end T``: the target's history
read from the store, or from Prometheus when the config's ``source.kind`` is
``prometheus``. The twin (``app.twin``; ``docs/whatif.md``) is fitted on the span,
replays it, then replays it with the changes: the text says the measured, replayed and
predicted figures with the prediction's interval, what was fitted and where from, and
what the data could not pin down; ``--json`` prints the same as one object.

Exit status: 0 with a prediction; 1 when the span cannot give a twin (no finished
request, no inter-token gap, too short); 2 on bad input (an unknown key, a bad value, a
source that cannot be read).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from app.cli.config import load_config
from app.cli.diagnose import add_diagnosis_options, config_from, fail
from app.config import ConfigError, Settings
from app.diagnose.kv import ModelShape, dtype_bytes
from app.diagnose.roofline import estimate_params
from app.diagnose.server import ServerSettings, device_memory_gb, resolve
from app.model import Quantile
from app.read.whatif import TILE_S, from_prometheus, from_scrapes, from_store
from app.sources.recording import read_scrapes
from app.sources.watch import observe
from app.twin.drain import drain_of
from app.twin.fit import FitError, Span, Twin, fit
from app.twin.headroom import headroom
from app.twin.incident import ROUTING, Drain, Incident, incident_of
from app.twin.whatif import (
    CHANGES,
    SEEDS,
    ChangeError,
    WhatIf,
    calibrate,
    knobs_for,
    parse_change,
    predict_from,
)


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "whatif",
        help="predict what changing a setting or the traffic does to a server's p50/p99",
        description=(
            "Fit a twin of one server from its own metrics (workload, step time, engine "
            "settings), replay the span it was fitted on, then predict the span with the "
            "changes. KEYs for --set: " + "; ".join(f"{k}: {v[1]}" for k, v in CHANGES.items())
        ),
    )
    p.add_argument(
        "source",
        nargs="?",
        metavar="SOURCE",
        help="a recording folder or a live /metrics URL (or --target with --start/--end)",
    )
    p.add_argument(
        "--set",
        dest="changes",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a change to predict (repeatable; none: only the replay of the fitted span)",
    )
    p.add_argument("--model", help="the model_name to fit when SOURCE serves several")
    p.add_argument("--target", help="a configured target: its history from the store or Prometheus")
    p.add_argument("--start", help="with --target: Unix seconds, RFC 3339, or now-2h")
    p.add_argument("--end", default="now", help="with --target: as --start (default now)")
    p.add_argument(
        "--duration", type=float, default=300.0, help="a URL: seconds to watch (default 300)"
    )
    p.add_argument("--interval", type=float, default=5.0, help="a URL: seconds between scrapes")
    p.add_argument("--tile", type=float, default=TILE_S, help="arrival timeline step, s (30)")
    p.add_argument("--seeds", type=int, default=SEEDS, help="runs per setting (default 5)")
    p.add_argument(
        "--headroom",
        action="store_true",
        help="also the largest traffic × k that keeps TTFT p99 and ITL p99 within the SLO "
        "(--slo-ttft-p99, --slo-itl-p99, the config's slo), and what breaks first",
    )
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    add_diagnosis_options(p)
    p.set_defaults(func=run)


def _progress(args: argparse.Namespace, text: str) -> None:
    if not args.quiet and not args.json:
        print(text, file=sys.stderr, flush=True)


def _settings(args: argparse.Namespace) -> Settings:
    settings: Settings = load_config(args.config)
    return settings


def _server_for(settings: Settings, target: str | None, flags: ServerSettings) -> ServerSettings:
    base = ServerSettings()
    for t in settings.targets:
        if t.name == target and t.server is not None:
            base = ServerSettings(**t.server.model_dump())
    return base.merged(flags)


def _span(args: argparse.Namespace, settings: Settings, flags: ServerSettings) -> Span:
    if args.target and args.source:
        raise ValueError("give SOURCE or --target with --start/--end, not both")
    if args.target:
        from app.read.review.run import parse_time

        if not args.start:
            raise ValueError("--target needs --start (and --end, default now)")
        now = time.time()
        start, end = parse_time(args.start, now), parse_time(args.end, now)
        if not end > start:
            raise ValueError("--end must be after --start")
        server = _server_for(settings, args.target, flags)
        if settings.source.kind == "prometheus":
            from app.sources.prometheus import PrometheusSource

            source = PrometheusSource(settings.source)

            async def read() -> Span:
                try:
                    return await from_prometheus(
                        source,
                        args.target,
                        start=start,
                        end=end,
                        model=args.model,
                        server=server,
                        tile=args.tile,
                    )
                finally:
                    await source.aclose()

            return asyncio.run(read())
        from app.store.sqlite import Store

        path = Path(settings.storage.path)
        if not path.exists():
            raise ValueError(f"no store at {path} (storage.path)")
        store = Store(path)
        try:
            return from_store(
                store,
                args.target,
                start=start,
                end=end,
                model=args.model,
                server=server,
                tile=args.tile,
            )
        finally:
            store.close()
    if not args.source:
        raise ValueError("give SOURCE (a recording folder or a /metrics URL) or --target")
    if args.source.startswith(("http://", "https://")):
        _progress(args, f"watching {args.source} for {args.duration:g} s …")
        scrapes = asyncio.run(observe(args.source, duration=args.duration, interval=args.interval))
    else:
        folder = Path(args.source)
        if not folder.is_dir():
            raise ValueError(f"{folder} is not a recording folder")
        scrapes = read_scrapes(folder)
    server = _server_for(settings, scrapes.target, flags)
    return from_scrapes(scrapes, model=args.model, server=server, tile=args.tile)


def run(args: argparse.Namespace) -> int:
    try:
        changes: dict[str, float | int] = dict(parse_change(c) for c in args.changes)
        config = config_from(args)
        settings = _settings(args)
        if args.seeds < 1 or args.seeds > 20:
            raise ValueError("--seeds must be 1 to 20")
        if not args.tile > 0:
            raise ValueError("--tile must be positive")
    except (ChangeError, ConfigError, OSError, ValueError) as exc:
        return fail(exc)
    try:
        span = _span(args, settings, config.server)
    except FitError as exc:
        return _cannot(args, exc)
    except (ConfigError, OSError, ValueError, RuntimeError) as exc:
        return fail(exc)
    try:
        twin = fit(span)
    except FitError as exc:
        return _cannot(args, exc)
    view = resolve(span.server, span.info)
    gmu = view.gpu_memory_utilization.value
    try:
        memory_gb = view.memory_gb if view.memory_gb is not None else device_memory_gb(args.gpu)
        knobs, notes = knobs_for(twin, changes, memory_gb, gmu, weight_memory_gb(args))
    except (ChangeError, ValueError) as exc:
        return fail(exc)
    _progress(args, f"fitted on {twin.duration:.0f} s; replaying and predicting …")
    cal = calibrate(twin, span.whole, seeds=args.seeds)
    result = predict_from(cal, changes, knobs, notes=notes)
    slo = config.slo_for(span.whole.target, span.whole.model_name)
    incident = incident_of(span.tiles, slo.ttft_p99, span.whole)
    drain = None
    if incident.growing:
        _progress(args, "the queue grows: pricing the change's capacity …")
        try:
            drain = drain_of(incident, changes, cal, knobs)
        except ValueError as exc:
            return fail(exc)
    room = None
    if args.headroom:
        _progress(args, "searching the headroom …")
        room = headroom(cal, slo.ttft_p99, slo.itl_p99, incident)
    if args.json:
        out = {"target": span.whole.target, "model_name": span.whole.model_name, **result.to_dict()}
        out.update(regime_fields(result, incident, drain))
        if room is not None:
            out["headroom"] = room.to_dict()
        print(json.dumps(out, indent=2))
    else:
        print(render(result, span, incident, drain))
        if room is not None:
            print(f"\nheadroom: {room.text()}")
    return 0


def weight_memory_gb(args: argparse.Namespace) -> float | None:
    """The weights' size in the device's memory, GB, from the roofline group's flags:
    ``--weight-bytes``, else ``--params`` × ``--dtype`` (16 bit by default), else a
    ``--model-config``'s parameters (all of a mixture's experts: every one is stored).
    No ``--gpu`` is needed for it (the memory is ``--server device=…``'s)."""
    if args.weight_bytes is not None:
        return float(args.weight_bytes) / 1e9
    dtype = args.dtype or "bfloat16"
    if args.params is not None:
        return float(args.params) * dtype_bytes(dtype) / 1e9
    if args.model_config is not None:
        shape = ModelShape.from_config(json.loads(args.model_config.read_text()))
        total, _ = estimate_params(shape)
        return total * dtype_bytes(args.dtype or shape.dtype or "bfloat16") / 1e9
    return None


def regime_fields(w: WhatIf, incident: Incident, drain: Drain | None) -> dict[str, Any]:
    """``regime``, and for a growing span ``incident`` and the fluid answer in
    ``predicted``: a change that drains the queue keeps the twin's p99s (the steady state
    once the backlog is gone), one that does not has none (a growing queue has no steady
    p99)."""
    out: dict[str, Any] = {"regime": incident.regime, "regime_why": incident.why}
    if not incident.growing or drain is None:
        return out
    d = drain.to_dict()
    out["incident"] = incident.to_dict()
    predicted = w.predicted.to_dict()
    if drain.drain_s is None:
        predicted.update({k: None for k in FIGURE_KEYS})
        out["effect"] = {k: None for k in FIGURE_KEYS}
        out["interval"] = {k: None for k in FIGURE_KEYS}
    out["predicted"] = {
        **predicted,
        "drain_s": d["drain_s"],
        "under_slo_after_s": d["under_slo_after_s"],
        "still_grows_by": d["still_grows_by"],
        "drain": d,
    }
    return out


FIGURE_KEYS = ("ttft_p50", "ttft_p99", "itl_p50", "itl_p99")


def _cannot(args: argparse.Namespace, exc: Exception) -> int:
    if args.json:
        print(json.dumps({"error": str(exc)}, indent=2))
    else:
        print(f"phasewatch: cannot fit a twin: {exc}", file=sys.stderr)
    return 1


def _q(q: Quantile | float | None, unit: str) -> str:
    if isinstance(q, Quantile):
        if q.value is None:
            return "n/a"
        return ("≥" if q.ge_top_bucket else "") + _q(q.value, unit)
    if q is None:
        return "n/a"
    if unit == "s":
        return f"{q * 1000:.0f} ms" if q < 1 else f"{q:.2f} s"
    if unit == "%":
        return f"{q:.0%}"
    return f"{q:.3g}"


ROWS = (
    ("TTFT p50", "ttft_p50", "s"),
    ("TTFT p99", "ttft_p99", "s"),
    ("ITL p50", "itl_p50", "s"),
    ("ITL p99", "itl_p99", "s"),
    ("waiting (avg)", "waiting_avg", ""),
    ("KV usage (max)", "kv_usage_max", "%"),
    ("preemptions/s", "preemptions_per_s", ""),
)


def render(
    w: WhatIf, span: Span, incident: Incident | None = None, drain: Drain | None = None
) -> str:
    """The text report: the incident's answer where the queue grows, the figures side by
    side (each prediction with its replay error), the fit in a few lines, the warnings."""
    t = w.twin
    what = ", ".join(f"{k}={v}" for k, v in w.changes.items()) or "nothing (the replay only)"
    lines = [
        f"what if {what} — {span.whole.target} / {span.whole.model_name or '(no model)'}, "
        f"fitted on {t.duration:.0f} s",
        "",
    ]
    growing = incident is not None and incident.growing
    if incident is not None and growing:
        lines += [*incident_lines(incident, drain, what), ""]
    steady = not growing or (drain is not None and drain.drain_s is not None)
    lines.append(
        f"{'':<16}{'measured':>12}{'replayed':>12}"
        + (f"{'predicted':>12}   interval (replay error)" if steady else "")
    )
    for label, name, unit in ROWS:
        row = f"{label:<16}{_q(getattr(w.baseline, name), unit):>12}"
        row += f"{_q(getattr(w.replay, name), unit):>12}"
        if steady:
            iv = w.interval.get(name)
            band = "" if iv is None else f"{_q(iv[0], unit)} – {_q(iv[1], unit)}"
            err = w.replay_errors.get(name)
            band += "" if err is None else f" ({err:.0%})"
            row += f"{_q(getattr(w.predicted, name), unit):>12}   {band}"
        lines.append(row.rstrip())
    if w.unreliable is not None and steady:
        lines.append(f"unreliable prediction: {w.unreliable}")
    lines += ["", *fit_lines(t, w)]
    warnings = [*t.warnings, *w.notes]
    if warnings:
        lines += ["", "warnings:", *(f"  - {x}" for x in warnings)]
    return "\n".join(lines)


def incident_lines(incident: Incident, drain: Drain | None, what: str) -> list[str]:
    """The growing span's answer in its own terms (``app.twin.incident``)."""
    lam, mu = incident.arrival_rate, incident.completion_rate
    assert lam is not None and mu is not None
    good, bad = incident.replicas_range
    need = incident.replicas_needed
    lines = [
        f"regime: growing — {incident.why}",
        f"arrivals {lam.mid:.3g}/s ({lam.low:.3g}–{lam.high:.3g}), completions "
        f"{mu.mid:.3g}/s per replica ({mu.low:.3g}–{mu.high:.3g}), {incident.backlog:.0f} "
        f"queued, {incident.running:.0f} running",
        "replicas needed to end the growth: "
        + ("more than 64" if need is None else str(need))
        + ("" if good == bad else f" ({good}–{bad} at the intervals' ends)"),
    ]
    if drain is not None:
        lines.append(f"with {what}: {drain.text(incident.backlog, incident.slo_ttft)}")
    lines += [
        f"routing assumed: {ROUTING}",
        (
            "predicted: the steady state once the backlog has drained"
            if drain is not None and drain.drain_s is not None
            else "no predicted p99: the queue keeps growing, it has no steady p99"
        ),
    ]
    return lines


def fit_lines(t: Twin, w: WhatIf) -> list[str]:
    s = t.step
    e = t.engine
    err = w.replay_error
    return [
        f"workload: {t.rate_mean:.3g} req/s (burstiness {t.burstiness:.2f} over "
        f"{len(t.rates)} windows), prompts mean {t.prompt.mean:,.0f} tokens "
        f"({t.prompt.shape()}), "
        f"answers mean {t.output.mean:,.0f} ({t.output.shape()}), prefix-cache hits "
        f"{t.prefix_hit_rate:.0%}",
        f"engine: max_num_seqs {e.max_num_seqs}, max_num_batched_tokens "
        f"{e.max_num_batched_tokens:,}, KV pool {e.num_gpu_blocks:,} blocks of {e.block_size}"
        + ("" if e.max_num_queued_reqs is None else f", queue cap {e.max_num_queued_reqs}"),
        "step time: max("
        + (f"{s.compute_base * 1000:.3g} ms + " if s.compute_base > 0 else "")
        + f"{s.per_token * 1e6:.3g} µs × new tokens, {s.base * 1000:.3g} ms + "
        f"{s.per_context * 1e9:.3g} ns × cached tokens) + {s.per_seq * 1e6:.3g} µs × sequences "
        f"(fit error {t.step_residual:.0%}; calibrated ×{w.step_scale:.2f} on the replay)",
        _speed_line(t),
        "replay error: "
        + ("n/a" if err is None else f"{err:.0%}")
        + " (median of TTFT and ITL p50/p99, replay against measured)",
    ]


def _speed_line(t: Twin) -> str:
    if not t.speed:
        return "server speed: steady (fewer than two windows to compare)"
    ks = [k for _, k in t.speed]
    return (
        f"server speed: ×{min(ks):.2f}–×{max(ks):.2f} of its mean over {len(ks)} windows "
        "(each window's inter-token gap ÷ the step time's; replayed as a timeline)"
    )
