"""Accelerator presets: memory bandwidth, peak dense FLOP/s and memory size.

Bandwidths are the published figures of the seed table (``docs/concepts.md``, "The
decode ceiling"). Peak FLOP/s are the vendors' dense (no sparsity) BF16/FP16 tensor-core
figures; the A10G value is AWS' variant (lower tensor throughput than the A10), and the CPU
value is a rough figure for a desktop part with wide vector units. The simulator only ever
uses them scaled by an efficiency (see ``app.sim.model.Physics``).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.sim.errors import SimConfigError


@dataclass(frozen=True, slots=True)
class Device:
    """One accelerator (or CPU socket) as the step-time model sees it."""

    name: str
    label: str
    bandwidth_gb_s: float
    peak_tflops: float
    memory_gb: float

    @property
    def bandwidth_bytes_s(self) -> float:
        return self.bandwidth_gb_s * 1e9

    @property
    def peak_flops(self) -> float:
        return self.peak_tflops * 1e12

    @property
    def memory_bytes(self) -> float:
        return self.memory_gb * 1e9


PRESETS: dict[str, Device] = {
    d.name: d
    for d in (
        Device("cpu", "CPU, dual-channel DDR5-5600", 90.0, 1.5, 64.0),
        Device("a10g", "NVIDIA A10G", 600.0, 70.0, 24.0),
        Device("l40s", "NVIDIA L40S", 864.0, 362.0, 48.0),
        Device("rtx4090", "NVIDIA RTX 4090", 1008.0, 165.0, 24.0),
        Device("a100-80gb", "NVIDIA A100 80GB SXM", 2039.0, 312.0, 80.0),
        Device("h100-sxm", "NVIDIA H100 SXM", 3350.0, 989.0, 80.0),
    )
}


def get_device(name: str, **overrides: float) -> Device:
    """Return the preset ``name`` with any of its numbers replaced by ``overrides``."""
    try:
        base = PRESETS[name]
    except KeyError:
        known = ", ".join(sorted(PRESETS))
        raise SimConfigError(f"unknown device preset {name!r} (known: {known})") from None
    fields = {
        "bandwidth_gb_s": base.bandwidth_gb_s,
        "peak_tflops": base.peak_tflops,
        "memory_gb": base.memory_gb,
    }
    for key, value in overrides.items():
        if key not in fields:
            raise SimConfigError(f"unknown device field {key!r}")
        if value <= 0:
            raise SimConfigError(f"device.{key} must be positive, got {value}")
        fields[key] = float(value)
    return Device(base.name, base.label, **fields)
