"""higgs under `horovodrun` on a synthetic challenge CSV converted to HDF5: the allreduce trainer clearly beats a
constant predictor, the comparison runs all seven trainers (the notebook's five, parameter server included, and ours)
with its table, charts and improvement lines, the EASGD trainers stay stable at 8 ranks with the notebook's
parameters, a killed EASGD run resumes with rank 0's weights, and bad input is one error line."""

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
    done = jobs.run_checked(jobs.launch_command("mpi", higgs(
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


ALL_TRAINERS = ["single", "easgd", "async-easgd", "async-eamsgd", "downpour", "allreduce", "model-averaging"]


def test_compare_runs_all_seven_trainers_and_prints_the_notebooks_table_charts_and_lines(jobs, events, tmp_path):
    checkpoints = tmp_path / "ckpt"
    done = jobs.run_checked(jobs.launch_command("mpi", higgs(
        "--data-dir", str(events), "--checkpoint-dir", str(checkpoints), "--compare", "--epochs", "2",
        *SMALL_NETWORK)), tmp_path)
    results = json.loads((checkpoints / "compare.json").read_text())
    assert [result["trainer"] for result in results] == ALL_TRAINERS
    assert [result["workers"] for result in results] == [1, 2, 1, 1, 1, 2, 2]  # rank 0 serves the async ones
    baseline = constant_predictor_f1(events)
    for result in results:
        assert result["f1"] <= 1.0 and result["seconds"] > 0, result
        if result["trainer"] != "easgd":  # dist-keras's EASGD moves its workers by lr x their steps: slow to learn
            assert result["f1"] > baseline, (result, baseline)
    row = re.compile(r"\[1,0\]<stdout>:([a-z-]+)\s+[12]\s+0\.\d{4}\s")
    assert [row.match(line).group(1) for line in done.stdout.splitlines() if row.match(line)] == ALL_TRAINERS
    assert "[1,0]<stdout>:Number of parallel workers: 1" in done.stdout
    single, aeasgd = results[0]["seconds"], results[2]["seconds"]
    improvement = re.search(r"Improvement using AEASGD: ([\d.]+) %", done.stdout)
    assert improvement and float(improvement.group(1)) == pytest.approx(single / aeasgd * 100, abs=0.06)
    assert (checkpoints / "compare.png").stat().st_size > 10_000
    for trainer in ALL_TRAINERS:
        assert (checkpoints / trainer / "ckpt-000002.h5").exists()
    easgd = CheckpointManager(str(checkpoints / "easgd"))
    state, _ = easgd.load(easgd.latest())
    assert len(state["center"]) == len(state["model"])  # EASGD checkpoints its centre variable too


def test_the_easgd_trainers_stay_stable_at_eight_ranks_with_the_notebooks_parameters(jobs, events, tmp_path):
    checkpoints = tmp_path / "ckpt"
    trainers = ["easgd", "async-easgd", "async-eamsgd"]
    jobs.run_checked(jobs.launch_command("mpi", higgs(
        "--data-dir", str(events), "--checkpoint-dir", str(checkpoints), "--compare", "--trainers", ",".join(trainers),
        "--epochs", "3", *SMALL_NETWORK), np=8), tmp_path, timeout=1200)
    results = {result["trainer"]: result for result in json.loads((checkpoints / "compare.json").read_text())}
    assert [results[name]["workers"] for name in trainers] == [8, 7, 7]
    for name in trainers:
        epochs = json.loads((checkpoints / name / "history.json").read_text())["epochs"]
        losses = [record["loss"] for record in epochs]
        assert all(np.isfinite(losses)) and losses[0] > losses[1] > losses[2], (name, losses)
        assert epochs[-1]["val_loss"] < epochs[0]["val_loss"], (name, epochs)
    baseline = constant_predictor_f1(events)
    assert results["async-easgd"]["f1"] > baseline and results["async-eamsgd"]["f1"] > baseline


def test_parameter_server_trainers_under_gloo_are_refused_before_any_training(jobs, events, tmp_path):
    done = subprocess.run(jobs.launch_command("gloo", higgs(
        "--data-dir", str(events), "--checkpoint-dir", str(tmp_path / "ckpt"), "--compare", *SMALL_NETWORK)),
        cwd=tmp_path, env=jobs.environment(), capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "higgs: error: --trainer async-easgd exchanges with its parameter server over MPI; this job runs Horovod " \
        "on Gloo: launch it with mpirun or `horovodrun --mpi`" in done.stderr
    assert not (tmp_path / "ckpt").exists()


@pytest.mark.parametrize(("controller", "trainer"), [("gloo", "easgd"), ("mpi", "async-easgd")])
def test_killed_run_resumes_at_the_next_epoch_with_rank0_weights(jobs, events, tmp_path, controller, trainer):
    """EASGD resumes its workers and centre; a parameter-server trainer its centre, where every worker goes on."""
    checkpoints = tmp_path / "ckpt"
    command = jobs.launch_command(controller, higgs(
        "--data-dir", str(events), "--checkpoint-dir", str(checkpoints), "--trainer", trainer, "--epochs", "6",
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
