"""mnist under elastic Horovod (`horovodrun -np 2 --min-np 1 --max-np 2 --host-discovery-script ... --gloo`), on two
hosts that are both this machine: a run without failures trains, checkpoints on rank 0 and evaluates; a data file
that breaks in the middle of training fails the run.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from trainlib.checkpoints import CheckpointManager

pytestmark = pytest.mark.jobs

HOSTS = ["127.0.0.1:1", "localhost:1"]


def elastic_mnist(jobs, directory: Path, data_dir: Path, checkpoint_dir: Path, epochs: int) -> list[str]:
    discovery = jobs.write_discovery_script(directory, HOSTS)
    program = ["-m", "mnist", "--data-dir", str(data_dir), "--checkpoint-dir", str(checkpoint_dir), "--epochs",
               str(epochs), "--batch-size", "32", "--seed", "2"]
    return jobs.horovodrun_elastic_command(discovery, program, np=2, min_np=1, max_np=2)


def test_elastic_run_trains_checkpoints_on_rank0_and_evaluates(jobs, mnist_dir, tmp_path):
    checkpoints = tmp_path / "checkpoints"
    done = jobs.run_checked(elastic_mnist(jobs, tmp_path, mnist_dir, checkpoints, 2), tmp_path)
    output = done.stdout + done.stderr

    # 1,400 training rows: 700 per rank, 21 steps of 32
    assert "rank0 INFO trainlib.elastic: 2 ranks train from epoch 1, step 0 of 21" in output
    records = [json.loads(path.read_text()) for path in sorted(checkpoints.glob("ckpt-*.json"))]
    assert [record["epoch"] for record in records] == [1, 2]
    assert {record["rank"] for record in records} == {0} and len({record["pid"] for record in records}) == 1
    accuracy = re.search(r"rank0 INFO mnist: held-out accuracy (\d\.\d{4}), loss", output)
    assert accuracy and float(accuracy.group(1)) > 0.5, "the article's CNN learns digits in two epochs (chance: 0.1)"


def test_data_file_that_breaks_mid_run_fails_the_elastic_run(jobs, mnist_dir, tmp_path):
    """Horovod's elastic wrapper swallows TensorFlow's UnknownError unless a Horovod op raised it; a reader's OSError
    arrives as one. The run must fail, not end as if it had trained."""
    data = tmp_path / "data"
    data.mkdir()
    for name in ("train.h5", "test.h5"):
        (data / name).write_bytes((mnist_dir / name).read_bytes())
    checkpoints = tmp_path / "checkpoints"
    log = tmp_path / "job.log"
    job = jobs.start_job(elastic_mnist(jobs, tmp_path, data, checkpoints, 30), tmp_path, log)
    manager = CheckpointManager(str(checkpoints))
    jobs.wait_until(job, lambda: manager.latest() is not None, log=log, interval=0.05)
    broken = data / "train.h5.new"
    broken.write_bytes(b"not HDF5 " * 1000)
    broken.replace(data / "train.h5")  # the next pass over the data opens this
    job.wait(timeout=300)
    output = log.read_text()

    assert job.returncode != 0, output[-4000:]
    assert "file signature not found" in output, output[-4000:]
    assert "held-out accuracy" not in output
    latest = manager.latest()
    assert latest is not None and latest.epoch < 30
