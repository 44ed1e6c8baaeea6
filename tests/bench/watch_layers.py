"""The operator's two watch layers side by side: kubetrain with its own watches and store (kubetrain.runtime) and
with kopf's indices and event handlers (KUBETRAIN_WATCH=kopf, kubetrain.kopf_watches), each beside tuned
mpi-operator on one control plane. At each size the three take turns (operator_latency's rounds: a fresh namespace,
a warm-up job, N jobs created at once); at TARGET_JOBS they take PAIRS turns and each ratio is the median of the
pairs'. Rows: each contender's p99 create -> all children, API requests, CPU seconds per job and peak RSS, and each
layer's ratios to the tuned peer."""

from __future__ import annotations

from pathlib import Path

from .contenders import kubetrain, peer
from .operator_latency import PAIRS, TARGET_JOBS, OperatorBench, RoundResult, ratio_rows, rows
from .report import Row


def measure(workdir: Path, job_counts: list[int], nodes: int, gpus_per_node: int) -> list[Row]:
    layers, tuned = [kubetrain(), kubetrain(watch="kopf")], peer(tuned=True)
    if tuned.missing:
        raise RuntimeError(f"{tuned.name}: {tuned.missing}")
    bench = OperatorBench(workdir, nodes, gpus_per_node)
    try:
        found: list[Row] = []
        for jobs in job_counts:
            results: dict[str, list[RoundResult]] = {}
            for turn in range(PAIRS if jobs == TARGET_JOBS else 1):
                for contender in (*layers, tuned):
                    result = bench.round(contender, jobs, 1)
                    results.setdefault(contender.name, []).append(result)
                    found += rows(result, turn)
            for layer in layers:
                found += ratio_rows(list(zip(results[layer.name], results[tuned.name], strict=True)), tuned=True)
        return found
    finally:
        bench.stop()
