"""An elastic job (spec.elastic) across containers of kubetrain's base image, laid out as the operator lays it out.
The launcher runs horovodrun, which finds the Ready workers through the job's Ready-only Service (ready_service.py
stands in for it) and runs a small elastic Horovod training on them (elastic_training.py). A worker lost mid-training
costs ranks, not the job; its replacement under the same name joins again, and so does an added worker. A lost node
holding rank 0 stalls training for Gloo's timeout only. Then the launcher as a worker, its environment on the ranks,
and its refusals: fewer workers than elastic.minWorkers, and an image without Horovod."""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from docker_pods import Container, docker
from ready_service import start_ready_service

from kubetrain.manifests.names import worker_hostname
from tests.images.byo.tags import byo_image
from tests.support.job_on_hosts import job_body

TRAINING = Path(__file__).resolve().parent / "elastic_training.py"
STEP = re.compile(r"step rank=(\d+) size=(\d+) epoch=(\d+) batch=(\d+) host=(\S+) time=(\S+)")
COMMIT = re.compile(r"commit epoch=(\d+) batch=(\d+) time=(\S+)")
COMMIT_EVERY = 5
ARBITRARY_UID = {"spec": {"securityContext": {"runAsUser": 1000650000, "runAsGroup": 0, "fsGroup": 0}}}


@dataclass(frozen=True, order=True)
class Step:
    """A step a rank finished (or, for `commits`, a commit rank 0 made), at its time on the shared clock."""

    time: float
    position: tuple[int, int]  # (epoch, batch)
    size: int = 0
    host: str = ""


def steps(log: str) -> list[Step]:
    return sorted(Step(float(m[6]), (int(m[3]), int(m[4])), int(m[2]), m[5]) for m in STEP.finditer(log))


def commits(log: str) -> list[Step]:
    return sorted(Step(float(m[3]), (int(m[1]), int(m[2]))) for m in COMMIT.finditer(log))


def elastic_body(name: str, command: list[str], *, minimum: int, maximum: int, workers: int = 2,
                 wait_seconds: int = 120, **options) -> dict:
    body = job_body(name, command, workers=workers, wait_seconds=wait_seconds, **options)
    body["spec"]["elastic"] = {"minWorkers": minimum, "maxWorkers": maximum}
    return body


def wait_for(launcher: Container, what: str, condition: Callable[[str], bool], timeout: float = 300) -> str:
    """The launcher's log once `condition` holds for it; fails when the launcher exits or time runs out first."""
    deadline = time.monotonic() + timeout
    while True:
        log = launcher.logs()
        if condition(log):
            return log
        assert launcher.running(), f"the launcher exited before {what}:\n{log}"
        assert time.monotonic() < deadline, f"no {what} after {timeout:.0f} s:\n{log}"
        time.sleep(0.5)


def test_lost_worker_costs_ranks_not_the_job_and_its_replacement_joins_again(on_docker, images):
    name = "elastic"
    command = ["python", "/data/elastic_training.py", "--epochs", "5", "--batches", "40",
               "--commit-every", str(COMMIT_EVERY), "--step-seconds", "0.5"]
    job = on_docker(elastic_body(name, command, minimum=1, maximum=3))  # image: kubetrain/base
    shutil.copy(TRAINING, job.data_dir)
    for index in range(2):
        job.start_worker(index).wait_for_log("Server listening")
    ready = start_ready_service(job, images["base"])
    started = time.monotonic()
    launcher = job.start_launcher(dns=ready.ip)
    lost = f"{name}-worker-1"

    wait_for(launcher, "2 ranks training", lambda text: {s.host for s in steps(text) if s.size == 2} ==
             {f"{name}-worker-0", lost} and bool(commits(text)))
    first_training = time.monotonic() - started
    killed_at = time.time()
    job.workers[1].kill()
    log = wait_for(launcher, "training on 1 rank", lambda text: any(s.size == 1 for s in steps(text)))
    resumed = next(s for s in steps(log) if s.size == 1)
    # Training goes back to a commit, and no further than the last one before the loss.
    last_commit = [c for c in commits(log) if c.time < killed_at][-1]
    assert resumed.position >= last_commit.position and resumed.position[1] % COMMIT_EVERY == 0, log
    assert launcher.running(), log

    replaced_at = time.time()
    job.start_worker(1).wait_for_log("Server listening")  # the replacement: same pod name and DNS name
    log = wait_for(launcher, "the replacement training", lambda text: any(
        s.size == 2 and s.host == lost and s.time > replaced_at for s in steps(text)))
    ready_at = next(t for t in ready.ready_times(worker_hostname(job.job, 1)) if t > replaced_at)
    joined = next(s for s in steps(log) if s.host == lost and s.time > replaced_at)

    # One more worker (kubectl scale up to maxWorkers): a name Horovod never blacklisted.
    job.start_worker(2).wait_for_log("Server listening")
    added = f"{name}-worker-2"
    log = wait_for(launcher, "the added worker training", lambda text: any(
        s.size == 3 and s.host == added for s in steps(text)))
    added_ready_at = ready.ready_times(worker_hostname(job.job, 2))[0]
    added_joined = next(s for s in steps(log) if s.host == added)
    code = launcher.wait(timeout=600)
    log = launcher.logs()
    assert code == 0, log
    assert "training done: 5 epochs on 3 ranks" in log, log
    print(f"\nelastic: first steps {first_training:.1f} s after the launcher started; on 1 rank "
          f"{resumed.time - killed_at:.1f} s after the kill; replacement Ready {ready_at - killed_at:.1f} s after the "
          f"kill, training {joined.time - ready_at:.1f} s after Ready; added worker training "
          f"{added_joined.time - added_ready_at:.1f} s after Ready")


def test_lost_node_of_rank_0_stalls_training_for_the_gloo_timeout_not_minutes(on_docker, images):
    """The node of rank 0's pod goes silent: no reset, no close. Gloo's timeout ends the ranks' wait. Horovod's driver
    must not also wait minutes on a connect to the lost rank 0 (lib/horovodrun.py gives it a timeout)."""
    gloo_timeout = 20
    command = ["python", "/data/elastic_training.py", "--epochs", "1", "--batches", "60", "--step-seconds", "0.5"]
    env = [{"name": "HOROVOD_GLOO_TIMEOUT_SECONDS", "value": str(gloo_timeout)}]
    job = on_docker(elastic_body("node", command, minimum=1, maximum=2, env=env))  # image: kubetrain/base
    shutil.copy(TRAINING, job.data_dir)
    for index in range(2):
        job.start_worker(index).wait_for_log("Server listening")
    ready = start_ready_service(job, images["base"])
    launcher = job.start_launcher(dns=ready.ip)
    log = wait_for(launcher, "2 ranks training", lambda text: any(s.size == 2 for s in steps(text)))
    rank_0 = re.search(r"step rank=0 size=2 \S+ \S+ host=node-worker-(\d)", log)
    assert rank_0, log
    lost_at = time.time()
    docker("network", "disconnect", job.kubelet.network, job.workers[int(rank_0[1])].name)
    log = wait_for(launcher, "training on 1 rank", lambda text: any(s.size == 1 for s in steps(text)))
    stall = next(s for s in steps(log) if s.size == 1).time - lost_at
    assert stall < gloo_timeout + 25, f"training stalled {stall:.0f} s:\n{log}"
    assert launcher.wait(timeout=300) == 0, launcher.logs()
    print(f"\nnode of rank 0 lost: training on 1 rank {stall:.1f} s later")


def test_job_starts_on_min_workers_and_ranks_get_the_jobs_environment_not_the_launchers(on_docker, images):
    """Worker 1 never listens: the launcher goes on with elastic.minWorkers=1. An arbitrary uid (read-only root,
    nss_wrapper) also checks that horovodrun's own ssh finds the uid and the job's ssh config."""
    command = ["sh", "-c", 'echo "rank $HOROVOD_RANK of $HOROVOD_SIZE on $(hostname) as $(id -u)'
               ' HOSTNAME=${HOSTNAME:-unset} GREETING=$GREETING"']
    body = elastic_body("few", command, minimum=1, maximum=2, wait_seconds=60, pod_template=ARBITRARY_UID,
                        env=[{"name": "GREETING", "value": "hello from spec.env"}])
    job = on_docker(body)  # image: kubetrain/base
    job.start_worker(0).wait_for_log("Server listening")
    job.start_worker(1, command=["sleep", "infinity"])  # its name resolves, nothing listens: never Ready
    ready = start_ready_service(job, images["base"])
    launcher = job.start_launcher(dns=ready.ip)
    assert launcher.wait(timeout=180) == 0, launcher.logs()
    log = launcher.logs()
    assert "rank 0 of 1 on few-worker-0 as 1000650000 HOSTNAME=unset GREETING=hello from spec.env" in log, log
    assert "few-worker-1" not in log.split("horovodrun with")[1], log


def test_launcher_as_a_worker_runs_ranks_beside_the_ready_workers(on_docker, images):
    """launcher.runAsWorker: discovery always lists the launcher's own line, and the ranks count it."""
    command = ["sh", "-c", 'echo "rank $HOROVOD_RANK of $HOROVOD_SIZE on $(hostname)"']
    body = elastic_body("both", command, minimum=1, maximum=2, workers=1, wait_seconds=60)
    body["spec"]["launcher"]["runAsWorker"] = True
    job = on_docker(body)  # image: kubetrain/base
    job.start_worker(0).wait_for_log("Server listening")
    ready = start_ready_service(job, images["base"])
    launcher = job.start_launcher(dns=ready.ip)
    assert launcher.wait(timeout=120) == 0, launcher.logs()
    log = launcher.logs()
    assert re.search(r"rank \d of 2 on both-launcher", log) and re.search(r"rank \d of 2 on both-worker-0", log), log


def test_launcher_gives_up_when_fewer_than_min_workers_accept_ssh(on_docker):
    wait_seconds = 10
    job = on_docker(elastic_body("short", ["hostname"], minimum=2, maximum=3, wait_seconds=wait_seconds))
    job.start_worker(0).wait_for_log("Server listening")
    job.start_worker(1, command=["sleep", "infinity"])
    started = time.monotonic()
    launcher = job.start_launcher()
    assert launcher.wait(timeout=wait_seconds + 60) == 3, launcher.logs()
    log = launcher.logs()
    assert ("giving up on worker(s) short-worker-1.short.team.svc after 10s: 1 accepted ssh and the job needs "
            "elastic.minWorkers=2 (launcher.waitForWorkersSeconds)") in log, log
    assert time.monotonic() - started < wait_seconds + 30


def test_image_without_horovod_fails_the_launcher_with_one_line_naming_the_fix(on_docker, byo):
    image = byo_image("mpich")  # ssh, sshd and MPICH, no Horovod
    body = elastic_body("nohvd", ["python", "train.py"], minimum=1, maximum=2)
    body["spec"].update(image=image, mpi={"implementation": "MPICH"})
    launcher = on_docker(body).start_launcher()
    assert launcher.wait(timeout=60) == 2
    lines = launcher.logs().strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"kubetrain launcher: error: horovodrun not found in image {image} (PATH="), lines
    assert lines[0].endswith("): install Horovod with Gloo there (HOROVOD_WITH_GLOO=1 pip install horovod), or leave "
                             "out spec.elastic"), lines
