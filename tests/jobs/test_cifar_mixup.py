"""cifar_mixup as a user runs it: `horovodrun -np 2 --gloo python -m cifar_mixup` on scikit-learn's digits.

It learns (held-out accuracy far above chance), only rank 0 writes checkpoints, a killed run resumes at the next epoch
with the weights rank 0 saved, and bad data files, or GPUs it cannot see, stop it with one clear line.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from cifar_mixup.demo import DIGITS_FLAGS
from trainlib.checkpoints import CheckpointManager, state_digest

pytestmark = pytest.mark.jobs

# The demo's batch and learning rate for the digits; the architecture and the rest of the recipe are the notebook's.
SMALL_DATA_FLAGS = [*DIGITS_FLAGS, "--alpha", "0.2", "--seed", "1"]


def cifar_mixup(data_dir: Path, checkpoint_dir: Path, epochs: int, *extra: str) -> list[str]:
    return ["-m", "cifar_mixup", "--data-dir", str(data_dir), "--checkpoint-dir", str(checkpoint_dir),
            "--epochs", str(epochs), *SMALL_DATA_FLAGS, *extra]


def rank_lines(output: str, rank: int) -> list[str]:
    """horovodrun --gloo prefixes each rank's lines with `[rank]<stdout>:` / `[rank]<stderr>:`."""
    return [line for line in output.splitlines() if line.startswith(f"[{rank}]<")]


def test_learns_digits_with_two_gloo_ranks_and_only_rank0_writes(jobs, digits_dir, tmp_path):
    checkpoints = tmp_path / "checkpoints"
    command = jobs.launch_command("gloo", cifar_mixup(digits_dir, checkpoints, 8, "--mixup"))
    done = jobs.run_checked(command, tmp_path)
    output = done.stdout + done.stderr

    evaluation = json.loads((checkpoints / "evaluation.json").read_text())
    assert evaluation["heldOutImages"] == 360
    assert evaluation["heldOutAccuracy"] > 0.5, f"chance is 0.1; got {evaluation}"

    history = json.loads((checkpoints / "history.json").read_text())["epochs"]
    assert [record["epoch"] for record in history] == list(range(1, 9))
    assert history[-1]["val_accuracy"] == pytest.approx(evaluation["heldOutAccuracy"], abs=1e-6)
    assert (checkpoints / "history.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    records = [json.loads(path.read_text()) for path in sorted(checkpoints.glob("ckpt-*.json"))]
    assert [record["epoch"] for record in records] == [6, 7, 8], "keeps the newest 3"
    assert {record["rank"] for record in records} == {0} and len({record["pid"] for record in records}) == 1
    expected = {f"ckpt-{epoch:06d}.{kind}" for epoch in (6, 7, 8) for kind in ("h5", "json")}
    assert {path.name for path in checkpoints.iterdir()} == expected | {"history.json", "history.png",
                                                                         "evaluation.json", "tensorboard"}
    assert output.count("saved checkpoint") == 8
    assert not any("saved checkpoint" in line for line in rank_lines(output, 1))
    assert "training starts at epoch 1" in output and "on all 2 ranks" in output


def test_killed_run_resumes_at_next_epoch_with_rank0_weights(jobs, digits_dir, tmp_path):
    checkpoints = tmp_path / "checkpoints"
    manager = CheckpointManager(str(checkpoints))
    first = subprocess.Popen(jobs.launch_command("gloo", cifar_mixup(digits_dir, checkpoints, 20, "--no-mixup")),
                             cwd=tmp_path, env=jobs.environment(), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    jobs.kill_when(first, lambda: (found := manager.latest()) is not None and found.epoch >= 2, str(checkpoints))

    latest = manager.latest()
    assert latest is not None and latest.epoch >= 2
    saved, _ = manager.load(latest)
    digest = state_digest(saved["model"])

    done = jobs.run_checked(jobs.launch_command("gloo", cifar_mixup(digits_dir, checkpoints, latest.epoch + 1,
                                                              "--no-mixup")), tmp_path)
    output = done.stdout + done.stderr
    assert f"restored {latest.path} (epoch {latest.epoch}" in output
    assert f"training starts at epoch {latest.epoch + 1} with weights digest {digest} on all 2 ranks" in output
    assert re.search(rf"Epoch {latest.epoch + 1}/{latest.epoch + 1}", output)
    assert f"Epoch {latest.epoch}/" not in output, "no completed epoch is trained again"
    resumed = manager.latest()
    assert resumed is not None and resumed.epoch == latest.epoch + 1
    history = json.loads((checkpoints / "history.json").read_text())["epochs"]
    assert [record["epoch"] for record in history] == list(range(1, latest.epoch + 2))
    # TensorBoard drops what the killed run wrote after its last checkpoint too: one value per epoch, history's
    assert jobs.tensorboard(checkpoints).epochs("loss") == pytest.approx(
        {record["epoch"]: record["loss"] for record in history}, rel=1e-6)


def test_compare_trains_with_and_without_mixup_from_the_same_start_and_plots_both(jobs, digits_dir, tmp_path):
    checkpoints = tmp_path / "checkpoints"
    done = jobs.run_checked(jobs.launch_command("gloo", cifar_mixup(digits_dir, checkpoints, 2, "--compare")),
                            tmp_path, timeout=600)
    output = done.stdout + done.stderr
    digests = re.findall(r"training starts at epoch 1 with weights digest (\S+) on all 2 ranks", output)
    assert len(digests) == 2 and digests[0] == digests[1], "both runs start from the same weights (same seed)"
    table = (checkpoints / "comparison.md").read_text()
    for name in ("mixup", "no-mixup"):
        history = json.loads((checkpoints / name / "history.json").read_text())["epochs"]
        assert [record["epoch"] for record in history] == [1, 2]
        evaluation = json.loads((checkpoints / name / "evaluation.json").read_text())
        assert f"| {name} | 2 | " in table and f"| {evaluation['heldOutAccuracy']:.4f} |" in table
        assert sorted(path.name for path in (checkpoints / name).glob("ckpt-*.json")) == ["ckpt-000001.json",
                                                                                          "ckpt-000002.json"]
    assert "mixup alpha 0.2" in json.loads((checkpoints / "mixup" / "history.json").read_text())["title"]
    assert "no mixup" in json.loads((checkpoints / "no-mixup" / "history.json").read_text())["title"]
    assert (checkpoints / "comparison.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "MixUp vs no MixUp" in output


def write_digits_like(path: Path, images: np.ndarray, labels: np.ndarray | None) -> None:
    with h5py.File(path, "w") as handle:
        handle["images"] = images
        if labels is not None:
            handle["labels"] = labels


IMAGES = np.zeros((40, 8, 8, 1), np.uint8)
LABELS = np.arange(40) % 10


def write_truncated(path: Path) -> None:
    write_digits_like(path, IMAGES, LABELS)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


BAD_TRAIN_FILES = {
    "truncated": (write_truncated, "not a readable HDF5 file (truncated"),
    "missing dataset": (lambda p: write_digits_like(p, IMAGES, None), "missing dataset"),
    "wrong shape": (lambda p: write_digits_like(p, np.zeros((40, 64), np.uint8), LABELS),
                    "expected shape (N, *, *, *) and dtype uint8, found shape (40, 64) and dtype uint8"),
    "wrong dtype": (lambda p: write_digits_like(p, IMAGES.astype(np.float32), LABELS),
                    "found shape (40, 8, 8, 1) and dtype float32"),
    "labels out of range": (lambda p: write_digits_like(p, IMAGES, LABELS + 5), "labels must lie in [0, 10)"),
    "not found": (lambda p: None, "file not found"),
}


@pytest.mark.parametrize("case", sorted(BAD_TRAIN_FILES))
def test_bad_training_file_gives_one_clear_line(jobs, digits_dir, tmp_path, case):
    data = tmp_path / "data"
    data.mkdir()
    (data / "test.h5").write_bytes((digits_dir / "test.h5").read_bytes())
    make, expected = BAD_TRAIN_FILES[case]
    make(data / "train.h5")

    done = subprocess.run([sys.executable, "-m", "cifar_mixup", "--data-dir", str(data), "--epochs", "1",
                           "--checkpoint-dir", str(tmp_path / "checkpoints")], env=jobs.environment(),
                          capture_output=True, text=True, timeout=120)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"cifar_mixup: error: {data / 'train.h5'}")
    assert expected in lines[0]
    assert "python -m cifar_mixup.convert" in lines[0] or "--num-classes" in lines[0], "the line says how to fix it"
    assert not (tmp_path / "checkpoints").exists()


def test_a_rank_holding_a_gpu_in_a_cpu_image_stops_at_once_with_one_line(jobs, digits_dir, tmp_path):
    """What a pod of a job with gpusPerWorker: 1 and the CPU image gets: the program stops before Horovod starts or
    any data is read, naming the image to use instead; exit code 2 fails the job without a restart."""
    env = {**jobs.environment(), "KUBETRAIN_GPUS_PER_RANK": "1", "KUBETRAIN_IMAGE": "kubetrain/cifar-mixup:0.1.0"}
    done = subprocess.run([sys.executable, *cifar_mixup(digits_dir, tmp_path / "checkpoints", 1)], env=env,
                          capture_output=True, text=True, timeout=120)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr
    assert lines == ["cifar_mixup: error: kubetrain/cifar-mixup:0.1.0 is a CPU image: use "
                     "kubetrain/cifar-mixup:0.1.0-gpu, or set resources.gpusPerWorker: 0 to train on CPUs"], done.stderr
    assert not done.stdout and not (tmp_path / "checkpoints").exists()
