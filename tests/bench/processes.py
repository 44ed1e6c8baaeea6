"""Start the worker programs (tests/bench/workers) as plain processes or under horovodrun, and read their results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.support.hung import hung_report, stop_hung

REPO = Path(__file__).resolve().parents[2]
WORKERS = "tests.bench.workers"
HOROVODRUN = Path(sys.executable).with_name("horovodrun")
TIMEOUT = 900.0


class BenchError(RuntimeError):
    """A benchmark could not run (a worker failed or a result is missing); the message has the worker's output."""


def worker_env(threads: int, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a worker: the repository importable, quiet TensorFlow, `threads` OpenMP threads."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
           "TF_CPP_MIN_LOG_LEVEL": "2", "OMP_NUM_THREADS": str(threads), "PYTHONUNBUFFERED": "1",
           "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    env.update(extra or {})
    return env


def worker_command(worker: str, args: Sequence[str], horovod_np: int | None = None) -> list[str]:
    """`python -m tests.bench.workers.<worker> args`, under `horovodrun -np N --gloo` on this host when asked."""
    command = [sys.executable, "-m", f"{WORKERS}.{worker}", *args]
    if horovod_np is None:
        return command
    return [str(HOROVODRUN), "-np", str(horovod_np), "-H", f"localhost:{horovod_np}", "--gloo", *command]


def start(worker: str, args: Sequence[str], threads: int, horovod_np: int | None = None,
          extra_env: Mapping[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(worker_command(worker, args, horovod_np), cwd=REPO, env=worker_env(threads, extra_env),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _command(process: subprocess.Popen[str]) -> str:
    args = process.args
    return " ".join(str(arg) for arg in args) if isinstance(args, list) else str(args)


def finish(process: subprocess.Popen[str], timeout: float = TIMEOUT) -> str:
    """Wait for a started worker; raise BenchError with the tail of its output if it failed."""
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BenchError(hung_report(_command(process), timeout, *stop_hung(process))) from None
    if process.returncode != 0:
        raise BenchError(f"{_command(process)} exited {process.returncode}:\n{output[-3000:]}")
    return output


def run(worker: str, args: Sequence[str], threads: int, horovod_np: int | None = None,
        extra_env: Mapping[str, str] | None = None) -> str:
    return finish(start(worker, args, threads, horovod_np, extra_env))


def stop_process(process: subprocess.Popen, timeout: float = 30.0) -> None:
    """SIGTERM, then SIGKILL after `timeout` seconds; returns once it has exited."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def read_json(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise BenchError(f"the worker wrote no result at {path}")
    return json.loads(path.read_text())
