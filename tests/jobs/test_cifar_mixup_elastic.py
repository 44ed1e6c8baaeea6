"""cifar_mixup under elastic Horovod, as kubetrain's launcher runs it: `horovodrun -np 2 --min-np 1 --max-np 2
--host-discovery-script ... --gloo`, on two hosts that are both this machine (127.0.0.1 and localhost).

Rank 1 is killed (kill -9) in the middle of epoch 3. Rank 0 goes on alone from the last commit, inside that epoch; once
the host's cooldown is over, a new rank joins and the job trains on two ranks again. Every epoch finishes, the model is
evaluated on the held-out data, and rank 0's checkpoints carry absolute epoch numbers. A restarted job resumes from
rank 0's latest checkpoint.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from cifar_mixup.demo import DIGITS_FLAGS
from trainlib.checkpoints import CheckpointManager

pytestmark = pytest.mark.jobs

# The survivor trains alone while the killed rank's host cools down (5 to 10 s) and the new rank starts: on an idle
# machine (2026-11-28) from epoch 3 to epoch 9, 17 s. Under load its epochs slow down as much as the new rank's start,
# and the cooldown is fewer epochs: 16 epochs leave a margin of 7. Each epoch on two ranks after the growth costs about
# 2 s of both cores. Digits: 44 steps per epoch on two ranks, 89 on one.
EPOCHS = 16
FLAGS = [*DIGITS_FLAGS, "--alpha", "0.2", "--seed", "1", "--warmup-epochs", "3", "--commit-every-batches", "4"]
HOSTS = ["127.0.0.1:1", "localhost:1"]
RESUMED = re.compile(r"rank0 INFO trainlib\.elastic: (\d+) ranks train from epoch (\d+), step (\d+) of (\d+)$")
EPOCH_BEGINS = re.compile(r"<stdout>:Epoch (\d+)/\d+$")
EPOCH_ENDS = re.compile(r"<stdout>:(\d+)/\1 - .* lr: ([\d.]+)")


@dataclass(frozen=True)
class Resumed:
    """One `N ranks train from epoch E, step S of T` line: where the ranks (re)started training."""

    ranks: int
    epoch: int
    step: int
    steps: int


@dataclass(frozen=True)
class ElasticRun:
    output: str
    checkpoints: Path
    epoch_at_kill: int  # the latest checkpoint when rank 1 was killed
    rank0_pid: int


def cifar_mixup(data_dir: Path, checkpoint_dir: Path, epochs: int) -> list[str]:
    return ["-m", "cifar_mixup", "--data-dir", str(data_dir), "--checkpoint-dir", str(checkpoint_dir),
            "--epochs", str(epochs), *FLAGS]


def resumed(output: str) -> list[Resumed]:
    return [Resumed(*map(int, found.groups())) for line in output.splitlines() if (found := RESUMED.search(line))]


def trained_epochs(output: str) -> list[tuple[int, int, float]]:
    """(epoch, steps, learning rate) of the epochs Keras printed on rank 0, in order. An epoch that ends in a reset
    (at its end-of-epoch commit) is finished but not printed."""
    epochs, current = [], None
    for line in output.splitlines():
        if begins := EPOCH_BEGINS.search(line):
            current = int(begins.group(1))
        elif (ends := EPOCH_ENDS.search(line)) and current is not None:
            epochs.append((current, int(ends.group(1)), float(ends.group(2))))
            current = None
    return epochs


@pytest.fixture(scope="module")
def shrunk_and_grown(jobs, digits_dir, tmp_path_factory) -> ElasticRun:
    """One elastic run of EPOCHS epochs on two hosts, rank 1 killed half way through epoch 3: half as long after
    checkpoint 2 as checkpoint 2 came after checkpoint 1, so a loaded machine's slower epochs still put the kill
    after epoch 3's first commit (every 4 of its 44 steps) and before its end."""
    work = tmp_path_factory.mktemp("elastic")
    checkpoints = work / "checkpoints"
    discovery = jobs.write_discovery_script(work, HOSTS)
    command = jobs.horovodrun_elastic_command(discovery, cifar_mixup(digits_dir, checkpoints, EPOCHS), np=2,
                                              min_np=1, max_np=2)
    log = work / "job.log"
    job = jobs.start_job(command, work, log)
    manager = CheckpointManager(str(checkpoints))
    try:
        saved = []
        for epoch in (1, 2):
            jobs.wait_until(job, lambda epoch=epoch: (found := manager.latest()) is not None and found.epoch >= epoch,
                            log=log, interval=0.05)
            saved.append(time.monotonic())
        time.sleep((saved[1] - saved[0]) / 2)  # about 1 s an epoch on two idle cores
        latest = manager.latest()
        assert latest is not None
        [rank0], [rank1] = jobs.rank_processes(str(checkpoints), 0), jobs.rank_processes(str(checkpoints), 1)
        os.kill(rank1, signal.SIGKILL)
        job.wait(timeout=400)
    except (AssertionError, subprocess.TimeoutExpired, ValueError):
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
        raise AssertionError(f"job did not run as planned:\n{log.read_text()[-6000:]}") from None
    output = log.read_text()
    assert job.returncode == 0, f"exit {job.returncode}\n{output[-6000:]}"
    return ElasticRun(output, checkpoints, latest.epoch, rank0)


def test_survivor_goes_on_from_the_last_commit_and_the_job_grows_back(shrunk_and_grown):
    run = shrunk_and_grown
    starts = resumed(run.output)
    assert starts[0] == Resumed(2, 1, 0, 44), starts
    shrink = next(index for index, start in enumerate(starts) if start.ranks == 1)
    alone = starts[shrink]
    assert alone.epoch == run.epoch_at_kill + 1 and 0 < alone.step < alone.steps == 89, (
        f"rank 0 goes on inside epoch {run.epoch_at_kill + 1}, from its last commit, not from checkpoint "
        f"{run.epoch_at_kill}: {starts}")
    grown = [start for start in starts[shrink + 1:] if start.ranks == 2]
    assert grown and grown[0].epoch > alone.epoch, f"the job grows to 2 ranks again after the cooldown: {starts}"

    epochs = [(epoch, steps) for epoch, steps, _ in trained_epochs(run.output)]
    assert (alone.epoch, alone.steps - alone.step) in epochs, "after the shrink, only the rest of that epoch"
    numbers = [epoch for epoch, _ in epochs]
    assert numbers == sorted(set(numbers)), "no epoch is trained twice; Keras numbers them absolutely"
    # After the 3 warm-up epochs the learning rate follows the ranks: 3.0 on one rank, 6.0 on two.
    learning_rates = {record["epoch"]: record["lr"]
                      for record in json.loads((run.checkpoints / "history.json").read_text())["epochs"]}
    alone_epochs = range(max(alone.epoch + 1, 4), grown[0].epoch)
    assert alone_epochs and {learning_rates[epoch] for epoch in alone_epochs} == {3.0}
    assert {learning_rates[epoch] for epoch in range(grown[0].epoch + 1, EPOCHS + 1)} == {6.0}


def test_every_epoch_is_checkpointed_by_rank0_and_the_model_is_evaluated(shrunk_and_grown):
    run = shrunk_and_grown
    history = json.loads((run.checkpoints / "history.json").read_text())["epochs"]
    assert [record["epoch"] for record in history] == list(range(1, EPOCHS + 1))

    records = [json.loads(path.read_text()) for path in sorted(run.checkpoints.glob("ckpt-*.json"))]
    assert [record["epoch"] for record in records] == [EPOCHS - 2, EPOCHS - 1, EPOCHS]
    assert {(record["rank"], record["pid"]) for record in records} == {(0, run.rank0_pid)}
    assert {path.name for path in run.checkpoints.glob("ckpt-*.h5")} == {
        f"ckpt-{epoch:06d}.h5" for epoch in (EPOCHS - 2, EPOCHS - 1, EPOCHS)}

    evaluation = json.loads((run.checkpoints / "evaluation.json").read_text())
    assert evaluation["heldOutImages"] == 360 and evaluation["epochs"] == EPOCHS
    assert evaluation["heldOutAccuracy"] > 0.5, f"chance is 0.1; got {evaluation}"
    assert re.search(r"rank0 INFO cifar_mixup: held-out accuracy \d\.\d{4}, loss \d+\.\d{4} \(360 images\)",
                     run.output)


def test_restarted_elastic_job_resumes_from_rank0_checkpoint(shrunk_and_grown, jobs, digits_dir, tmp_path):
    checkpoints = tmp_path / "checkpoints"
    shutil.copytree(shrunk_and_grown.checkpoints, checkpoints)
    latest = CheckpointManager(str(checkpoints)).latest()
    assert latest is not None and latest.epoch == EPOCHS
    discovery = jobs.write_discovery_script(tmp_path, HOSTS)
    command = jobs.horovodrun_elastic_command(discovery, cifar_mixup(digits_dir, checkpoints, EPOCHS + 1), np=2,
                                              min_np=1, max_np=2)
    done = jobs.run_checked(command, tmp_path)
    output = done.stdout + done.stderr

    assert f"restored {latest.path} (epoch {EPOCHS}" in output
    assert resumed(output) == [Resumed(2, EPOCHS + 1, 0, 44)]
    assert [epoch for epoch, _, _ in trained_epochs(output)] == [EPOCHS + 1], "epochs count on from the checkpoint"
    history = json.loads((checkpoints / "history.json").read_text())["epochs"]
    assert [record["epoch"] for record in history] == list(range(1, EPOCHS + 2))
    assert json.loads((checkpoints / f"ckpt-{EPOCHS + 1:06d}.json").read_text())["rank"] == 0
