"""A training process (Keras + trainlib, as the programs checkpoint) is killed with SIGKILL at random moments over 50
epoch saves, many of them inside a save. After every kill the latest checkpoint is complete and loads, no completed
save is lost, and the restarted run continues from the last complete epoch with exactly its weights.

The random seed is printed; set KUBETRAIN_FAULT_SEED to replay a run.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import h5py
import numpy as np

from tests.reliability.fault_harness import python
from tests.reliability.figures import FIGURES
from trainlib.checkpoints import CheckpointManager, state_digest

TRAINER = Path(__file__).resolve().parent / "checkpoint_trainer.py"
EPOCHS = 50
RUN_TIMEOUT = 180.0


class Run:
    """One training process and the lines it printed, read as they come."""

    def __init__(self, checkpoint_dir: Path) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
        env = {k: v for k, v in env.items() if not k.startswith("KUBETRAIN_")}
        command = [python(), str(TRAINER), "--checkpoint-dir", str(checkpoint_dir),
                   "--epochs", str(EPOCHS)]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                        start_new_session=True)
        self.lines: list[str] = []
        self.arrived: dict[str, float] = {}  # when each line was read (time.monotonic())
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.arrived.setdefault(line.rstrip("\n"), time.monotonic())
            self.lines.append(line.rstrip("\n"))

    def epoch_seconds(self, epoch: int) -> float:
        """How long epoch `epoch` took, save included: from `saved <epoch - 1>` to `saved <epoch>`."""
        return self.arrived[f"saved {epoch}"] - self.arrived[f"saved {epoch - 1}"]

    def wait_for(self, pattern: str, timeout: float = RUN_TIMEOUT) -> re.Match[str] | None:
        """The first line matching `pattern`; None if the process ended without printing it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if match := re.search(pattern, line):
                    return match
            if self.process.poll() is not None and not self.reader.is_alive():
                return None
            time.sleep(0.02)
        raise AssertionError(f"no line matching {pattern!r} after {timeout:.0f}s:\n" + "\n".join(self.lines[-30:]))

    def saves(self, word: str = "saved") -> list[int]:
        return [int(line.split()[1]) for line in list(self.lines) if re.fullmatch(rf"{word} \d+", line)]

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        self.reader.join(timeout=10)


def test_sigkill_during_50_saves_never_loses_the_latest_checkpoint(tmp_path: Path) -> None:
    seed = int(os.environ.get("KUBETRAIN_FAULT_SEED", random.randrange(1 << 30)))
    print(f"KUBETRAIN_FAULT_SEED={seed}")
    rng = random.Random(seed)
    directory = tmp_path / "checkpoints"
    manager = CheckpointManager(str(directory), keep=3)
    kills = inside_save = lost = unreadable = 0
    started_at: list[int] = []
    while True:
        latest = manager.latest()
        expected_start = latest.epoch + 1 if latest else 1
        run = Run(directory)
        start = run.wait_for(r"training starts at epoch (\d+) with weights digest (\w+)")
        assert start is not None, "\n".join(run.lines[-30:])
        started_at.append(int(start.group(1)))
        assert int(start.group(1)) == expected_start, f"resumed at {start.group(1)}, latest complete is {latest}"
        if latest is not None:
            weights, _ = manager.load(latest)
            assert start.group(2) == state_digest(weights["model"]), "resumed without the checkpoint's weights"

        # kill a few saves in, at a random moment of the next epoch (saving takes most of it), however fast epochs are
        target = expected_start + rng.randint(2, 7)
        if run.wait_for(rf"^saved {target}$") is None or run.process.poll() is not None:
            run.process.wait(timeout=RUN_TIMEOUT)
            run.reader.join(timeout=10)
            break
        time.sleep(rng.uniform(0.0, run.epoch_seconds(target)))
        run.kill()
        if run.wait_for(r"^finished") is not None:
            break
        kills += 1
        announced, finished = run.saves("saving"), run.saves("saved")
        was_inside = bool(announced) and (not finished or announced[-1] > finished[-1])
        inside_save += was_inside
        after = manager.latest()
        survived = True
        if after is None or after.epoch < finished[-1]:
            lost += finished[-1] - (after.epoch if after else 0)
            survived = False
        else:
            try:
                with h5py.File(after.path, "r") as handle:
                    assert int(handle.attrs["epoch"]) == after.epoch
                state, _ = manager.load(after)
                assert state["model"] and all(np.all(np.isfinite(a)) for a in state["model"])
            except Exception:
                unreadable += 1
                survived = False
        FIGURES.fault("SIGKILL of a training process while checkpointing", survived,
                      f"kill {kills}: last save {finished[-1]}, latest {after}")

    FIGURES.count("checkpoints lost", lost)
    FIGURES.count("unreadable latest checkpoints", unreadable)
    FIGURES.count("checkpoint kills that landed inside a save (of all kills)", inside_save)
    print(f"{kills} kills ({inside_save} inside a save), runs started at epochs {started_at}")
    # the last run trained to the end (a kill may still land between its last line and its exit)
    assert f"finished {EPOCHS}" in run.lines, "\n".join(run.lines[-30:])
    assert lost == 0 and unreadable == 0
    assert kills >= 5, f"only {kills} kills over {EPOCHS} epochs"
    final = manager.latest()
    assert final is not None and final.epoch == EPOCHS
    # pruning runs after each save: a run killed between a save and its pruning leaves one extra until the next save
    kept = [c.epoch for c in manager.checkpoints()]
    assert kept[:3] == [EPOCHS, EPOCHS - 1, EPOCHS - 2] and len(kept) <= 4, kept
    assert not [p for p in os.listdir(directory) if p.endswith(".tmp")], "leftovers of killed saves are cleaned up"
