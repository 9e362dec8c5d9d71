"""A scenario's settings as typed, validated records, built from a plain nested mapping.

The mapping is what a scenario file holds (see ``docs/simulator.md``)::

    device: {preset: l40s}                # or just "l40s"; numbers may be overridden
    model: {preset: llama-3.1-8b, weight_bits: 16}
    physics: {compute_efficiency: 0.6}
    engine: {max_num_seqs: 256, max_num_batched_tokens: 2048, ...}
    workload: {load: 0.4, classes: [...]}  # or rate: <req/s>
    slo: {ttft_s: 2.0, itl_s: 0.1}
    speculative: {num_speculative_tokens: 4, accept_prob: 0.8}   # optional
    faults: {hang: false, hang_admits: false, slowdown: 1.0, frontend_delay_s: 0.0}  # optional

``workload.load`` is a rate relative to ``estimate_capacity`` (1.0 = the engine's estimated
throughput limit), so a scenario keeps its character on another device or model size;
``workload.rate`` is absolute.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, fields
from typing import Any

from app.sim.device import Device, get_device
from app.sim.errors import SimConfigError
from app.sim.model import ModelSpec, Physics, PhysicsParams, get_model, kv_pool_blocks
from app.sim.workload import Bursts, LengthDist, RequestClass, Workload, sample_request


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """The vLLM engine flags the scheduler honours (names as in ``vllm serve``)."""

    max_num_seqs: int = 256
    max_num_batched_tokens: int = 2048
    gpu_memory_utilization: float = 0.9
    block_size: int = 16
    max_model_len: int = 8192
    enable_prefix_caching: bool = True
    max_num_queued_reqs: int | None = None
    num_gpu_blocks_override: int | None = None
    served_model_name: str | None = None
    # Seconds each request waits, after it arrives, before the scheduler may admit it: its
    # KV cache (or adapter) comes from elsewhere — a KV connector's transfer from a prefill
    # instance. Meanwhile it is waiting and *deferred* (vLLM 0.20+
    # ``num_requests_waiting_by_reason{reason="deferred"}``); ready requests behind it go
    # first, as vLLM skips a request still waiting for its remote KV.
    kv_transfer_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Speculative:
    """Speculative decoding (vLLM's ``--speculative-config``), off when
    ``num_speculative_tokens`` is 0.

    Every decode step drafts ``num_speculative_tokens`` tokens per running request and
    the target verifies them in the same forward pass (so a decode carries 1 + k tokens
    through the model); the drafts are accepted in order, each with probability
    ``accept_prob`` given the ones before it, and the step emits the accepted ones plus
    the target's own token. vLLM's acceptance rate (accepted / draft tokens) follows:
    (p + p² + … + p^k) / k, 0.59 for p = 0.8 and k = 4. ``draft_cost`` is the drafter's
    time per draft token as a share of one read of the target's weights (0.05 stands for
    an EAGLE head; a draft model costs about its size over the target's).
    """

    num_speculative_tokens: int = 0
    accept_prob: float = 0.7
    draft_cost: float = 0.05


@dataclass(frozen=True, slots=True)
class Faults:
    """What goes wrong that no vLLM flag says: a hung engine core (no step is
    scheduled; arrivals wait in front of it, or — ``hang_admits`` — still enter the
    waiting queue, as behind a scheduler that keeps admitting while its executor hangs or
    a front end that counts them: the waiting gauge climbs), a slower device (every step takes
    ``slowdown`` times as long: thermal or power capping, a noisy neighbour) and a slow
    frontend (``frontend_delay_s``: every request answered over HTTP —
    ``app.sim.serving`` — waits that long before it reaches the engine, as behind a slow
    proxy, network or tokeniser; the engine's timings and its page never see it)."""

    hang: bool = False
    hang_admits: bool = False
    slowdown: float = 1.0
    frontend_delay_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Slo:
    """The SLOs the ground truth is judged against (the diagnosis' defaults)."""

    ttft_s: float = 2.0
    itl_s: float = 0.1
    tpot_s: float | None = None  # per-request goodput truth; None: the ITL SLO


@dataclass(frozen=True, slots=True)
class SimConfig:
    device: Device
    model: ModelSpec
    physics: PhysicsParams
    engine: EngineConfig
    workload: Workload
    slo: Slo
    num_gpu_blocks: int
    speculative: Speculative = Speculative()
    faults: Faults = Faults()

    def build_physics(self) -> Physics:
        return Physics(self.device, self.model, self.physics)

    @property
    def served_model_name(self) -> str:
        return self.engine.served_model_name or self.model.served_name


def _section(tree: dict[str, Any], key: str) -> dict[str, Any]:
    value = tree.get(key) or {}
    if isinstance(value, str):
        value = {"preset": value}
    if not isinstance(value, dict):
        raise SimConfigError(f"{key} must be a mapping, got {value!r}")
    return dict(value)


def _record(cls: Any, values: dict[str, Any], where: str) -> Any:
    known = {f.name for f in fields(cls)}
    unknown = set(values) - known
    if unknown:
        raise SimConfigError(f"unknown {where} setting(s): {', '.join(sorted(unknown))}")
    try:
        return cls(**values)
    except TypeError as exc:
        raise SimConfigError(f"bad {where} settings: {exc}") from None


def _length(value: Any, where: str) -> LengthDist:
    if isinstance(value, int | float):
        return LengthDist(float(value), 0.0)
    if not isinstance(value, dict) or "median" not in value:
        raise SimConfigError(f"{where} must be a number or {{median, sigma}}")
    return LengthDist(float(value["median"]), float(value.get("sigma", 0.0)))


def _workload(section: dict[str, Any], rate: float) -> Workload:
    classes = []
    for i, raw in enumerate(section.get("classes") or []):
        if not isinstance(raw, dict):
            raise SimConfigError(f"workload.classes[{i}] must be a mapping")
        name = str(raw.get("name", f"class{i}"))
        classes.append(
            RequestClass(
                name=name,
                weight=float(raw.get("weight", 1.0)),
                prompt=_length(raw.get("prompt_tokens"), f"{name}.prompt_tokens"),
                output=_length(raw.get("output_tokens"), f"{name}.output_tokens"),
                max_tokens=int(raw.get("max_tokens", 2048)),
            )
        )
    bursts = section.get("bursts")
    workload = Workload(
        rate=rate,
        classes=tuple(classes),
        rate_multiplier=float(section.get("rate_multiplier", 1.0)),
        shared_prefix_tokens=int(section.get("shared_prefix_tokens", 0)),
        prefix_share=float(section.get("prefix_share", 0.0)),
        prefix_reuse=float(section.get("prefix_reuse", 1.0)),
        bursts=_record(Bursts, dict(bursts), "workload.bursts") if bursts else None,
    )
    unknown = set(section) - {
        "rate",
        "load",
        "classes",
        "rate_multiplier",
        "shared_prefix_tokens",
        "prefix_share",
        "prefix_reuse",
        "bursts",
    }
    if unknown:
        raise SimConfigError(f"unknown workload setting(s): {', '.join(sorted(unknown))}")
    workload.validate()
    return workload


def resolve(tree: dict[str, Any]) -> SimConfig:
    """Validate a scenario mapping and build the config; raise ``SimConfigError`` if bad."""
    dev = _section(tree, "device")
    device = get_device(str(dev.pop("preset", "l40s")), **{k: float(v) for k, v in dev.items()})
    mod = _section(tree, "model")
    preset = str(mod.pop("preset", "llama-3.1-8b"))
    try:
        model = get_model(preset, **mod)
    except TypeError as exc:
        raise SimConfigError(f"bad model settings: {exc}") from None
    physics = _record(PhysicsParams, _section(tree, "physics"), "physics")
    physics.validate()
    engine: EngineConfig = _record(EngineConfig, _section(tree, "engine"), "engine")
    slo: Slo = _record(Slo, _section(tree, "slo"), "slo")
    if slo.ttft_s <= 0 or slo.itl_s <= 0 or (slo.tpot_s is not None and slo.tpot_s <= 0):
        raise SimConfigError("SLOs must be positive")
    _check_engine(engine)
    spec: Speculative = _record(Speculative, _section(tree, "speculative"), "speculative")
    faults: Faults = _record(Faults, _section(tree, "faults"), "faults")
    _check_spec_and_faults(spec, faults)
    if engine.num_gpu_blocks_override is not None:
        blocks = engine.num_gpu_blocks_override
        kv_pool_blocks(device, model, physics, engine.gpu_memory_utilization, engine.block_size)
    else:
        blocks = kv_pool_blocks(
            device, model, physics, engine.gpu_memory_utilization, engine.block_size
        )
    if blocks * engine.block_size < engine.max_model_len:
        raise SimConfigError(
            f"KV pool holds {blocks * engine.block_size} tokens ({blocks} blocks of "
            f"{engine.block_size}), fewer than max_model_len {engine.max_model_len}: one "
            "request's prompt may not fit. Raise gpu_memory_utilization, quantise, or lower "
            "max_model_len"
        )
    wl = _section(tree, "workload")
    if "rate" in wl and "load" in wl:
        raise SimConfigError("workload: give either rate (req/s) or load, not both")
    draft = _workload(wl, 0.0)
    if "load" in wl:
        load = float(wl["load"])
        if load < 0:
            raise SimConfigError(f"workload.load must not be negative, got {load}")
        physics_obj = Physics(device, model, physics)
        rate = load * estimate_capacity(physics_obj, engine, draft, blocks)
    else:
        rate = float(wl.get("rate", 1.0))
    workload = _workload(wl, rate)
    return SimConfig(device, model, physics, engine, workload, slo, blocks, spec, faults)


def _check_spec_and_faults(spec: Speculative, faults: Faults) -> None:
    if spec.num_speculative_tokens < 0:
        raise SimConfigError("speculative.num_speculative_tokens must not be negative")
    if not 0 <= spec.accept_prob <= 1:
        raise SimConfigError(f"speculative.accept_prob must be in [0, 1], got {spec.accept_prob}")
    if spec.draft_cost < 0:
        raise SimConfigError("speculative.draft_cost must not be negative")
    if not faults.slowdown >= 1:
        raise SimConfigError(f"faults.slowdown must be at least 1, got {faults.slowdown}")
    if not faults.frontend_delay_s >= 0:
        raise SimConfigError("faults.frontend_delay_s must not be negative")


def _check_engine(e: EngineConfig) -> None:
    if e.max_num_seqs < 1 or e.block_size < 1 or e.max_model_len < 2:
        raise SimConfigError("max_num_seqs, block_size must be >= 1 and max_model_len >= 2")
    if e.max_num_batched_tokens < 1:
        raise SimConfigError("max_num_batched_tokens must be >= 1")
    if e.max_num_queued_reqs is not None and e.max_num_queued_reqs < 0:
        raise SimConfigError("max_num_queued_reqs must not be negative")
    if e.num_gpu_blocks_override is not None and e.num_gpu_blocks_override < 1:
        raise SimConfigError("num_gpu_blocks_override must be >= 1")
    if not e.kv_transfer_s >= 0:
        raise SimConfigError(f"kv_transfer_s must not be negative, got {e.kv_transfer_s}")


def estimate_capacity(
    physics: Physics, engine: EngineConfig, workload: Workload, num_blocks: int
) -> float:
    """Requests per second the engine sustains with a full batch (an estimate).

    Per request: the compute of its uncached prompt tokens plus its share of decode steps
    at the largest batch that fits (``max_num_seqs`` or the KV pool, whichever is smaller).
    """
    rng = random.Random(12345)
    n = 2000
    prompt = output = uncached = 0.0
    for _ in range(n):
        d = sample_request(rng, workload, engine.max_model_len, engine.block_size)
        prompt += d.prompt_len
        output += d.output_len
        uncached += d.prompt_len - (d.prefix_tokens if engine.enable_prefix_caching else 0)
    prompt, output, uncached = prompt / n, output / n, uncached / n
    context = prompt + output / 2
    pool_tokens = num_blocks * engine.block_size
    batch = max(1.0, min(float(engine.max_num_seqs), pool_tokens / context))
    step = physics.decode_step_time(round(batch), round(context))
    prefill = (
        physics.flops_per_token * uncached
        + physics.attn_flops_per_pair * uncached * (prompt - uncached / 2)
    ) / physics.eff_flops
    per_request = prefill + output * step / batch
    return 1.0 / per_request
