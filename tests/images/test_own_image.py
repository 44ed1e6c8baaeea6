"""A user's own image, not built FROM kubetrain/base (tests/images/byo: a Python image with sshd and an MPI from PyPI
or Debian, no kubetrain user, no nss_wrapper), run through the operator's own pod objects with the entrypoints its init
container copies in: each MPI the operator supports (Open MPI 4 and 5, MPICH, Intel MPI), as root, as uid 1000
without a passwd entry and as an arbitrary uid; the launcher as a worker; and the one-line messages for what such an
image may lack."""

from __future__ import annotations

import re
import time

import pytest

from tests.images.byo.tags import byo_image
from tests.support.job_on_hosts import job_body

ALLREDUCE = ["python", "/opt/byo/allreduce.py"]
# Each image's MPI (also what the launcher calls it): spec.mpi.implementation and the library's own words
MPIS = {"openmpi4": ("OpenMPI", "Open MPI v4.1"), "openmpi5": ("OpenMPI", "Open MPI v5.0.11"),
        "mpich": ("MPICH", "MPICH Version:"), "intelmpi": ("IntelMPI", "Intel(R) MPI Library 2021.14")}


def own_job(name: str, mpi: str, ranks_per_pod: int, *, workers: int = 2, run_as_user: int | None = None,
            launcher_runs_ranks: bool = False, wait_seconds: int = 60) -> dict:
    total = (workers + (1 if launcher_runs_ranks else 0)) * ranks_per_pod
    body = job_body(name, [*ALLREDUCE, str(total)], workers=workers, wait_seconds=wait_seconds)
    spec = body["spec"]
    spec.update(image=byo_image(mpi), slotsPerWorker=ranks_per_pod, mpi={"implementation": MPIS[mpi][0]})
    spec["launcher"]["runAsWorker"] = launcher_runs_ranks
    if run_as_user is not None:
        spec["runAsUser"] = run_as_user
    return body


def run_to_end(job, timeout: float = 180) -> tuple[int, str]:
    for index in range(job.job.spec.workers):
        job.start_worker(index).wait_for_log("Server listening")
    launcher = job.start_launcher()
    return launcher.wait(timeout=timeout), launcher.logs()


@pytest.mark.parametrize(("mpi", "user", "ranks_per_pod"), [
    ("openmpi4", 1000650000, 2),  # an arbitrary uid; 2 ranks share a pod
    ("openmpi5", 0, 1),  # root, as the image itself runs
    ("mpich", None, 2),  # the default uid 1000, which the image lacks: our nss_wrapper
    ("intelmpi", 1000650000, 1),
], ids=["openmpi4-arbitrary-uid", "openmpi5-root", "mpich-uid-1000", "intelmpi-arbitrary-uid"])
def test_own_image_runs_an_allreduce_across_worker_pods(on_docker, byo, mpi, user, ranks_per_pod):
    job = on_docker(own_job("own", mpi, ranks_per_pod, run_as_user=user))
    code, log = run_to_end(job)
    assert code == 0, log
    ranks = 2 * ranks_per_pod
    assert f"allreduce ok: size={ranks} sum={ranks * (ranks + 1) // 2}" in log, log
    assert MPIS[mpi][1] in log, log
    assert f"({mpi})" in log, log  # the launcher told the MPI (Open MPI 4 or 5) from `--version`
    if user not in (0, None):
        assert f"uid {user} is not in the read-only /etc/passwd" in job.workers[0].logs()


@pytest.mark.parametrize("mpi", list(MPIS))
def test_launcher_as_a_worker_runs_rank_0_beside_one_worker(on_docker, byo, mpi):
    job = on_docker(own_job("lw", mpi, 1, workers=1, launcher_runs_ranks=True))
    code, log = run_to_end(job)
    assert code == 0, log
    assert "allreduce ok: size=2 sum=3 rank0=lw-launcher" in log, log


def test_one_pod_job_runs_on_the_launcher_alone(on_docker, byo):
    job = on_docker(own_job("solo", "mpich", 2, workers=0, launcher_runs_ranks=True))
    code, log = run_to_end(job)
    assert code == 0, log
    assert "allreduce ok: size=2 sum=3 rank0=solo-launcher" in log, log


def test_worker_whose_sshd_never_starts_fails_the_launcher_with_exit_3_naming_it(on_docker, byo):
    job = on_docker(own_job("late", "intelmpi", 1, wait_seconds=10))  # Intel MPI itself hides ssh's errors
    job.start_worker(0).wait_for_log("Server listening")
    job.start_worker(1, command=["sleep", "infinity"])
    started = time.monotonic()
    launcher = job.start_launcher()
    assert launcher.wait(timeout=90) == 3, launcher.logs()
    log = launcher.logs()
    assert "giving up on worker(s) late-worker-1.late.team.svc after 10s" in log, log
    assert re.search(r"worker late-worker-1\S* did not accept ssh on port 2222 within 10s: .*(refused|timed out)", log)
    assert time.monotonic() - started < 60


def test_image_without_sshd_or_ssh_fails_with_one_line_naming_what_to_install(on_docker, byo):
    body = own_job("bare", "openmpi5", 1)
    body["spec"]["image"] = "python:3.11-slim-bookworm"  # bash, but no ssh, no sshd, no MPI
    job = on_docker(body)
    worker = job.start_worker(0)
    assert worker.wait(timeout=60) == 2
    assert worker.logs().strip() == ("kubetrain worker: error: sshd not found in image python:3.11-slim-bookworm: "
                                     "install openssh-server")
    launcher = job.start_launcher()
    assert launcher.wait(timeout=60) == 2
    assert launcher.logs().strip() == ("kubetrain launcher: error: ssh not found in image python:3.11-slim-bookworm: "
                                       "install openssh-client")


def test_image_with_another_mpi_than_the_spec_says_is_named(on_docker, byo):
    body = own_job("wrongmpi", "openmpi5", 1)
    body["spec"]["image"] = byo_image("intelmpi")
    job = on_docker(body)
    launcher = job.start_launcher()
    assert launcher.wait(timeout=60) == 2
    assert ("mpirun is IntelMPI but spec.mpi.implementation is OpenMPI: set spec.mpi.implementation: IntelMPI"
            in launcher.logs()), launcher.logs()
