"""ucluster under `horovodrun -np 2` on small synthetic jets: trains, checkpoints from rank 0 only, resumes after
kill -9, and turns a mis-shaped file into one error line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from trainlib.checkpoints import CheckpointManager, state_digest

pytestmark = pytest.mark.jobs

TINY_NETWORK = ["--batch-size", "16", "--neighbors", "4", "--edge-widths", "4,8", "--conv-widths", "8,8,16,16",
                "--dense-widths", "16,16", "--kmeans-samples", "200", "--seed", "3"]


def ucluster(*args: str) -> list[str]:
    return ["-m", "ucluster", *args]


@pytest.fixture(scope="module")
def jets(jobs, tmp_path_factory) -> Path:
    data = tmp_path_factory.mktemp("jets")
    jobs.run_checked([sys.executable, "-m", "ucluster.synthetic", str(data), "--train-jets", "128", "--test-jets",
                      "48", "--files", "2"], data, timeout=120)
    return data


def test_trains_two_epochs_with_gloo_and_only_rank0_checkpoints(jobs, jets, tmp_path):
    checkpoints = tmp_path / "ckpt"
    done = jobs.run_checked(jobs.launch_command("gloo", ucluster(
        "--data-dir", str(jets), "--checkpoint-dir", str(checkpoints), "--epochs", "2", "--epochs-pretrain", "1",
        "--tensorboard-every-steps", "2", *TINY_NETWORK)), tmp_path)
    output = done.stdout + done.stderr

    records = [json.loads(path.read_text()) for path in sorted(checkpoints.glob("ckpt-*.json"))]
    assert [record["epoch"] for record in records] == [1, 2]
    assert {record["rank"] for record in records} == {0} and len({record["pid"] for record in records}) == 1
    assert sorted(path.name for path in checkpoints.iterdir()) == [
        "ckpt-000001.h5", "ckpt-000001.json", "ckpt-000002.h5", "ckpt-000002.json", "history.json", "history.png",
        "tensorboard"]
    saves = [line for line in output.splitlines() if "saved " in line and "ckpt-" in line]
    assert len(saves) == 2 and all(jobs.is_rank0_line(line) for line in saves)

    history = json.loads((checkpoints / "history.json").read_text())["epochs"]
    assert [record["epoch"] for record in history] == [1, 2]
    assert "kmeans_loss" not in history[0] and "kmeans_loss" in history[1]  # epoch 1 pretrains, epoch 2 clusters
    for record in history:  # centroids exist from the end of pretraining on: both epochs score the clustering
        assert 1 / 3 <= record["val_cluster_accuracy"] <= 1.0
    assert history[1]["alpha"] == 2.0

    state, names = CheckpointManager(str(checkpoints)).load(CheckpointManager(str(checkpoints)).latest())
    centroids = [array for array, name in zip(state["model"], names["model"], strict=True) if "centroids" in name]
    assert len(centroids) == 1 and centroids[0].shape == (3, 3) and np.any(centroids[0] != 0)
    assert "k-means on 128 embeddings" in output  # both ranks' 64 jets each, fitted once on rank 0

    # TensorBoard (its own reader): rank 0's event files alone, every value of history.json (kmeans_loss from epoch 2
    # only, as there), the rate every 2 steps
    board = jobs.rank0_tensorboard(tmp_path, checkpoints, history, records[0]["pid"])
    rates = board.scalars["step/learning_rate"]
    assert sorted(rates) == [2, 4, 6, 8], "64 jets per rank in batches of 16: 4 steps an epoch"
    assert rates == pytest.approx({2: history[0]["learning_rate"], 4: history[0]["learning_rate"],
                                   6: history[1]["learning_rate"], 8: history[1]["learning_rate"]}, rel=1e-6)
    assert board.graph, "the model's graph"


def test_killed_after_a_checkpoint_resumes_at_the_next_epoch_with_rank0_weights(jobs, jets, tmp_path):
    checkpoints = tmp_path / "ckpt"
    command = jobs.launch_command("mpi", ucluster(
        "--data-dir", str(jets), "--checkpoint-dir", str(checkpoints), "--epochs", "3", "--epochs-pretrain", "1",
        *TINY_NETWORK))
    first = jobs.start_job(command, tmp_path, log=tmp_path / "first.log")
    jobs.kill_when(first, (checkpoints / "ckpt-000001.json").exists, str(checkpoints), log=tmp_path / "first.log",
                   interval=0.1)

    manager = CheckpointManager(str(checkpoints))
    latest = manager.latest()
    assert latest is not None and latest.epoch < 3, "the first run finished before it was killed"
    state, _ = manager.load(latest)
    saved_digest = state_digest(state["model"])

    done = jobs.run_checked(command, tmp_path)
    output = done.stdout + done.stderr
    assert f"restored {latest.path} (epoch {latest.epoch}" in output
    started = re.search(r"training starts at epoch (\d+) with weights digest (\w+) on all 2 ranks", output)
    assert started and int(started.group(1)) == latest.epoch + 1
    assert started.group(2) == saved_digest
    history = json.loads((checkpoints / "history.json").read_text())["epochs"]
    assert [record["epoch"] for record in history] == [1, 2, 3]
    assert manager.latest().epoch == 3


def test_mis_shaped_file_is_one_error_line(jobs, tmp_path):
    with h5py.File(tmp_path / "jets.h5", "w") as handle:
        handle["data"] = np.zeros((10, 50, 8), np.float32)
        handle["pid"] = np.zeros(10, np.int32)
        handle["label"] = np.eye(3, dtype=np.uint8)[np.zeros(10, int)]
    for name in ("train_files.txt", "test_files.txt"):
        (tmp_path / name).write_text("jets.h5\n")
    done = subprocess.run([sys.executable, "-m", "ucluster", "--data-dir", str(tmp_path), "--checkpoint-dir",
                           str(tmp_path / "ckpt")], cwd=tmp_path, env=jobs.environment(), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"ucluster: error: {tmp_path / 'jets.h5'}:data: expected shape (N, 100, 8)")
    assert "found shape (10, 50, 8)" in lines[0]
    assert not (tmp_path / "ckpt").exists()
