"""``phasewatch sim``: serve a simulated vLLM fleet, or write a recording.

Serve:  phasewatch sim --scenario healthy [--port 8000] [--replicas N] [--vllm-version 0.33]
        phasewatch sim --scenario queue_overload --engine sglang  (SGLang's pages: docs/sglang.md)
        phasewatch sim --scenario healthy --replicas 4 --engine mixed   (vLLM and SGLang)
        phasewatch sim --scenario healthy --replicas 3 --replica-set 2:workload.rate_multiplier=3
        phasewatch sim --scenario pd_slow_transfer     (a P/D fleet: docs/pd-fleets.md)
Record: phasewatch sim --scenario incident --record DIR [--duration 900] [--seed 1]
List:   phasewatch sim --list

Exit codes: 0 done, 2 bad input (unknown scenario or preset, impossible parameters).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from typing import Any

import yaml

from app.sim.errors import SimConfigError
from app.sim.metrics import VERSIONS
from app.sim.model import nearest_preset


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "sim",
        help="run the vLLM simulator",
        description="Simulate vLLM replicas: serve live /metrics or write a recording "
        "(exposition pages every 5 s plus truth.jsonl). See docs/simulator.md.",
    )
    p.add_argument("--scenario", help="scenario name (see --list) or a path to a YAML file")
    p.add_argument("--list", action="store_true", help="list the shipped scenarios and exit")
    p.add_argument("--port", type=int, default=8000, help="port to serve on (0: any free port)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the workload")
    p.add_argument(
        "--replicas", type=int, default=1, help="replicas served as /replica/{i}/metrics"
    )
    p.add_argument(
        "--engines",
        type=int,
        metavar="K",
        help="simulate K engines; replica i shows engine i mod K (default: one per replica)",
    )
    p.add_argument(
        "--model-per-replica",
        action="store_true",
        help="name the model {served name}-{i} on replica i (distinct label values per page)",
    )
    p.add_argument(
        "--vllm-version",
        choices=VERSIONS,
        default="0.33",
        help="metric names to print: 0.33 (V1), 0.10 (V1 + deprecated twins), 0.6 (V0)",
    )
    p.add_argument(
        "--engine",
        choices=("vllm", "sglang", "mixed"),
        default="vllm",
        help="whose pages to print: vLLM's (--vllm-version), SGLang's, or mixed (served "
        "replicas alternate: even ones vLLM, odd ones SGLang)",
    )
    p.add_argument("--speed", type=float, default=1.0, help="sim seconds per wall second (live)")
    p.add_argument(
        "--page-tick",
        type=float,
        default=0.0,
        metavar="S",
        help="serve an engine's page again for S sim seconds (a cheap load generator)",
    )
    p.add_argument("--record", metavar="DIR", help="write a recording to DIR instead of serving")
    p.add_argument("--duration", type=float, help="recording length in sim seconds")
    p.add_argument("--start", type=float, help="Unix time of the first page (default 1764403200)")
    g = p.add_argument_group("overrides (apply to the scenario's base; phases still apply)")
    g.add_argument("--device", help="cpu, a10g, l40s, rtx4090, a100-80gb, h100-sxm")
    g.add_argument("--model", help="model preset, e.g. llama-3.1-8b, llama-3.1-70b")
    g.add_argument(
        "--model-params",
        type=float,
        metavar="B",
        help="model size in billions (architecture of the nearest preset)",
    )
    g.add_argument("--weight-bits", type=int, choices=(4, 8, 16), help="bits per weight")
    g.add_argument("--rate", type=float, help="arrival rate, requests/s")
    g.add_argument("--load", type=float, help="arrival rate relative to estimated capacity")
    g.add_argument("--max-num-seqs", type=int, help="vLLM's --max-num-seqs")
    g.add_argument("--max-num-batched-tokens", type=int, help="vLLM's --max-num-batched-tokens")
    g.add_argument("--gpu-memory-utilization", type=float, help="vLLM's --gpu-memory-utilization")
    g.add_argument("--max-model-len", type=int, help="vLLM's --max-model-len")
    g.add_argument("--no-prefix-caching", action="store_true", help="turn prefix caching off")
    g.add_argument("--served-model-name", help="the model_name label the pages carry")
    g.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any scenario setting, e.g. engine.block_size=32 (repeatable)",
    )
    g.add_argument(
        "--replica-set",
        action="append",
        default=[],
        metavar="I:KEY=VALUE",
        help="a setting for replica I only, on top of the others, e.g. "
        "2:workload.rate_multiplier=3 makes replica 2 the overloaded one (repeatable)",
    )
    p.set_defaults(func=_run)


def overrides_from(args: argparse.Namespace) -> dict[str, Any]:
    """CLI flags as dotted scenario overrides."""
    out: dict[str, Any] = {}
    if args.device:
        out["device"] = {"preset": args.device}
    if args.model:
        out["model.preset"] = args.model
    if args.model_params is not None:
        if args.model_params <= 0:
            raise SimConfigError(f"--model-params must be positive, got {args.model_params}")
        if not args.model:
            out["model.preset"] = nearest_preset(args.model_params)
        out["model.params_b"] = args.model_params
    if args.weight_bits is not None:
        out["model.weight_bits"] = args.weight_bits
    if args.rate is not None and args.load is not None:
        raise SimConfigError("give --rate or --load, not both")
    if args.rate is not None:
        out["workload.rate"] = args.rate
    if args.load is not None:
        out["workload.load"] = args.load
    for flag in (
        "max_num_seqs",
        "max_num_batched_tokens",
        "gpu_memory_utilization",
        "max_model_len",
        "served_model_name",
    ):
        value = getattr(args, flag)
        if value is not None:
            out[f"engine.{flag}"] = value
    if args.no_prefix_caching:
        out["engine.enable_prefix_caching"] = False
    for item in args.set:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise SimConfigError(f"--set expects KEY=VALUE, got {item!r}")
        out[key.strip()] = yaml.safe_load(raw)
    return out


def replica_overrides_from(args: argparse.Namespace) -> dict[int, dict[str, Any]]:
    """``--replica-set I:KEY=VALUE`` flags as dotted overrides per replica index."""
    out: dict[int, dict[str, Any]] = {}
    for item in args.replica_set:
        index, sep, setting = item.partition(":")
        key, eq, raw = setting.partition("=")
        if not sep or not eq or not key.strip() or not index.strip().isdigit():
            raise SimConfigError(f"--replica-set expects I:KEY=VALUE, got {item!r}")
        out.setdefault(int(index), {})[key.strip()] = yaml.safe_load(raw)
    return out


def _when(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 and seconds % 60 == 0 else f"{seconds:g} s"


def timeline_text(sc: Any) -> str | None:
    """What a scenario's phases do, from its own phase list (so ``sim --list`` and the demo,
    which moves the incident earlier, each say what they run): ``healthy; at 5 min spike
    (queue_bound); at 10 min recovery (healthy); repeats every 15 min``. None without
    phases."""
    if len(sc.phases) < 2:
        return None
    first = sc.phases[0]
    parts = [first.expect or first.name]
    for ph in sc.phases[1:]:
        parts.append(f"at {_when(ph.at_s)} {ph.name}" + (f" ({ph.expect})" if ph.expect else ""))
    if sc.loop_s:
        parts.append(f"repeats every {_when(sc.loop_s)}")
    return "; ".join(parts)


def _run(args: argparse.Namespace) -> int:
    from app.sim import scenario as scenarios

    if args.list:
        for name in scenarios.available():
            sc = scenarios.load(name)
            print(f"{name:22s} {sc.expect or '':14s} {sc.description}")
            timeline = timeline_text(sc)
            if timeline:
                print(f"{'':37s} phases: {timeline}")
        _list_pd()
        return 0
    if not args.scenario:
        return _fail("--scenario is required (or --list)")
    from app.sim.pd_scenario import is_pd

    if is_pd(args.scenario):
        if args.engine != "vllm":
            return _fail("a P/D scenario simulates vLLM's KV connector: drop --engine")
        return _run_pd(args)
    if args.engine == "mixed" and args.record:
        return _fail("--record writes one replica; --engine mixed needs served replicas")
    try:
        base = overrides_from(args)
        sc = scenarios.load(args.scenario, base)
        per_replica = replica_overrides_from(args)
        if args.record:
            if per_replica:
                return _fail("--replica-set needs several served replicas; drop --record")
            return _record(args, sc)
        for i in per_replica:
            if i >= args.replicas:
                return _fail(f"--replica-set {i}: there are only {args.replicas} replica(s)")
        own = {i: scenarios.load(args.scenario, {**base, **ov}) for i, ov in per_replica.items()}
        return _serve(args, sc, own)
    except SimConfigError as exc:
        return _fail(str(exc))


def _list_pd() -> None:
    """The P/D fleets: their pools and what each phase does."""
    from app.sim.pd_scenario import available_pd, load_pd

    for name in available_pd():
        pd = load_pd(name)
        pools = f"{pd.prefill_replicas}P{pd.decode_replicas}D"
        print(f"{name:22s} {pools + ' fleet':14s} {pd.description}")
        timeline = timeline_text(pd.fleet)
        if timeline:
            print(f"{'':37s} phases: {timeline}")


def _run_pd(args: argparse.Namespace) -> int:
    """A P/D fleet: recorded (one folder per replica) or served (``app.sim.pd_server``)."""
    from app.sim.pd_record import record_pd
    from app.sim.pd_scenario import load_pd
    from app.sim.pd_server import start_pd_server
    from app.sim.record import DEFAULT_EPOCH

    if args.replicas != 1 or args.replica_set or args.engines or args.model_per_replica:
        return _fail(
            "a P/D scenario sets its pools: --set pd.prefill.replicas=N, "
            "--set pd.decode.replicas=N (not --replicas, --replica-set, --engines)"
        )
    try:
        sc = load_pd(args.scenario, overrides_from(args))
    except SimConfigError as exc:
        return _fail(str(exc))
    if args.record:
        if args.duration is not None and args.duration <= 0:
            return _fail(f"--duration must be positive, got {args.duration}")
        start = DEFAULT_EPOCH if args.start is None else args.start
        try:
            out = record_pd(
                sc,
                args.record,
                args.duration,
                args.seed,
                version=args.vllm_version,
                start_unix=start,
            )
        except OSError as exc:
            return _fail(f"cannot write the recording to {args.record}: {exc}")
        print(f"wrote {out} ({sc.prefill_replicas}P{sc.decode_replicas}D: one folder per replica)")
        return 0
    if not 0 <= args.port <= 65535:
        return _fail(f"--port must be in 0..65535, got {args.port}")
    if args.speed <= 0:
        return _fail(f"--speed must be positive, got {args.speed}")
    try:
        server, thread, url = start_pd_server(
            sc, args.port, args.seed, version=args.vllm_version, host=args.host, speed=args.speed
        )
    except OSError as exc:
        return _fail(f"cannot listen on {args.host}:{args.port}: {exc}")
    print(f"listening on {url}", flush=True)
    for i, (name, role) in enumerate(server.live.names):
        print(f"{role:8s} {name:12s} {url}/replica/{i}/metrics", flush=True)
    print(f"router   {url}/v1/completions · fleet {url}/fleet", flush=True)
    try:
        thread.join()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        server.server_close()
    return 0


def _page(args: argparse.Namespace) -> str:
    """What the replicas' pages are: a vLLM version, "sglang" or "mixed"."""
    return args.vllm_version if args.engine == "vllm" else str(args.engine)


def _fail(message: str) -> int:
    print(f"phasewatch sim: error: {message}", file=sys.stderr)
    return 2


def _record(args: argparse.Namespace, sc: Any) -> int:
    from app.sim.record import DEFAULT_EPOCH, record

    if args.replicas != 1:
        return _fail("--record writes one replica; drop --replicas")
    if args.duration is not None and args.duration <= 0:
        return _fail(f"--duration must be positive, got {args.duration}")
    start = DEFAULT_EPOCH if args.start is None else args.start
    try:
        out = record(
            sc, args.record, args.duration, args.seed, version=_page(args), start_unix=start
        )
    except OSError as exc:
        return _fail(f"cannot write the recording to {args.record}: {exc}")
    classes: Counter[str] = Counter()
    with (out / "truth.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            classes[yaml.safe_load(line)["class"]] += 1
    summary = ", ".join(f"{k} {v}" for k, v in classes.most_common())
    print(f"wrote {out} ({sum(classes.values())} intervals: {summary})")
    return 0


def _serve(args: argparse.Namespace, sc: Any, own: dict[int, Any]) -> int:
    from app.sim.server import start_server

    if args.replicas < 1:
        return _fail(f"--replicas must be >= 1, got {args.replicas}")
    if not 0 <= args.port <= 65535:
        return _fail(f"--port must be in 0..65535, got {args.port}")
    if args.speed <= 0:
        return _fail(f"--speed must be positive, got {args.speed}")
    if args.page_tick < 0:
        return _fail(f"--page-tick must be >= 0, got {args.page_tick}")
    if args.engines is not None and not 1 <= args.engines <= args.replicas:
        return _fail(f"--engines must be in 1..{args.replicas}, got {args.engines}")
    try:
        server, thread, url = start_server(
            sc,
            args.port,
            args.replicas,
            args.seed,
            version=_page(args),
            host=args.host,
            speed=args.speed,
            engines=args.engines,
            model_per_replica=args.model_per_replica,
            replica_scenarios=own,
            page_tick=args.page_tick,
        )
    except OSError as exc:
        return _fail(f"cannot listen on {args.host}:{args.port}: {exc}")
    print(f"listening on {url}", flush=True)
    if args.replicas > 1:
        print(
            f"replicas: {url}/replica/0/metrics .. {url}/replica/{args.replicas - 1}/metrics",
            flush=True,
        )
    for item in args.replica_set:
        print(f"replica {item.partition(':')[0]} sets {item.partition(':')[2]}", flush=True)
    try:
        thread.join()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        server.server_close()
    return 0
