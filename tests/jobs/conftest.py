"""Shared helpers for the jobs tier: run the training programs as kubetrain's launcher does (`mpirun -np 2 python -m
<program>` for MPI, `horovodrun -np 2 --gloo ...` for Gloo).

Every test module here sets `pytestmark = pytest.mark.jobs`. Data sets are small and real where possible
(scikit-learn's digits, written through the programs' own converters: `digits_dir` for cifar_mixup, `mnist_dir`).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.util.tensor_util import make_ndarray

from kubetrain.contract import OPEN_MPI_ENV
from tests.support.hung import hung_report, stop_hung

HOROVODRUN = os.path.join(os.path.dirname(sys.executable), "horovodrun")
RANK0_LINE = re.compile(r"^\[(\d+,)?0\]<std(out|err)>:")  # the prefix: [rank] (horovodrun --gloo), [job,rank] (mpirun)


def job_environment() -> dict[str, str]:
    """The caller's environment minus KUBETRAIN_* (no cluster here), plus what root needs to run mpirun and the
    Open MPI defaults kubetrain's pods get (no OFI provider: see kubetrain.contract.OPEN_MPI_ENV).

    `mpi_yield_when_idle` makes idle MPI ranks yield the CPU: the tests share 2 cores, and busy-polling ranks would
    otherwise starve each other (a 3x slowdown under load).
    """
    env = {key: value for key, value in os.environ.items() if not key.startswith("KUBETRAIN_")}
    env.update(OPEN_MPI_ENV)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_mpi_yield_when_idle="1",
               PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="2")
    return env


def launch_command(controller: str, program_args: Sequence[str], np: int = 2) -> list[str]:
    """`np` ranks of `python <program_args...>` (this interpreter) on this machine, started as the launcher starts a
    job: Open MPI's mpirun with lib/mpi.sh's options for "mpi" (not `horovodrun --mpi`, whose own start costs about 4
    CPU seconds), `horovodrun --gloo` for "gloo"."""
    if controller == "mpi":
        return ["mpirun", "-np", str(np), "--host", f"localhost:{np}", "--bind-to", "none", "--map-by", "slot",
                "--tag-output", sys.executable, *program_args]
    assert controller == "gloo", controller
    return [HOROVODRUN, "-np", str(np), "--gloo", sys.executable, *program_args]


def run_checked(command: Sequence[str], cwd: Path, timeout: int = 300,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run to completion; fail the test with the output tail unless it exits 0 within `timeout` seconds.

    On a timeout the failure shows each rank's last lines and the stack of every process of the run still alive,
    then the whole run (launcher, middleman, ranks) is killed.
    """
    process = subprocess.Popen(list(command), cwd=cwd, env=env or job_environment(), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(hung_report(" ".join(command), timeout, *stop_hung(process))) from None
    done = subprocess.CompletedProcess(list(command), process.returncode, stdout, stderr)
    assert done.returncode == 0, (f"exit {done.returncode}: {' '.join(command)}\nstdout:\n{done.stdout[-4000:]}\n"
                                  f"stderr:\n{done.stderr[-4000:]}")
    return done


def horovodrun_elastic_command(discovery_script: Path, program_args: Sequence[str], *, np: int, min_np: int,
                               max_np: int, cooldown: tuple[int, int] = (5, 10)) -> list[str]:
    """`horovodrun` as kubetrain's launcher runs an elastic job (Gloo), the hosts from `discovery_script`."""
    return [HOROVODRUN, "-np", str(np), "--min-np", str(min_np), "--max-np", str(max_np), "--host-discovery-script",
            str(discovery_script), "--network-interface", "lo", "--blacklist-cooldown-range", str(cooldown[0]),
            str(cooldown[1]), "--gloo", sys.executable, *program_args]


def write_discovery_script(directory: Path, hosts: Sequence[str]) -> Path:
    """A host discovery script that prints `hosts.txt` beside it (rewrite that file to change the hosts).

    `127.0.0.1` and `localhost` are two hosts to horovodrun, and both are this machine: it starts their ranks itself,
    without ssh.
    """
    (directory / "hosts.txt").write_text("".join(f"{host}\n" for host in hosts))
    script = directory / "discover-hosts.sh"
    script.write_text(f"#!/bin/sh\ncat '{directory / 'hosts.txt'}'\n")
    script.chmod(0o755)
    return script


def rank_processes(marker: str, rank: int) -> list[int]:
    """PIDs of the job's Python processes (their command line contains `marker`) that horovodrun started as `rank`.

    horovodrun puts each rank's launch rank in its environment (HOROVOD_RANK); an elastic job may renumber it later.
    """
    found = []
    for pid in processes_mentioning(marker):
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                environment = handle.read().split(b"\0")
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                program = os.path.basename(handle.read().split(b"\0")[0])
        except OSError:
            continue
        if program.startswith(b"python") and f"HOROVOD_RANK={rank}".encode() in environment:
            found.append(pid)
    return found


def start_job(command: Sequence[str], cwd: Path, log: Path) -> subprocess.Popen:
    """Start the job in its own session (so `kill_when` can kill it whole), writing its output to `log`."""
    with open(log, "w") as handle:  # the job keeps its own copy of the file descriptor
        return subprocess.Popen(list(command), cwd=cwd, env=job_environment(), stdout=handle,
                                stderr=subprocess.STDOUT, start_new_session=True)


def is_rank0_line(line: str) -> bool:
    """Whether the launch command tagged this output line as rank 0's."""
    return RANK0_LINE.match(line) is not None


def processes_mentioning(marker: str) -> list[int]:
    """PIDs whose command line contains `marker` (a unique path of this test), excluding this process."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if marker.encode() in handle.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def wait_until(process: subprocess.Popen, ready: Callable[[], bool], timeout: float = 240, log: Path | None = None,
               interval: float = 0.2) -> None:
    """Poll `ready()` every `interval` seconds until it holds; fail if the job ends first or `timeout` passes (then
    with each rank's last lines from `log` and the stacks of the job's processes, which are killed)."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert process.poll() is None, (f"job ended (exit {process.returncode}) before the awaited point\n"
                                        f"{log.read_text()[-4000:] if log else ''}")
        if time.monotonic() >= deadline:
            stack_report, _, _ = stop_hung(process)
            raise AssertionError(hung_report(" ".join(map(str, process.args)), timeout, stack_report,
                                             log.read_text() if log else "", ""))
        time.sleep(interval)


def kill_when(process: subprocess.Popen, ready: Callable[[], bool], marker: str, timeout: float = 240,
              log: Path | None = None, interval: float = 0.2) -> None:
    """SIGKILL the started job (its process group, then any rank still naming `marker`) once `ready()` holds.

    `ready()` is polled every `interval` seconds (shorter for jobs whose epochs take well under a second). `log`: the
    file the job writes its output to, whose tail is shown if the job ends before the kill point.
    """
    wait_until(process, ready, timeout, log, interval)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    for _ in range(100):
        leftovers = processes_mentioning(marker)
        if not leftovers:
            return
        for pid in leftovers:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    raise AssertionError(f"ranks still alive after kill: {processes_mentioning(marker)}")


@dataclass(frozen=True)
class TensorBoardRun:
    """What TensorBoard reads from a run's `tensorboard/` folder: each scalar tag's values by step, whether it holds a
    graph, and the pids that wrote its event files (`events.out.tfevents.<time>.<host>.<pid>.<n>.v2`)."""

    scalars: dict[str, dict[int, float]]
    graph: bool
    writers: set[int]

    def epochs(self, metric: str) -> dict[int, float]:
        return self.scalars.get(f"epoch/{metric}", {})


def tensorboard_run(checkpoint_dir: Path) -> TensorBoardRun:
    """The event files of `<checkpoint_dir>/tensorboard`, read with TensorBoard's own reader (EventAccumulator)."""
    folder = checkpoint_dir / "tensorboard"
    events = EventAccumulator(str(folder), size_guidance={"tensors": 0})
    events.Reload()
    scalars = {tag: {event.step: float(make_ndarray(event.tensor_proto)) for event in events.Tensors(tag)}
               for tag in events.Tags()["tensors"]}
    writers = {int(path.name.split(".")[-3]) for path in folder.glob("events.out.tfevents.*")}
    return TensorBoardRun(scalars, bool(events.Tags()["graph"]), writers)


def rank0_tensorboard(root: Path, checkpoint_dir: Path, history: list[dict], rank0_pid: int) -> TensorBoardRun:
    """The run's TensorBoard, checked as a user would: one event file under `root`, in the folder rank 0 writes, by
    rank 0's process, with an `epoch/<metric>` tag for each metric of history.json holding its values (a metric that
    starts late, from its first epoch), and the learning rate by step."""
    files = [path.relative_to(root) for path in root.rglob("events.out.tfevents.*")]
    assert [path.parts[:-1] for path in files] == [checkpoint_dir.relative_to(root).parts + ("tensorboard",)], \
        f"one event file, in the folder rank 0 writes: {files}"
    board = tensorboard_run(checkpoint_dir)
    assert board.writers == {rank0_pid}, "written by rank 0's process"
    metrics = {name for record in history for name in record} - {"epoch"}
    assert set(board.scalars) == {f"epoch/{name}" for name in metrics} | {"step/learning_rate"}, set(board.scalars)
    for name in metrics:
        assert board.epochs(name) == pytest.approx({record["epoch"]: record[name] for record in history
                                                    if name in record}, rel=1e-6), name
    return board


class JobRunner:
    """The helpers above as one fixture, so test modules need not import conftest."""

    environment = staticmethod(job_environment)
    launch_command = staticmethod(launch_command)
    horovodrun_elastic_command = staticmethod(horovodrun_elastic_command)
    write_discovery_script = staticmethod(write_discovery_script)
    rank_processes = staticmethod(rank_processes)
    run_checked = staticmethod(run_checked)
    start_job = staticmethod(start_job)
    wait_until = staticmethod(wait_until)
    kill_when = staticmethod(kill_when)
    is_rank0_line = staticmethod(is_rank0_line)
    tensorboard = staticmethod(tensorboard_run)
    rank0_tensorboard = staticmethod(rank0_tensorboard)


@pytest.fixture(scope="session")
def jobs() -> JobRunner:
    """`jobs.launch_command(...)`, `jobs.run_checked(...)`, `jobs.start_job(...)`, `jobs.kill_when(...)`,
    `jobs.wait_until(...)`, `jobs.environment()`, `jobs.is_rank0_line(line)`, `jobs.tensorboard(checkpoint_dir)`,
    `jobs.rank0_tensorboard(...)`; for
    elastic jobs `jobs.horovodrun_elastic_command(...)`, `jobs.write_discovery_script(...)`,
    `jobs.rank_processes(...)`."""
    return JobRunner()


@pytest.fixture(scope="session")
def digits_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """scikit-learn's digits as cifar_mixup HDF5 (train.h5 / test.h5), written by the program's converter."""
    out = tmp_path_factory.mktemp("digits")
    run_checked([sys.executable, "-m", "cifar_mixup.convert", "digits", "--out", str(out)], out, timeout=120)
    return out


def write_mnist_digits(source: Path, out: Path) -> None:
    """Digits upscaled 3x and padded to 28x28, written to `source` as IDX files (train gzip-compressed, test plain),
    then converted by the program's converter into `out`."""
    from sklearn.datasets import load_digits

    from mnist.idx import write_idx

    digits = load_digits()
    images = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)
    images = np.pad(np.kron(images, np.ones((1, 3, 3), np.uint8)), ((0, 0), (2, 2), (2, 2)))
    labels = digits.target.astype(np.uint8)
    source.mkdir(parents=True, exist_ok=True)
    write_idx(str(source / "train-images-idx3-ubyte.gz"), images[:1400])
    write_idx(str(source / "train-labels-idx1-ubyte.gz"), labels[:1400])
    write_idx(str(source / "t10k-images-idx3-ubyte"), images[1400:])
    write_idx(str(source / "t10k-labels-idx1-ubyte"), labels[1400:])
    out.mkdir(parents=True, exist_ok=True)
    run_checked([sys.executable, "-m", "mnist.convert", "--source", str(source), "--out", str(out)], out)


@pytest.fixture(scope="session")
def mnist_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """scikit-learn's digits as MNIST: IDX files converted by the program's converter (write_mnist_digits)."""
    out = tmp_path_factory.mktemp("mnist-h5")
    write_mnist_digits(tmp_path_factory.mktemp("mnist-idx"), out)
    return out
