"""Input pipeline: (0) the pipelines alone, no model: cifar_mixup's HDF5 + MixUp feed vs a vectorised in-memory tf.data
MixUp pipeline vs the reference notebook's numpy MixUp generator, taking turns in one process; (1) training steps/s fed
from HDF5 through trainlib's pipeline vs from in-memory tensors, one process, alternated; (2) 2 ranks reading their
share of a large file as contiguous blocks (trainlib) vs strided `[rank::size]`, both ranks at once, the file
dropped from the page cache before every pass."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from . import processes
from .datasets import drop_from_page_cache, write_cifar_like
from .report import Row
from .stats import median, ratio

SECTION = "3 input"
TARGET_RATIO = 0.95
ALONE_VS_MEMORY = 0.9
ALONE_VS_NOTEBOOK = 2.5
READ_RANKS = 2


def alone_rows(workdir: Path, rows: int, batches: int, repeats: int) -> list[Row]:
    data = write_cifar_like(workdir / "alone.h5", rows, seed=5)
    out = workdir / "pipeline-alone.json"
    processes.run("pipeline_alone", ["--data", str(data), "--threads", "2", "--batches", str(batches),
                                     "--repeats", str(repeats), "--out", str(out)], threads=2)
    return rows_alone(processes.read_json(out), repeats)


def rows_alone(result: Mapping[str, Any], repeats: int) -> list[Row]:
    """The pipeline-alone rows from the worker's result: medians of the alternated runs, HDF5 against each other."""
    wall: Mapping[str, Sequence[float]] = result["images_per_second"]
    cpu: Mapping[str, Sequence[float]] = result["images_per_cpu_second"]
    hdf5, memory, notebook = (median(wall[name]) for name in ("hdf5", "memory", "notebook"))
    hdf5_cpu, memory_cpu, notebook_cpu = (median(cpu[name]) for name in ("hdf5", "memory", "notebook"))
    runs = (f"batch {result['batch_size']}, 1 process x {result['threads']} threads, {result['rows']} rows, median "
            f"of {repeats} alternated runs")
    vs_memory, vs_notebook = ratio(hdf5, memory), ratio(hdf5, notebook)
    return [Row(SECTION, "pipeline alone, HDF5 + MixUp vs in-memory vectorised tf.data MixUp, images/s", vs_memory,
                "x", target=f">= {ALONE_VS_MEMORY}", meets=vs_memory >= ALONE_VS_MEMORY,
                detail=f"{hdf5:,.0f} vs {memory:,.0f} images/s, no model ({runs})", extra=dict(wall)),
            Row(SECTION, "pipeline alone, HDF5 + MixUp vs the notebook's numpy MixUp generator, images/s",
                vs_notebook, "x", target=f">= {ALONE_VS_NOTEBOOK}", meets=vs_notebook >= ALONE_VS_NOTEBOOK,
                detail=f"{hdf5:,.0f} vs {notebook:,.0f} images/s"),
            Row(SECTION, "pipeline alone, HDF5 + MixUp vs in-memory / vs notebook, images per CPU second",
                ratio(hdf5_cpu, memory_cpu), "x",
                detail=f"{hdf5_cpu:,.0f} vs {memory_cpu:,.0f} vs {notebook_cpu:,.0f} images per CPU second; "
                       f"vs notebook {ratio(hdf5_cpu, notebook_cpu):.1f}x", extra=dict(cpu))]


def feed_rows(workdir: Path, rows: int, steps: int, repeats: int, warmup: int) -> list[Row]:
    data = write_cifar_like(workdir / "pipeline.h5", rows, seed=1)
    out = workdir / "pipeline-steps.json"
    processes.run("pipeline_steps", ["--data", str(data), "--threads", "2", "--steps", str(steps),
                                     "--repeats", str(repeats), "--warmup-steps", str(warmup), "--out", str(out)],
                  threads=2)
    result = processes.read_json(out)
    wall, cpu = result["steps_per_second"], result["steps_per_cpu_second"]
    hdf5, memory = median(wall["hdf5"]), median(wall["memory"])
    hdf5_cpu, memory_cpu = median(cpu["hdf5"]), median(cpu["memory"])
    value = ratio(hdf5, memory)
    return [Row(SECTION, "HDF5 pipeline vs in-memory tensors, training steps/s", value, "x",
                target=f">= {TARGET_RATIO}", meets=value >= TARGET_RATIO,
                detail=f"{hdf5:.2f} vs {memory:.2f} steps/s (batch 32, 1 process x 2 threads, MixUp on the HDF5 "
                       f"side as cifar_mixup trains; median of {repeats} alternated runs of {steps} steps)",
                extra=wall),
            Row(SECTION, "HDF5 pipeline vs in-memory tensors, steps per CPU second", ratio(hdf5_cpu, memory_cpu), "x",
                detail=f"{hdf5_cpu:.2f} vs {memory_cpu:.2f} steps per CPU second of the process, pipeline threads "
                       "included: the input's cost in work, little moved by other programs on the cores",
                extra=cpu)]


def _read_pass(data: Path, pattern: str, out_dir: Path) -> float:
    """Bytes/s of both ranks reading their share at once (total bytes / slowest rank's seconds)."""
    drop_from_page_cache(data)
    started = [processes.start("read_pattern", ["--data", str(data), "--rank", str(rank), "--size", str(READ_RANKS),
                                                "--pattern", pattern, "--out", str(out_dir / f"{pattern}{rank}.json")],
                               threads=1) for rank in range(READ_RANKS)]
    for process in started:
        processes.finish(process)
    results = [processes.read_json(out_dir / f"{pattern}{rank}.json") for rank in range(READ_RANKS)]
    return sum(r["bytes"] for r in results) / max(r["seconds"] for r in results)


def read_rows(workdir: Path, rows: int, repeats: int) -> list[Row]:
    data = write_cifar_like(workdir / "large.h5", rows, seed=2)
    speeds: dict[str, list[float]] = {"contiguous": [], "strided": []}
    for _ in range(repeats):
        for pattern in speeds:
            speeds[pattern].append(_read_pass(data, pattern, workdir))
    contiguous, strided = median(speeds["contiguous"]), median(speeds["strided"])
    size_mib = data.stat().st_size / 2**20
    return [Row(SECTION, "contiguous block vs strided [rank::size] reads, 2 ranks", ratio(contiguous, strided), "x",
                detail=f"{contiguous / 2**20:.0f} vs {strided / 2**20:.0f} MiB/s of rows delivered, {size_mib:.0f} MiB "
                       f"file ({rows} rows, 1024-row chunks), page cache dropped before each pass; median of "
                       f"{repeats}",
                extra=speeds)]
