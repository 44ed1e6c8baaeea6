"""Run kubetrain's benchmarks side by side, print the table, write results/latest.json and results/latest.md.

    python -m tests.bench --size small     # seconds to a few minutes; what CI runs
    python -m tests.bench --size medium    # the training benchmarks at the full shapes, fewer repeats (~30 min)
    python -m tests.bench --size full      # the sizes of the issue: 1/10/50/500 jobs, 3 interleaved rounds, ...

Absolute numbers on a shared machine are noisy; the table leads with ratios of runs made side by side and medians
over repeats. A row that misses its target is reported, never raised: benchmarks do not fail on a slow machine.
A benchmark that cannot run at all (a worker crashes, the control plane does not start) is an error: the other rows
are still written, and the command exits 1.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import callbacks, elastic_recovery, horovod_overhead, host_check, input_pipeline, memory_growth, peak_fraction
from .cpu_peak import parse_cpuinfo
from .horovod_overhead import FusionSetting, Throughput
from .report import Row, format_text, write_results

RESULTS = Path(__file__).resolve().parent / "results"
BENCHMARKS = ("horovod", "peak", "input", "callbacks", "memory", "elastic", "operator", "hostcheck")
MIB = 2**20


@dataclass(frozen=True)
class Sizes:
    """Everything that differs between --size small and --size full."""

    operator_jobs: tuple[int, ...]
    operator_single_repeats: int
    operator_nodes: int
    operator_limit_jobs: int  # kubetrain's jobs at once under the chart's default memory limit
    horovod_rounds: int
    horovod_steps: int
    horovod_windows: int
    horovod_warmup: int
    fusion_settings: tuple[FusionSetting, ...]
    feed_rows: int
    feed_steps: int
    feed_repeats: int
    read_rows: int
    read_repeats: int
    memory_rows: int
    alone_rows: int
    alone_batches: int
    alone_repeats: int
    callback_steps_per_epoch: int
    callback_epochs: int
    callback_repeats: int
    elastic_rows: int  # training images: 6400 are 100 steps an epoch at 2 ranks x batch 32, 4800 are 75
    elastic_epochs: int
    elastic_kill_fraction: float  # how far into epoch 2 a rank is killed
    elastic_rounds: int
    hostcheck_hosts: int  # hostfile hosts of the launcher's host check
    gpus_per_node: int = 64
    # mpi-operator as shipped, beside the tuned one. The small size (CI) runs the tuned peer only: the shipped one is
    # the same binary with its default flags, so it proves nothing new about the harness.
    shipped_peer: bool = True
    # What `--only` defaults to. The small size (CI) leaves out `elastic`: a worker lost and regained is proven by the
    # jobs, images and kind tiers, and its 4 trainings were half of the small run's time.
    benchmarks: tuple[str, ...] = BENCHMARKS


SIZES = {
    "small": Sizes(operator_jobs=(1, 5), operator_single_repeats=1, operator_nodes=2, operator_limit_jobs=5,
                   horovod_rounds=1, horovod_steps=12, horovod_windows=3, horovod_warmup=3,
                   fusion_settings=(FusionSetting(64 * MIB, 1.0),),
                   feed_rows=4096, feed_steps=20, feed_repeats=2, read_rows=12_000, read_repeats=2,
                   memory_rows=4096, alone_rows=4096, alone_batches=40, alone_repeats=2,
                   callback_steps_per_epoch=5, callback_epochs=2, callback_repeats=1,
                   elastic_rows=4800, elastic_epochs=2, elastic_kill_fraction=0.9, elastic_rounds=1,
                   hostcheck_hosts=40,
                   benchmarks=tuple(name for name in BENCHMARKS if name != "elastic"), shipped_peer=False),
    "medium": Sizes(operator_jobs=(1, 5), operator_single_repeats=2, operator_nodes=2, operator_limit_jobs=5,
                    horovod_rounds=2, horovod_steps=40, horovod_windows=4, horovod_warmup=8,
                    fusion_settings=(FusionSetting(64 * MIB, 1.0), FusionSetting(64 * MIB, 20.0)),
                    feed_rows=16_384, feed_steps=30, feed_repeats=3, read_rows=50_000, read_repeats=2,
                    memory_rows=20_000, alone_rows=50_000, alone_batches=800, alone_repeats=3,
                    callback_steps_per_epoch=45, callback_epochs=4, callback_repeats=2,
                    elastic_rows=6400, elastic_epochs=3, elastic_kill_fraction=0.75, elastic_rounds=2,
                    hostcheck_hosts=100),
    "full": Sizes(operator_jobs=(1, 10, 50, 500, 2000), operator_single_repeats=5, operator_nodes=16,
                  operator_limit_jobs=1000,
                  horovod_rounds=3, horovod_steps=60, horovod_windows=6, horovod_warmup=10,
                  fusion_settings=(FusionSetting(64 * MIB, 1.0), FusionSetting(64 * MIB, 5.0),
                                   FusionSetting(64 * MIB, 20.0), FusionSetting(1 * MIB, 1.0)),
                  feed_rows=16_384, feed_steps=50, feed_repeats=3, read_rows=100_000, read_repeats=3,
                  memory_rows=20_000, alone_rows=50_000, alone_batches=1563, alone_repeats=5,
                  callback_steps_per_epoch=45, callback_epochs=6, callback_repeats=3,
                  elastic_rows=12_800, elastic_epochs=3, elastic_kill_fraction=0.625, elastic_rounds=4,
                  hostcheck_hosts=1000),
}


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def environment(size: str, selected: Sequence[str]) -> dict[str, str]:
    """What a reader needs to compare two tables: machine, versions, commit."""
    cpu = parse_cpuinfo(Path("/proc/cpuinfo").read_text())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=RESULTS.parents[2]).stdout.strip()
    return {
        "size": size,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": f"python -m tests.bench --size {size}"
                   + ("" if set(selected) == set(SIZES[size].benchmarks) else f" --only {','.join(selected)}"),
        "not run": ", ".join(name for name in BENCHMARKS if name not in selected) or "nothing",
        "machine": f"{cpu.model}, {cpu.processors} cores at {cpu.mhz:.0f} MHz, {platform.machine()}",
        "versions": f"python {platform.python_version()}, tensorflow-cpu {_version('tensorflow-cpu')}, "
                    f"horovod {_version('horovod')}, kopf {_version('kopf')}",
        "commit": commit or "unknown",
        "load average at start": load_average(),
    }


def load_average() -> str:
    """1, 5 and 15 minute load averages: how busy the shared cores were (2 cores: above 2 means waiting)."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def run_benchmarks(selected: Sequence[str], sizes: Sizes, workdir: Path,
                   log: Callable[[str], None]) -> tuple[list[Row], list[str]]:
    """Every selected benchmark in a fixed order; returns the rows and one message per benchmark that failed."""
    rows: list[Row] = []
    errors: list[str] = []
    throughput: Throughput | None = None

    def attempt(name: str, step: Callable[[], list[Row]]) -> None:
        started = time.monotonic()
        log(f"[bench] {name} ...")
        try:
            found = step()
        except Exception as error:  # one broken benchmark must not hide the others' rows
            errors.append(f"{name}: {error}")
            log(f"[bench] {name} FAILED after {time.monotonic() - started:.0f}s:\n{traceback.format_exc()}")
            return
        rows.extend(found)
        log(f"[bench] {name} done in {time.monotonic() - started:.0f}s")

    def horovod() -> list[Row]:
        nonlocal throughput
        found, throughput = horovod_overhead.measure(
            workdir, sizes.horovod_rounds, sizes.horovod_steps, sizes.horovod_windows, sizes.horovod_warmup,
            list(sizes.fusion_settings))
        return found

    def peak() -> list[Row]:
        if throughput is None:
            raise RuntimeError("the fraction of peak needs the horovod benchmark's images/s; run it too")
        return peak_fraction.rows(throughput)

    def input_rows() -> list[Row]:
        return (input_pipeline.alone_rows(workdir, sizes.alone_rows, sizes.alone_batches, sizes.alone_repeats)
                + input_pipeline.feed_rows(workdir, sizes.feed_rows, sizes.feed_steps, sizes.feed_repeats,
                                         warmup=5)
                + input_pipeline.read_rows(workdir, sizes.read_rows, sizes.read_repeats))

    def operator() -> list[Row]:
        from . import operator_latency  # needs the control plane's Python dependencies only when selected

        return operator_latency.measure(workdir / "operator", list(sizes.operator_jobs),
                                        sizes.operator_single_repeats, sizes.operator_nodes, sizes.gpus_per_node,
                                        sizes.operator_limit_jobs, sizes.shipped_peer)

    steps: dict[str, Callable[[], list[Row]]] = {
        "horovod": horovod, "peak": peak, "input": input_rows,
        "callbacks": lambda: callbacks.measure(workdir, sizes.callback_steps_per_epoch, sizes.callback_epochs,
                                               sizes.callback_repeats),
        "memory": lambda: memory_growth.measure(workdir, sizes.memory_rows),
        "elastic": lambda: elastic_recovery.measure(workdir, sizes.elastic_rows, sizes.elastic_epochs,
                                                    sizes.elastic_kill_fraction, sizes.elastic_rounds),
        "operator": operator,
        "hostcheck": lambda: host_check.measure(workdir, sizes.hostcheck_hosts),
    }
    for name in BENCHMARKS:
        if name in selected:
            attempt(name, steps[name])
    return rows, errors


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="small", help="small (CI) or full (default: small)")
    parser.add_argument("--only", default=None,
                        help=f"comma-separated subset of {','.join(BENCHMARKS)} (peak needs horovod; default: all, "
                             "but elastic at --size small)")
    parser.add_argument("--results", type=Path, default=RESULTS, help=f"output directory (default: {RESULTS})")
    parser.add_argument("--workdir", type=Path, help="scratch directory to keep (default: a temporary one, removed)")
    args = parser.parse_args(argv)
    only = args.only if args.only is not None else ",".join(SIZES[args.size].benchmarks)
    selected = [name.strip() for name in only.split(",") if name.strip()]
    unknown = sorted(set(selected) - set(BENCHMARKS))
    if unknown:
        parser.error(f"--only: unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="kubetrain-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    meta = environment(args.size, selected)
    started = time.monotonic()
    rows, errors = run_benchmarks(selected, SIZES[args.size], workdir, lambda line: print(line, flush=True))
    meta["seconds"] = f"{time.monotonic() - started:.0f}"
    meta["load average at end"] = load_average()
    if errors:
        meta["errors"] = " | ".join(errors)
    json_path, markdown_path = write_results(args.results, rows, meta)
    print(format_text(rows))
    print(f"\nwrote {json_path} and {markdown_path} in {meta['seconds']} s")
    if errors:
        print(f"{len(errors)} benchmark(s) failed (scratch files kept in {workdir}):", *errors, sep="\n  ",
              file=sys.stderr)
        return 1
    if args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0
