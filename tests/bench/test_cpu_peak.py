"""Peak FLOP/s from /proc/cpuinfo text: lanes from the widest vector flag, FMA, cores, clock."""

from __future__ import annotations

import pytest

from .cpu_peak import fp32_lanes, parse_cpuinfo, peak

CPUINFO = """processor\t: 0
model name\t: AMD EPYC
cpu MHz\t\t: 2600.000
flags\t\t: fpu sse sse2 avx fma avx2 avx512f avx512dq

processor\t: 1
model name\t: AMD EPYC
cpu MHz\t\t: 2600.000
flags\t\t: fpu sse sse2 avx fma avx2 avx512f avx512dq
"""


def test_parse_reads_model_processors_clock_and_flags() -> None:
    cpu = parse_cpuinfo(CPUINFO)
    assert (cpu.model, cpu.processors, cpu.mhz) == ("AMD EPYC", 2, 2600.0)
    assert "avx512f" in cpu.flags


def test_widest_vector_flag_sets_the_lanes() -> None:
    assert fp32_lanes(frozenset({"sse", "avx", "avx2", "avx512f"})) == (16, "avx512f")
    assert fp32_lanes(frozenset({"sse", "avx", "avx2"})) == (8, "avx2")
    assert fp32_lanes(frozenset({"sse"})) == (4, "sse")


def test_avx512_peak_is_32_flops_per_cycle_per_fma_unit() -> None:
    cpu = parse_cpuinfo(CPUINFO)
    two_units = peak(cpu, fma_units=2)
    assert two_units.flops_per_cycle_per_core == 64
    assert two_units.flops_per_second == pytest.approx(2 * 2.6e9 * 64)
    assert peak(cpu, cores=1, fma_units=1).flops_per_second == pytest.approx(2.6e9 * 32)
    assert "assumed" in two_units.assumption


def test_avx2_without_fma_counts_one_flop_per_lane() -> None:
    cpu = parse_cpuinfo(CPUINFO.replace(" fma", "").replace(" avx512f avx512dq", ""))
    assert peak(cpu, fma_units=1).flops_per_cycle_per_core == 8


def test_cpuinfo_without_processors_is_an_error() -> None:
    with pytest.raises(ValueError, match="no processor"):
        parse_cpuinfo("")
