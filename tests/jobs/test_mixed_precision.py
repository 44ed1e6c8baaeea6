"""`--mixed-precision` as a user runs it, on a CPU: a Keras `fit` program (cifar_mixup, whose optimizer Keras wraps
around Horovod's) under `horovodrun -np 2` and a custom-loop trainer (higgs's allreduce, one process) train with finite
losses, say once per rank that float16 is slow without a GPU and save float32 weights; a run without the flag resumes
from the custom loop's checkpoint (the unit tier checks the same of trainlib's resume for both kinds of optimizer).

float16 on a CPU is many times slower than float32, so each run trains one or two steps of a few rows.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import h5py
import pytest

from trainlib.checkpoints import CheckpointManager

pytestmark = pytest.mark.jobs

CPU_NOTE = ("warning: this rank has no GPU: --mixed-precision trains, but float16 on a CPU is many times slower than "
            "float32")


def first_rows(source: Path, target: Path, rows: int) -> None:
    """The first `rows` rows of every dataset of an HDF5 file."""
    with h5py.File(source) as read, h5py.File(target, "w") as write:
        for name, dataset in read.items():
            write[name] = dataset[:rows]


def checkpoint_arrays(checkpoint_dir: Path) -> tuple[int, dict[str, set[str]]]:
    """The latest checkpoint's epoch, and the dtypes of each group of its arrays."""
    manager = CheckpointManager(str(checkpoint_dir))
    latest = manager.latest()
    assert latest is not None, f"no checkpoint in {checkpoint_dir}"
    state, _ = manager.load(latest)
    return latest.epoch, {group: {array.dtype.name for array in arrays} for group, arrays in state.items()}


def resumes_without_the_flag(jobs, command: list[str], checkpoint_dir: Path, cwd: Path) -> str:
    """Run `command` (one process, no flag) for a second epoch; it must restore epoch 1 and save epoch 2."""
    done = jobs.run_checked([sys.executable, *command, "--epochs", "2"], cwd)
    output = done.stdout + done.stderr
    assert f"restored {checkpoint_dir / 'ckpt-000001.h5'} (epoch 1" in output
    assert CPU_NOTE not in output
    assert checkpoint_arrays(checkpoint_dir)[0] == 2
    return output


def test_a_keras_fit_program_trains_two_ranks_in_mixed_precision_and_saves_float32_weights(jobs, digits_dir, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for name in ("train.h5", "test.h5"):
        first_rows(digits_dir / name, data / name, 32)  # one step of 16 rows per rank
    checkpoints = tmp_path / "checkpoints"
    command = ["-m", "cifar_mixup", "--data-dir", str(data), "--checkpoint-dir", str(checkpoints),
               "--batch-size", "16", "--learning-rate", "3.0", "--seed", "1"]

    done = jobs.run_checked(jobs.launch_command("gloo", [*command, "--epochs", "1", "--mixed-precision"]),
                            tmp_path)
    assert (done.stdout + done.stderr).count(f"cifar_mixup: {CPU_NOTE}\n") == 2, "one line from each rank"
    (record,) = json.loads((checkpoints / "history.json").read_text())["epochs"]
    assert math.isfinite(record["loss"]) and math.isfinite(record["val_loss"]), record
    assert checkpoint_arrays(checkpoints) == (1, {"model": {"float32"}, "optimizer": {"float32", "int64"}})


def test_a_custom_loop_trains_in_mixed_precision_and_resumes_without_it(jobs, tmp_path):
    for module, *args in (["higgs.synthetic", "training.csv", "--events", "400", "--seed", "7"],
                          ["higgs.convert", "training.csv", "data"]):
        jobs.run_checked([sys.executable, "-m", module, *args], tmp_path)
    checkpoints = tmp_path / "checkpoints"
    command = ["-m", "higgs", "--data-dir", str(tmp_path / "data"), "--checkpoint-dir", str(checkpoints),
               "--trainer", "allreduce", "--hidden-units", "16", "--seed", "2"]

    done = jobs.run_checked([sys.executable, *command, "--epochs", "1", "--mixed-precision"], tmp_path)
    assert (done.stdout + done.stderr).count(f"higgs: {CPU_NOTE}\n") == 1
    (record,) = json.loads((checkpoints / "history.json").read_text())["epochs"]
    assert math.isfinite(record["loss"]) and math.isfinite(record["val_loss"]), record
    assert checkpoint_arrays(checkpoints) == (1, {"model": {"float32"}, "optimizer": {"float32", "int64"}})

    resumes_without_the_flag(jobs, command, checkpoints, tmp_path)
    assert json.loads((checkpoints / "result.json").read_text())["epochs"] == 2
