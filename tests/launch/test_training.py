"""A real Horovod program (cifar_mixup on scikit-learn's digits) trained across two worker hosts by the launcher.

The pods, Secret, hostfile and environment are the operator's (kubetrain.manifests); the checkpoint claim is one folder
every host shares, like a ReadWriteMany volume.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest

from tests.support.job_on_hosts import JobOnHosts, job_body

pytestmark = pytest.mark.launch

PROGRAM = ["python", "-m", "cifar_mixup"]


def start_job(deploy, digits: Path, name: str, epochs: int) -> JobOnHosts:
    cluster = deploy(job_body(name, [*PROGRAM, "--epochs", str(epochs), "--seed", "1"], wait_seconds=60))
    for path in digits.iterdir():
        shutil.copy(path, cluster.data_dir)
    return cluster


def start_workers(cluster: JobOnHosts) -> None:
    for index in range(len(cluster.worker_hosts)):
        cluster.start_worker(index).wait_for_log("Server listening")


def records(cluster: JobOnHosts) -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted(cluster.checkpoint_dir.glob("ckpt-*.json"))]


def test_training_across_two_hosts_checkpoints_from_rank_0_only(deploy, digits):
    cluster = start_job(deploy, digits, "digits", epochs=2)
    start_workers(cluster)
    launcher = cluster.start_launcher()
    assert launcher.wait(timeout=400) == 0, launcher.log()
    log = launcher.log()
    assert "training starts at epoch 1 with weights digest" in log and "on all 2 ranks" in log, log
    saved = records(cluster)
    assert [record["epoch"] for record in saved] == [1, 2]
    # rank 0 runs on worker 0 (hostfile order); it alone writes, into the job's folder on the shared claim
    assert {(record["rank"], record["host"]) for record in saved} == {(0, "digits-worker-0")}
    names = {path.name for path in cluster.checkpoint_dir.iterdir()}
    assert {"ckpt-000001.h5", "ckpt-000002.h5", "history.json", "evaluation.json"} <= names
    assert not [name for name in names if name.endswith(".tmp")]
    evaluation = json.loads((cluster.checkpoint_dir / "evaluation.json").read_text())
    assert evaluation["epochs"] == 2 and evaluation["heldOutImages"] == 360


def test_worker_killed_mid_training_fails_the_launcher_and_the_restart_resumes(deploy, digits, network):
    cluster = start_job(deploy, digits, "resume", epochs=6)
    start_workers(cluster)
    launcher = cluster.start_launcher()
    deadline = time.monotonic() + 300
    while not records(cluster):
        assert launcher.process.poll() is None, launcher.log()
        assert time.monotonic() < deadline, f"no checkpoint after 300s:\n{launcher.log()}"
        time.sleep(0.2)

    network.kill_host(cluster.worker_hosts[1])  # the node lost worker 1: sshd, orted and rank 1 die at once
    code = launcher.wait(timeout=120)
    assert code != 0, launcher.log()
    reached = max(record["epoch"] for record in records(cluster))
    assert reached < 6, "training finished before the worker was killed; nothing to resume"
    # mpirun takes rank 0 down with it: nothing but sshd is left on worker 0
    sshd = cluster.workers[0].process
    deadline = time.monotonic() + 30
    while len(network.pids(cluster.worker_hosts[0])) > 1:
        assert time.monotonic() < deadline, "rank 0 outlived the failed launcher"
        time.sleep(0.2)
    assert sshd.poll() is None

    # the operator restarts the whole job: fresh workers (new host keys) and a new launcher, same checkpoint claim
    network.kill_host(cluster.worker_hosts[0])
    start_workers(cluster)
    relaunch = cluster.start_launcher()
    assert relaunch.wait(timeout=400) == 0, relaunch.log()
    log = relaunch.log()
    restored = re.search(r"restored \S+ckpt-(\d+)\.h5 \(epoch (\d+)", log)
    assert restored, log
    resumed_from = int(restored.group(2))
    assert resumed_from == reached >= 1
    assert f"training starts at epoch {resumed_from + 1} with weights digest" in log
    assert max(record["epoch"] for record in records(cluster)) == 6
    assert {record["host"] for record in records(cluster)} == {"resume-worker-0"}
