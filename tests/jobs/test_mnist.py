"""mnist as a user runs it: MNIST IDX files -> `python -m mnist.convert` -> `mpirun -np 2 python -m mnist` (as the
launcher starts it), `--strategy mirrored` over two devices of one process, and `--strategy multiworker` with two
workers described by TF_CONFIG.

The images are scikit-learn's real handwritten digits, scaled to MNIST's 28x28 and written in the IDX format.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from trainlib.checkpoints import CheckpointManager, state_digest

pytestmark = pytest.mark.jobs


def mnist(data_dir: Path, checkpoint_dir: Path, epochs: int, *extra: str) -> list[str]:
    return ["-m", "mnist", "--data-dir", str(data_dir), "--checkpoint-dir", str(checkpoint_dir), "--epochs",
            str(epochs), "--batch-size", "32", "--seed", "2", *extra]


def test_trains_with_two_mpi_ranks_and_only_rank0_writes(jobs, mnist_dir, tmp_path):
    checkpoints = tmp_path / "checkpoints"
    done = jobs.run_checked(jobs.launch_command("mpi", mnist(mnist_dir, checkpoints, 2, "--tensorboard-every-steps",
                                                                 "10")), tmp_path)
    output = done.stdout + done.stderr

    records = [json.loads(path.read_text()) for path in sorted(checkpoints.glob("ckpt-*.json"))]
    assert [record["epoch"] for record in records] == [1, 2]
    assert {record["rank"] for record in records} == {0} and len({record["pid"] for record in records}) == 1
    assert {path.name for path in checkpoints.iterdir()} == {"ckpt-000001.h5", "ckpt-000001.json", "ckpt-000002.h5",
                                                              "ckpt-000002.json", "history.json", "history.png",
                                                              "tensorboard"}
    # mpirun tags lines `[jobid,rank]<stream>:`; only rank 0 logs its saves
    assert all(",0]<" in line for line in output.splitlines() if "saved checkpoint" in line)
    assert output.count("saved checkpoint") == 2
    history = json.loads((checkpoints / "history.json").read_text())["epochs"]
    assert history[-1]["val_accuracy"] > 0.5, "the article's CNN learns digits in two epochs (chance is 0.1)"

    # TensorBoard (its own reader): rank 0's event files alone, the values of history.json, the rate every 10 steps
    board = jobs.rank0_tensorboard(tmp_path, checkpoints, history, records[0]["pid"])
    per_epoch = re.search(r"training rows \((\d+) steps\)", output)
    assert per_epoch, output[-3000:]
    rates = board.scalars["step/learning_rate"]
    assert sorted(rates) == list(range(10, 2 * int(per_epoch.group(1)) + 1, 10))
    first, last = rates[min(rates)], rates[max(rates)]
    assert 0.001 < first < 0.002 and last == pytest.approx(0.002), "warmed up from one rank's rate to 2 ranks'"
    assert board.graph, "the model's graph"


def test_killed_mpi_run_resumes_with_rank0_weights(jobs, mnist_dir, tmp_path):
    checkpoints = tmp_path / "checkpoints"
    manager = CheckpointManager(str(checkpoints))
    first = subprocess.Popen(jobs.launch_command("mpi", mnist(mnist_dir, checkpoints, 30)), cwd=tmp_path,
                             env=jobs.environment(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    jobs.kill_when(first, lambda: manager.latest() is not None, str(checkpoints))
    latest = manager.latest()
    assert latest is not None
    saved, _ = manager.load(latest)

    done = jobs.run_checked(jobs.launch_command("mpi", mnist(mnist_dir, checkpoints, latest.epoch + 1)), tmp_path)
    output = done.stdout + done.stderr
    assert f"restored {latest.path} (epoch {latest.epoch}" in output
    assert (f"training starts at epoch {latest.epoch + 1} with weights digest {state_digest(saved['model'])} "
            "on all 2 ranks") in output
    resumed = manager.latest()
    assert resumed is not None and resumed.epoch == latest.epoch + 1


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


def run_multiworker(jobs, mnist_dir: Path, checkpoints: Path, epochs: int, cwd: Path) -> list[str]:
    """Start two workers with TF_CONFIG (worker 0 is the chief); returns each worker's output."""
    ports = free_ports(2)
    cluster = {"worker": [f"localhost:{port}" for port in ports]}
    workers = []
    for index in range(2):
        env = {**jobs.environment(), "TF_CONFIG": json.dumps({"cluster": cluster,
                                                              "task": {"type": "worker", "index": index}})}
        workers.append(subprocess.Popen([sys.executable, *mnist(mnist_dir, checkpoints, epochs, "--strategy",
                                                                "multiworker")],
                                        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True))
    outputs = [worker.communicate(timeout=300)[0] for worker in workers]
    for worker, output in zip(workers, outputs, strict=True):
        assert worker.returncode == 0, output[-4000:]
    return outputs


def test_multiworker_strategy_from_tf_config_checkpoints_from_chief_and_resumes(jobs, mnist_dir, tmp_path):
    checkpoints = tmp_path / "checkpoints"
    chief, other = run_multiworker(jobs, mnist_dir, checkpoints, 1, tmp_path)
    assert "multiworker with 2 workers (this is the chief)" in chief
    assert "saved checkpoint" in chief and "saved checkpoint" not in other
    record = json.loads((checkpoints / "ckpt-000001.json").read_text())
    assert record["rank"] == 0 and record["metrics"]["val_accuracy"] > 0.3

    chief, other = run_multiworker(jobs, mnist_dir, checkpoints, 2, tmp_path)
    assert "training starts at epoch 2" in chief
    assert "Epoch 2/2" in chief and "Epoch 1/2" not in chief
    assert sorted(path.name for path in checkpoints.glob("ckpt-*.json")) == ["ckpt-000001.json", "ckpt-000002.json"]


def test_mirrored_strategy_takes_one_batch_per_replica_and_resumes(jobs, mnist_dir, tmp_path):
    checkpoints = tmp_path / "checkpoints"
    mirrored = ("--strategy", "mirrored", "--replicas", "2")
    done = jobs.run_checked([sys.executable, *mnist(mnist_dir, checkpoints, 2, *mirrored)], tmp_path)
    output = done.stdout + done.stderr
    # 1,400 training rows, 32 per replica on 2 CPU devices: a global batch of 64, 21 steps per epoch
    assert "mirrored with 2 replicas on /job:localhost/replica:0/task:0/device:CPU:0" in output
    assert "global batch 64 (32 per replica), learning rate 0.002" in output and "(21 steps)" in output
    records = [json.loads(path.read_text()) for path in sorted(checkpoints.glob("ckpt-*.json"))]
    assert [record["epoch"] for record in records] == [1, 2]
    assert records[-1]["metrics"]["val_accuracy"] > 0.5, "the article's CNN learns digits in two epochs"

    done = jobs.run_checked([sys.executable, *mnist(mnist_dir, checkpoints, 3, *mirrored)], tmp_path)
    assert "training starts at epoch 3" in done.stdout + done.stderr
    assert json.loads((checkpoints / "ckpt-000003.json").read_text())["epoch"] == 3


@pytest.mark.parametrize("problem", ["truncated", "no TF_CONFIG"])
def test_bad_input_gives_one_clear_line(jobs, mnist_dir, tmp_path, problem):
    data = tmp_path / "data"
    data.mkdir()
    for name in ("train.h5", "test.h5"):
        (data / name).write_bytes((mnist_dir / name).read_bytes())
    env = jobs.environment()
    env.pop("TF_CONFIG", None)
    extra = ["--strategy", "multiworker"] if problem == "no TF_CONFIG" else []
    if problem == "truncated":
        content = (data / "test.h5").read_bytes()
        (data / "test.h5").write_bytes(content[: len(content) // 3])
    done = subprocess.run([sys.executable, "-m", "mnist", "--data-dir", str(data), *extra], env=env,
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    if problem == "truncated":
        assert lines[0].startswith(f"mnist: error: {os.path.join(data, 'test.h5')}: not a readable HDF5 file "
                                   "(truncated:")
        assert "python -m mnist.convert" in lines[0]
    else:
        assert lines[0].startswith("mnist: error: --strategy multiworker needs TF_CONFIG")
