"""A real Horovod job across containers of the cifar_mixup image, laid out as the operator lays it out: two worker
containers running the worker entrypoint (sshd), one launcher container running mpirun over ssh, a read-only data
volume of digits HDF5 and a checkpoint volume that rank 0 alone writes. Then the failures a user meets: a worker
lost mid-training (the restart resumes from the checkpoint) and a worker whose sshd never starts."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest
from docker_pods import DockerJob

from cifar_mixup.demo import DIGITS_FLAGS
from tests.support.job_on_hosts import job_body

# The demo's batch and learning rate for the digits, with no warm-up: with the notebook's (batch 32, learning rate 0.1
# warmed up over 3 epochs) a run of 1 or 2 epochs on the digits can end at chance, one class for every image.
PROGRAM = ["python", "-m", "cifar_mixup", *DIGITS_FLAGS, "--warmup-epochs", "0"]


def start_job(on_docker, images, digits: Path, name: str, epochs: int, wait_seconds: int = 120) -> DockerJob:
    body = job_body(name, [*PROGRAM, "--epochs", str(epochs), "--seed", "1"], wait_seconds=wait_seconds)
    body["spec"]["image"] = images["cifar_mixup"]
    job = on_docker(body)
    for path in digits.iterdir():  # file by file: copytree would give the claim the source folder's 0700 mode
        shutil.copy(path, job.data_dir)
    return job


def start_workers(job: DockerJob) -> None:
    for index in range(job.job.spec.workers):
        job.start_worker(index).wait_for_log("Server listening")


def epochs_saved(job: DockerJob) -> list[int]:
    return [json.loads(path.read_text())["epoch"] for path in sorted(job.checkpoint_dir.glob("ckpt-*.json"))]


def test_two_worker_containers_train_and_rank_0_writes_the_results(on_docker, images, digits):
    job = start_job(on_docker, images, digits, "digits", epochs=3)
    start_workers(job)
    launcher = job.start_launcher()
    code = launcher.wait(timeout=900)
    log = launcher.logs()
    assert code == 0, log
    assert "on all 2 ranks" in log, log
    accuracy = re.search(r"held-out accuracy (\d\.\d+)", log)
    assert accuracy and float(accuracy.group(1)) > 0.1, log  # better than chance on 10 classes
    names = {path.name for path in job.checkpoint_dir.iterdir()}
    expected = {"ckpt-000001.h5", "ckpt-000002.h5", "ckpt-000003.h5", "history.json", "history.png", "evaluation.json"}
    assert expected <= names, names
    assert not [name for name in names if name.endswith(".tmp")]
    records = [json.loads(p.read_text()) for p in sorted(job.checkpoint_dir.glob("ckpt-*.json"))]
    assert {(record["rank"], record["host"]) for record in records} == {(0, "digits-worker-0")}
    evaluation = json.loads((job.checkpoint_dir / "evaluation.json").read_text())
    assert evaluation["epochs"] == 3 and evaluation["heldOutImages"] == 360
    assert abs(evaluation["heldOutAccuracy"] - float(accuracy.group(1))) < 1e-4


def test_lost_worker_fails_the_launcher_naming_it_and_the_restart_resumes(on_docker, images, digits):
    epochs = 5
    job = start_job(on_docker, images, digits, "resume", epochs=epochs)
    start_workers(job)
    launcher = job.start_launcher()
    deadline = time.monotonic() + 600
    while not epochs_saved(job):  # epoch 1 saved: epoch 2 is under way
        assert launcher.running(), launcher.logs()
        assert time.monotonic() < deadline, f"no checkpoint after 600 s:\n{launcher.logs()}"
        time.sleep(0.5)
    job.workers[1].kill()
    code = launcher.wait(timeout=180)
    log = launcher.logs()
    assert code != 0, log
    assert "resume-worker-1.resume.team.svc" in log.split("all hosts ready")[-1], log  # mpirun names the lost host
    reached = max(epochs_saved(job))
    assert reached < epochs, "training finished before the worker was lost; nothing to resume"

    # what the operator does next: the whole job again, fresh workers (new host keys), same checkpoint volume
    job.workers[0].kill()
    start_workers(job)
    relaunch = job.start_launcher()
    assert relaunch.wait(timeout=900) == 0, relaunch.logs()
    log = relaunch.logs()
    restored = re.search(r"restored \S+ckpt-(\d+)\.h5 \(epoch (\d+)", log)
    assert restored, log
    assert int(restored.group(2)) == reached >= 1
    assert f"training starts at epoch {reached + 1} with weights digest" in log
    assert max(epochs_saved(job)) == epochs


def test_launcher_gives_up_on_a_worker_whose_sshd_never_starts(on_docker, images):
    wait_seconds = 15
    job = on_docker(job_body("nossh", ["hostname"], wait_seconds=wait_seconds))  # image: kubetrain/base
    job.start_worker(0).wait_for_log("Server listening")
    job.start_worker(1, command=["sleep", "infinity"])  # the pod runs and its name resolves, but nothing listens
    started = time.monotonic()
    launcher = job.start_launcher()
    code = launcher.wait(timeout=wait_seconds + 60)
    elapsed = time.monotonic() - started
    log = launcher.logs()
    assert code == 3, log
    assert "giving up on worker(s) nossh-worker-1.nossh.team.svc after 15s" in log, log
    assert "nossh-worker-0" not in log.split("giving up")[1], log
    assert elapsed < wait_seconds + 30, f"the launcher took {elapsed:.0f} s for a {wait_seconds} s bound"


ARBITRARY_UID = {"spec": {"securityContext": {"runAsUser": 1000650000, "runAsGroup": 0, "fsGroup": 0}}}


@pytest.mark.parametrize(("pod_template", "user"), [({}, "1000:1000"), (ARBITRARY_UID, "1000650000:0")],
                         ids=["uid-1000", "arbitrary-uid-gid-0"])
def test_worker_sshd_accepts_the_jobs_key_on_a_read_only_root_under_any_uid(on_docker, pod_template, user):
    command = ["sh", "-c", 'echo "rank on $(hostname) as $(id -u):$(id -g)"']
    job = on_docker(job_body("anyuid", command, pod_template=pod_template))  # image: kubetrain/base
    start_workers(job)
    launcher = job.start_launcher()
    assert launcher.wait(timeout=120) == 0, launcher.logs()
    log = launcher.logs()
    for index in range(2):
        assert f"rank on anyuid-worker-{index} as {user}" in log, log


def test_launcher_as_a_worker_runs_rank_0_with_open_mpi_4(on_docker):
    """launcher.runAsWorker with kubetrain's own image (Open MPI 4): the launcher's line of the hostfile runs here."""
    command = ["sh", "-c", 'echo "rank $OMPI_COMM_WORLD_RANK of $OMPI_COMM_WORLD_SIZE on $(hostname)"']
    body = job_body("both", command, workers=1)  # image: kubetrain/base
    body["spec"]["launcher"]["runAsWorker"] = True
    job = on_docker(body)
    start_workers(job)
    launcher = job.start_launcher()
    assert launcher.wait(timeout=120) == 0, launcher.logs()
    log = launcher.logs()
    assert "(openmpi4)" in log, log
    assert "rank 0 of 2 on both-launcher" in log and "rank 1 of 2 on both-worker-0" in log, log
