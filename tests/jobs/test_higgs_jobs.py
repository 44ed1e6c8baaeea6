"""higgs under `horovodrun -np 2` on a synthetic challenge CSV converted to HDF5: the allreduce trainer clearly beats a
constant predictor, the comparison runs all four trainers, a killed EASGD run resumes with rank 0's weights, and bad
input is one error line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from sklearn.metrics import f1_score

from trainlib.checkpoints import CheckpointManager, state_digest

pytestmark = pytest.mark.jobs

SMALL_NETWORK = ["--hidden-units", "64", "--seed", "2"]


def higgs(*args: str) -> list[str]:
    return ["-m", "higgs", *args]


@pytest.fixture(scope="module")
def events(jobs, tmp_path_factory) -> Path:
    """A synthetic training.csv in the challenge format, converted by the program's own converter."""
    folder = tmp_path_factory.mktemp("higgs")
    for command in (["higgs.synthetic", str(folder / "training.csv"), "--events", "6000", "--seed", "7"],
                    ["higgs.convert", str(folder / "training.csv"), str(folder / "data")]):
        jobs.run_checked([sys.executable, "-m", *command], folder, timeout=120)
    return folder / "data"


def constant_predictor_f1(data: Path) -> float:
    """The notebook's (weighted) F1 of always answering the majority class on the test split."""
    with h5py.File(data / "test.h5") as handle:
        labels = handle["label"][()]
    majority = np.bincount(labels).argmax()
    return float(f1_score(labels, np.full_like(labels, majority), average="weighted"))


def test_allreduce_clearly_beats_a_constant_predictor_with_mpi(jobs, events, tmp_path):
    checkpoints = tmp_path / "ckpt"
    done = jobs.run_checked(jobs.horovodrun_command("mpi", higgs(
        "--data-dir", str(events), "--checkpoint-dir", str(checkpoints), "--trainer", "allreduce", "--epochs", "3",
        *SMALL_NETWORK)), tmp_path)
    result = json.loads((checkpoints / "result.json").read_text())
    baseline = constant_predictor_f1(events)
    assert result["trainer"] == "allreduce" and result["ranks"] == 2
    assert result["f1"] > baseline + 0.1, (result, baseline)

    records = [json.loads(path.read_text()) for path in sorted(checkpoints.glob("ckpt-*.json"))]
    assert [record["epoch"] for record in records] == [1, 2, 3]
    assert {record["rank"] for record in records} == {0} and len({record["pid"] for record in records}) == 1
    saves = [line for line in (done.stdout + done.stderr).splitlines() if "saved " in line and "ckpt-" in line]
    assert len(saves) == 3 and all(jobs.is_rank0_line(line) for line in saves)
    assert "scaling from 2 ranks' partial sums" in done.stderr


def test_compare_runs_each_trainer_and_charts_them_with_gloo(jobs, events, tmp_path):
    checkpoints = tmp_path / "ckpt"
    done = jobs.run_checked(jobs.horovodrun_command("gloo", higgs(
        "--data-dir", str(events), "--checkpoint-dir", str(checkpoints), "--compare", "--epochs", "1",
        "--communication-window", "5", *SMALL_NETWORK)), tmp_path)
    results = json.loads((checkpoints / "compare.json").read_text())
    assert [result["trainer"] for result in results] == ["single", "allreduce", "easgd", "model-averaging"]
    assert [result["ranks"] for result in results] == [1, 2, 2, 2]
    baseline = constant_predictor_f1(events)
    for result in results:
        assert baseline < result["f1"] <= 1.0 and result["seconds"] > 0, result
    row = re.compile(r"\[0\]<stdout>:(single|allreduce|easgd|model-averaging)\s+[12]\s+0\.\d{4}\s")
    table = [line for line in done.stdout.splitlines() if row.match(line)]
    assert len(table) == 4
    assert (checkpoints / "compare.png").stat().st_size > 10_000
    for trainer in ("single", "allreduce", "easgd", "model-averaging"):
        assert (checkpoints / trainer / "ckpt-000001.h5").exists()
    easgd = CheckpointManager(str(checkpoints / "easgd"))
    state, _ = easgd.load(easgd.latest())
    assert len(state["center"]) == len(state["model"])  # EASGD checkpoints its centre variable too


def test_killed_easgd_run_resumes_at_the_next_epoch_with_rank0_weights(jobs, events, tmp_path):
    checkpoints = tmp_path / "ckpt"
    command = jobs.horovodrun_command("gloo", higgs(
        "--data-dir", str(events), "--checkpoint-dir", str(checkpoints), "--trainer", "easgd", "--epochs", "6",
        "--batch-size", "16", *SMALL_NETWORK))
    first = jobs.start_job(command, tmp_path, log=tmp_path / "first.log")
    jobs.kill_when(first, (checkpoints / "ckpt-000001.json").exists, str(checkpoints), log=tmp_path / "first.log",
                   interval=0.05)

    manager = CheckpointManager(str(checkpoints))
    latest = manager.latest()
    assert latest is not None and latest.epoch < 6, "the first run finished before it was killed"
    state, _ = manager.load(latest)

    done = jobs.run_checked(command, tmp_path)
    started = re.search(r"training starts at epoch (\d+) with weights digest (\w+) on all 2 ranks", done.stderr)
    assert started and int(started.group(1)) == latest.epoch + 1
    assert started.group(2) == state_digest(state["model"])
    history = json.loads((checkpoints / "history.json").read_text())["epochs"]
    assert [record["epoch"] for record in history] == [1, 2, 3, 4, 5, 6]


def test_missing_training_file_is_one_error_line(jobs, tmp_path):
    done = subprocess.run([sys.executable, "-m", "higgs", "--data-dir", str(tmp_path), "--checkpoint-dir",
                           str(tmp_path / "ckpt")], cwd=tmp_path, env=jobs.environment(), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"higgs: error: {tmp_path / 'train.h5'}: file not found; convert the challenge CSV with "
        "`python -m higgs.convert training.csv <data dir>`"]
