"""The operator's two watch layers side by side: kubetrain with its own watches and store (kubetrain.runtime) and
with kopf's indices and event handlers (KUBETRAIN_WATCH=kopf, kubetrain.kopf_watches), each beside tuned
mpi-operator on one control plane. At each size the three take turns (operator_latency's rounds: a fresh namespace,
a warm-up job, N jobs created at once); at TARGET_JOBS they take PAIRS turns and each ratio is the median of the
pairs'. Rows: each contender's p99 create -> all children, API requests, CPU seconds per job and peak RSS, and each
layer's ratios to the tuned peer.

A round whose jobs do not all get their launcher within ROUND_TIMEOUT_SECONDS is a row saying so, not an error;
every round's rows are also appended to `rounds.jsonl` in the work directory as they come, so a run stopped early
keeps what it measured."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from .contenders import Contender, kubetrain, peer
from .operator_latency import PAIRS, SECTION, TARGET_JOBS, OperatorBench, RoundResult, ratio_rows, rows
from .report import Row

ROUND_TIMEOUT_SECONDS = 900.0


def measure(workdir: Path, job_counts: list[int], nodes: int, gpus_per_node: int) -> list[Row]:
    layers, tuned = [kubetrain(), kubetrain(watch="kopf")], peer(tuned=True)
    if tuned.missing:
        raise RuntimeError(f"{tuned.name}: {tuned.missing}")
    bench = OperatorBench(workdir, nodes, gpus_per_node)
    journal = workdir / "rounds.jsonl"
    try:
        found: list[Row] = []
        for jobs in job_counts:
            results: dict[str, list[RoundResult]] = {}
            for turn in range(PAIRS if jobs == TARGET_JOBS else 1):
                for contender in (*layers, tuned):
                    measured = _round(bench, contender, jobs, turn, results)
                    _append(journal, measured)
                    found += measured
            for layer in layers:
                pairs = list(zip(results.get(layer.name, []), results.get(tuned.name, []), strict=False))
                if pairs:
                    found += ratio_rows(pairs, tuned=True)
        return found
    finally:
        bench.stop()


def _round(bench: OperatorBench, contender: Contender, jobs: int, turn: int,
           results: dict[str, list[RoundResult]]) -> list[Row]:
    """One contender's round: its rows, or one row saying it did not finish in time."""
    try:
        result = bench.round(contender, jobs, 1, timeout=ROUND_TIMEOUT_SECONDS)
    except RuntimeError as error:
        return [Row(SECTION, f"{contender.name}: not every launcher within {ROUND_TIMEOUT_SECONDS:.0f} s, {jobs} jobs",
                    float("nan"), "", detail=str(error).splitlines()[0])]
    results.setdefault(contender.name, []).append(result)
    return rows(result, turn)


def _append(journal: Path, found: list[Row]) -> None:
    with journal.open("a") as out:
        for row in found:
            out.write(json.dumps(dataclasses.asdict(row), default=str) + "\n")
