"""The benchmark harness at --size small, end to end: every row of the issue is there with a finite positive number,
and both result files are written. The small size leaves the worker-loss benchmark out (the jobs, images and kind
tiers prove a lost worker is regained; its result parsing has unit tests in test_elastic_recovery.py), and mpi-operator
as shipped (the tuned one is the same binary with other flags). Speed is
never asserted: a slow machine gives slow numbers, not a failure."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
OPERATORS = ("kubetrain", "mpi-operator v0.8.0 tuned")
EXPECTED = [
    *(f"{who}: {what}, {size}" for who in OPERATORS for size in ("1 job", "5 jobs")
      for what in ("create -> all children", "create -> launcher Job, workers Ready in kwok",
                   "operator API requests per job", "operator CPU seconds per job")),
    *(f"kubetrain / {peer}: create -> all children p99, {size}" for peer in OPERATORS[1:]
      for size in ("1 job", "5 jobs")),
    *(f"floor, no operator: {who}'s children replayed, 5 jobs" for who in OPERATORS),
    *(f"{who} at its start: create -> all children, 5 jobs" for who in OPERATORS),
    f"kubetrain / {OPERATORS[1]} at their start: create -> all children p99, 5 jobs",
    f"floor kubetrain / floor {OPERATORS[1]}: create -> all children p99, 5 jobs",
    *(f"{who}: peak RSS per 100 jobs, 1 -> 5 jobs" for who in OPERATORS),
    "kubetrain under the chart's default memory limit",
    "(a) plain Keras", "(b) Horovod np=1", "(c) Horovod np=2", "(c)/(a) images/s",
    "(c)/(a) images per CPU second, fastest", "(c)/(a) images per CPU second, best", "(d) plain Keras, 2 processes",
    "(d)/(a) images per CPU second",
    "allreduce CPU share", "idle rank's CPU per second",
    "allreduce / step time", "pipeline alone, HDF5 + MixUp vs in-memory vectorised",
    "pipeline alone, HDF5 + MixUp vs the notebook's", "pipeline alone, HDF5 + MixUp vs in-memory / vs notebook",
    "all callbacks, % of step time, as shipped", "all callbacks, % of step time, inline",
    "HDF5 pipeline vs in-memory tensors, training steps/s",
    "HDF5 pipeline vs in-memory tensors, steps per CPU second", "contiguous block vs strided",
    "peak RSS per rank, 10x data, trainlib pipeline", "peak RSS per rank, 10x data, control",
    "training FLOPs per image", "fraction of peak, (a)", "fraction of peak, (c)", "fraction of one core's peak",
    "host check, 40 hosts, parallel", "host check, 40 hosts, serial", "host check serial / parallel, 40 hosts",
]


@pytest.mark.bench
def test_small_run_reports_every_benchmark(tmp_path: Path) -> None:
    results = tmp_path / "results"
    run = subprocess.run([sys.executable, "-m", "tests.bench", "--size", "small", "--results", str(results),
                          "--workdir", str(tmp_path / "work")], cwd=REPO, capture_output=True, text=True,
                         timeout=870)
    assert run.returncode == 0, f"the harness failed:\n{run.stdout[-6000:]}\n{run.stderr[-6000:]}"

    document = json.loads((results / "latest.json").read_text())
    rows = {row["name"]: row for row in document["rows"]}
    for expected in EXPECTED:
        matching = [name for name in rows if name.startswith(expected)]
        assert len(matching) == 1, f"expected one row starting {expected!r}, got {matching}; rows: {list(rows)}"
    for name, row in rows.items():
        if "per 100 jobs" in name:  # differences of noisy measures: may be <= 0
            assert not math.isnan(row["value"]), f"{name}: {row['value']}"
            continue
        assert math.isfinite(row["value"]) and row["value"] > 0, f"{name}: {row['value']}"
    assert document["meta"]["size"] == "small"
    assert document["meta"]["not run"] == "elastic" and not any("elastic" in name for name in rows), rows
    assert not any("mpi-operator v0.8.0 shipped" in name for name in rows), rows

    markdown = (results / "latest.md").read_text()
    assert all(f"| {row['name']} |" in markdown for row in document["rows"])
    assert "| value |" in markdown
