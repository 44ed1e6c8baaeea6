"""Kill-and-resume of every training program and trainer, many times in a row, two at a time (a loaded machine).

Each cycle runs a job as the jobs tier does (2 ranks: `mpirun` or `horovodrun --gloo`), kills it with SIGKILL once
rank 0 has saved epoch 1, then runs the same command again and checks what a user would: it starts at the next epoch
with the weights rank 0 saved and finishes every epoch. A run that does not end in time fails its cycle with each
rank's last lines and the stacks of its processes (tests.support.hung). Not a test tier: run by hand, its counts go
to docs/.

    python -m tests.jobs.soak --runs 50            # every case, 50 cycles each
    python -m tests.jobs.soak --runs 5 --cases higgs-mpi
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from higgs.trainers import SETTINGS
from tests.jobs.conftest import kill_when, launch_command, run_checked, start_job, write_mnist_digits
from tests.jobs.test_cifar_mixup import cifar_mixup
from tests.jobs.test_higgs_jobs import SMALL_NETWORK, higgs
from tests.jobs.test_mnist import mnist
from tests.jobs.test_ucluster_jobs import TINY_NETWORK, ucluster
from trainlib.checkpoints import CheckpointManager, state_digest

# The command lines and network sizes are the jobs tier's (its test modules), so a cycle runs what its tests run.
EPOCHS = 3
STARTED = re.compile(r"training starts at epoch (\d+) with weights digest (\w+) on all 2 ranks")


@dataclass(frozen=True)
class Case:
    """One program, trainer and controller; `args(data, checkpoints)` is its command after `python`."""

    name: str
    controller: str
    args: Callable[[Path, Path], list[str]]
    data: str  # which data set (a key of prepare_data's result)


def higgs_args(trainer: str) -> Callable[[Path, Path], list[str]]:
    return lambda data, checkpoints: higgs(
        "--data-dir", str(data), "--checkpoint-dir", str(checkpoints), "--trainer", trainer, "--epochs", str(EPOCHS),
        "--batch-size", "16", *SMALL_NETWORK)


def cifar_mixup_args(data: Path, checkpoints: Path) -> list[str]:
    return cifar_mixup(data, checkpoints, EPOCHS)


def mnist_args(data: Path, checkpoints: Path) -> list[str]:
    return mnist(data, checkpoints, EPOCHS)


def ucluster_args(data: Path, checkpoints: Path) -> list[str]:
    return ucluster("--data-dir", str(data), "--checkpoint-dir", str(checkpoints), "--epochs", str(EPOCHS),
                    "--epochs-pretrain", "1", *TINY_NETWORK)


def all_cases() -> list[Case]:
    """Every program under both controllers; higgs's parameter-server trainers run on MPI only (they need it)."""
    cases = []
    for controller in ("gloo", "mpi"):
        cases += [Case(f"cifar_mixup-{controller}", controller, cifar_mixup_args, "digits"),
                  Case(f"mnist-{controller}", controller, mnist_args, "mnist"),
                  Case(f"ucluster-{controller}", controller, ucluster_args, "jets")]
        cases += [Case(f"higgs-{controller}-{name}", controller, higgs_args(name), "events")
                  for name, settings in SETTINGS.items() if controller == "mpi" or not settings.parameter_server]
    return cases


def prepare_data(folder: Path) -> dict[str, Path]:
    """The small data sets of the jobs tier, written by the programs' own converters."""
    python = sys.executable
    paths = {"digits": folder / "digits", "mnist": folder / "mnist", "jets": folder / "jets",
             "events": folder / "higgs" / "data"}
    (folder / "higgs").mkdir()
    for command in ([python, "-m", "cifar_mixup.convert", "digits", "--out", str(paths["digits"])],
                    [python, "-m", "ucluster.synthetic", str(paths["jets"]), "--train-jets", "128", "--test-jets",
                     "48", "--files", "2"],
                    [python, "-m", "higgs.synthetic", str(folder / "higgs" / "training.csv"), "--events", "6000",
                     "--seed", "7"],
                    [python, "-m", "higgs.convert", str(folder / "higgs" / "training.csv"), str(paths["events"])]):
        run_checked(command, folder, timeout=300)
    write_mnist_digits(folder / "mnist-idx", paths["mnist"])
    return paths


def cycle(case: Case, data: Path, work: Path, timeout: int) -> None:
    """Kill a run after its first checkpoint, run it again, and check the resume; AssertionError says what broke."""
    checkpoints = work / "ckpt"
    command = launch_command(case.controller, case.args(data, checkpoints))
    first = start_job(command, work, log=work / "first.log")
    kill_when(first, (checkpoints / "ckpt-000001.json").exists, str(checkpoints), timeout=timeout,
              log=work / "first.log", interval=0.05)
    manager = CheckpointManager(str(checkpoints))
    latest = manager.latest()
    assert latest is not None and latest.epoch < EPOCHS, "the first run finished before it was killed"
    state, _ = manager.load(latest)
    done = run_checked(command, work, timeout=timeout)
    started = STARTED.search(done.stdout + done.stderr)
    assert started, f"no 'training starts' line:\n{done.stderr[-3000:]}"
    assert (int(started.group(1)), started.group(2)) == (latest.epoch + 1, state_digest(state["model"])), \
        started.group(0)
    history = json.loads((checkpoints / "history.json").read_text())["epochs"]
    assert [record["epoch"] for record in history] == list(range(1, EPOCHS + 1)), history


def soak(case: Case, data: Path, scratch: Path, runs: int, timeout: int) -> tuple[int, float, str]:
    """Run `runs` cycles of `case`, stopping at the first failure: (cycles passed, seconds, failure or '')."""
    started = time.monotonic()
    for run in range(runs):
        work = Path(tempfile.mkdtemp(prefix=f"{case.name}-{run}-", dir=scratch))
        try:
            cycle(case, data, work, timeout)
        except AssertionError as failure:
            print(f"{case.name}: cycle {run + 1} FAILED\n{failure}", flush=True)
            return run, time.monotonic() - started, f"cycle {run + 1}: {failure}"
        print(f"{case.name}: {run + 1}/{runs}", flush=True)
    return runs, time.monotonic() - started, ""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.jobs.soak", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="cycles per case (default: 50)")
    parser.add_argument("--cases", default="", help="only the cases whose name contains one of these (comma-separated)")
    parser.add_argument("--parallel", type=int, default=2, help="cases run at once (default: 2)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds each run may take (default: 300)")
    parser.add_argument("--report", type=Path, help="also write the table to this Markdown file")
    args = parser.parse_args(argv)
    wanted = args.cases.split(",")
    cases = [case for case in all_cases() if any(part in case.name for part in wanted)]
    with tempfile.TemporaryDirectory(prefix="kubetrain-soak-") as folder:
        scratch = Path(folder)
        data = prepare_data(scratch)
        with ThreadPoolExecutor(args.parallel) as pool:
            results = list(pool.map(lambda case: soak(case, data[case.data], scratch, args.runs, args.timeout),
                                    cases))
    rows = [f"| {case.name} | {passed} of {args.runs} | {seconds / max(passed, 1):.0f} |"
            for case, (passed, seconds, _) in zip(cases, results, strict=True)]
    table = "\n".join(["| Case | Cycles passed in a row | Seconds per cycle |", "|---|---:|---:|", *rows])
    print(table)
    for case, (_, _, failure) in zip(cases, results, strict=True):
        if failure:
            print(f"\n## {case.name}\n{failure}")
    if args.report:
        args.report.write_text(table + "\n")
    return 0 if all(not failure for _, _, failure in results) else 1


if __name__ == "__main__":
    sys.exit(main())
