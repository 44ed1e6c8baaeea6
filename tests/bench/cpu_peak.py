"""This machine's peak FP32 FLOP/s from /proc/cpuinfo: cores x clock x FLOPs per cycle (pure parsing and arithmetic).

FLOPs per cycle per core = SIMD FP32 lanes x 2 (a fused multiply-add is two FLOPs) x FMA units. The lanes follow from
the widest vector flag (avx512f: 16, avx/avx2: 8, sse: 4); the number of FMA units per core is not in /proc/cpuinfo,
so it is an assumption (2 by default: Intel Xeon Gold/Platinum, AMD Zen 2 and later; some parts have 1). The clock is
the "cpu MHz" the kernel reports (under a hypervisor, the nominal clock; turbo is not counted).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

DEFAULT_FMA_UNITS = 2


@dataclass(frozen=True)
class CpuInfo:
    model: str
    processors: int
    mhz: float
    flags: frozenset[str]


@dataclass(frozen=True)
class Peak:
    flops_per_second: float
    flops_per_cycle_per_core: int
    assumption: str


def parse_cpuinfo(text: str) -> CpuInfo:
    """Model name, processor count, clock and flags of the first processor in /proc/cpuinfo's text."""
    processors = 0
    model, mhz, flags = "unknown", 0.0, frozenset[str]()
    for line in text.splitlines():
        key, _, value = (part.strip() for part in line.partition(":"))
        if key == "processor":
            processors += 1
        elif key == "model name" and model == "unknown":
            model = value
        elif key == "cpu MHz" and not mhz:
            mhz = float(value)
        elif key == "flags" and not flags:
            flags = frozenset(value.split())
    if processors == 0 or mhz <= 0:
        raise ValueError("/proc/cpuinfo lists no processor with a 'cpu MHz' line")
    return CpuInfo(model=model, processors=processors, mhz=mhz, flags=flags)


def fp32_lanes(flags: frozenset[str]) -> tuple[int, str]:
    """FP32 lanes of the widest vector unit the flags announce, and that flag."""
    for flag, lanes in (("avx512f", 16), ("avx2", 8), ("avx", 8), ("sse", 4)):
        if flag in flags:
            return lanes, flag
    return 1, "scalar"


def peak(cpu: CpuInfo, cores: int | None = None, fma_units: int = DEFAULT_FMA_UNITS) -> Peak:
    """Peak FP32 FLOP/s of `cores` cores (default: every processor listed)."""
    lanes, flag = fp32_lanes(cpu.flags)
    fused = 2 if ("fma" in cpu.flags or flag == "avx512f") else 1
    per_cycle = lanes * fused * fma_units
    cores = cores or cpu.processors
    assumption = (f"{cores} cores x {cpu.mhz / 1000:.2f} GHz x {per_cycle} FP32 FLOPs/cycle ({flag}: {lanes} lanes"
                  f" x {fused} for FMA x {fma_units} FMA units per core, assumed)")
    return Peak(flops_per_second=cores * cpu.mhz * 1e6 * per_cycle, flops_per_cycle_per_core=per_cycle,
                assumption=assumption)


def usable_cores() -> int:
    """Cores this process may run on (the affinity mask, which containers may narrow)."""
    return len(os.sched_getaffinity(0))
