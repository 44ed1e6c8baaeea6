"""Fraction of peak: the cifar_mixup CNN's training FLOPs per second (analytic count x measured images/s) against
this machine's peak FP32 FLOP/s from /proc/cpuinfo."""

from __future__ import annotations

from pathlib import Path

from .cpu_peak import DEFAULT_FMA_UNITS, parse_cpuinfo, peak, usable_cores
from .horovod_overhead import Throughput
from .report import Row
from .stats import ratio

SECTION = "5 peak"
CPUINFO = Path("/proc/cpuinfo")


def rows(throughput: Throughput, fma_units: int = DEFAULT_FMA_UNITS) -> list[Row]:
    cpu = parse_cpuinfo(CPUINFO.read_text())
    cores = usable_cores()
    machine = peak(cpu, cores=cores, fma_units=fma_units)
    per_image = throughput.training_flops_per_image
    plain = per_image * throughput.plain_images_per_second
    horovod = per_image * throughput.horovod_images_per_second
    per_cpu_second = per_image * throughput.plain_images_per_cpu_second
    core_peak = machine.flops_per_second / cores
    cross_check = ratio(throughput.profiler_forward_flops_per_image, throughput.forward_flops_per_image)
    return [
        Row(SECTION, "training FLOPs per image, cifar_mixup CNN (32x32x3)", per_image / 1e6, "MFLOP",
            detail=f"analytic: conv + dense multiply-adds x 2, forward + both gradients; tf.profiler forward count "
                   f"/ analytic forward = {cross_check:.3f}; batch 32 -> {32 * per_image / 1e9:.2f} GFLOP per step",
            extra={"forward_flops": throughput.forward_flops_per_image,
                   "profiler_forward_flops": throughput.profiler_forward_flops_per_image}),
        Row(SECTION, "fraction of peak, (a) plain Keras", ratio(plain, machine.flops_per_second), "x",
            detail=f"{plain / 1e9:.1f} of {machine.flops_per_second / 1e9:.0f} GFLOP/s; {cpu.model}: "
                   f"{machine.assumption}",
            extra={"peak_flops": machine.flops_per_second, "achieved_flops": plain}),
        Row(SECTION, "fraction of peak, (c) Horovod np=2", ratio(horovod, machine.flops_per_second), "x",
            detail=f"{horovod / 1e9:.1f} of {machine.flops_per_second / 1e9:.0f} GFLOP/s",
            extra={"achieved_flops": horovod}),
        Row(SECTION, "fraction of one core's peak per CPU second, (a)", ratio(per_cpu_second, core_peak), "x",
            detail=f"{per_cpu_second / 1e9:.1f} GFLOP per CPU second of {core_peak / 1e9:.0f} GFLOP/s per core: "
                   "the efficiency of the cycles the process did get, whatever else ran on the cores",
            extra={"flops_per_cpu_second": per_cpu_second, "core_peak_flops": core_peak}),
    ]
