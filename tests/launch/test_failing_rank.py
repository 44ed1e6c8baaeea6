"""A rank that fails, under the real mpirun and horovodrun across hosts: the launcher exits with the rank's code, its
log gets every rank's lines as they come, and its termination message names the rank, how it ended and its last
lines, which the operator reads into the job's status.failure. A SIGTERM to the launcher still reaches the ranks."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from kubetrain.failure_report import from_launcher, placement, read_report
from kubetrain.manifests.pods import build_worker_pod
from tests.support.job_on_hosts import JobOnHosts, job_body

pytestmark = pytest.mark.launch

# Each rank says it is up, then waits for the test's go; rank 1 then fails with a traceback on stderr, as Python
# prints one, and exit code 3. (A rank's stdout and stderr reach the launcher through two pipes: their lines keep
# their order within each stream only.)
FAILING = ["sh", "-c", 'r=${OMPI_COMM_WORLD_RANK:-$HOROVOD_RANK}; echo "rank $r up"; '
           'while [ ! -e "$KUBETRAIN_CHECKPOINT_DIR/go" ]; do sleep 0.1; done; '
           'if [ "$r" = 1 ]; then printf "Traceback (most recent call last):\\nValueError: rank %s gives up\\n" $r '
           ">&2; exit 3; fi; sleep 60"]
TRACEBACK = ["Traceback (most recent call last):", "ValueError: rank 1 gives up"]
# Each rank says it is up and waits; a SIGTERM leaves a mark in the shared folder.
TRAPPING = ["sh", "-c", 'r=$OMPI_COMM_WORLD_RANK; trap "touch $KUBETRAIN_CHECKPOINT_DIR/term-$r; exit 143" TERM; '
            'echo "rank $r up"; while :; do sleep 0.1; done']


def shared_folder(cluster: JobOnHosts) -> Path:
    """The job's checkpoint folder, which every host and uid sees ($KUBETRAIN_CHECKPOINT_DIR)."""
    cluster.checkpoint_dir.mkdir(parents=True)
    cluster.checkpoint_dir.chmod(0o777)
    return cluster.checkpoint_dir


def start_workers(cluster: JobOnHosts) -> None:
    for index in range(len(cluster.worker_hosts)):
        cluster.start_worker(index).wait_for_log("Server listening on 0.0.0.0 port 2222")


def scheduled_workers(cluster: JobOnHosts) -> dict[int, dict]:
    """The worker pods as the API server would have them: each on the node of its host."""
    pods = {index: build_worker_pod(cluster.job, index) for index in range(len(cluster.worker_hosts))}
    for index, pod in pods.items():
        pod["spec"]["nodeName"] = cluster.worker_hosts[index].namespace
    return pods


def test_rank_1_exits_3_the_launcher_exits_3_and_its_termination_message_names_rank_1(deploy):
    cluster = deploy(job_body("crash", FAILING))
    go = shared_folder(cluster) / "go"
    start_workers(cluster)
    launcher = cluster.start_launcher()
    # the lines stream to the log as they come: both ranks' are there while the ranks still wait
    launcher.wait_for_log(r"\[1,0\]<stdout>:rank 0 up")
    launcher.wait_for_log(r"\[1,1\]<stdout>:rank 1 up")
    assert launcher.process.poll() is None
    go.touch()
    assert launcher.wait(timeout=60) == 3, launcher.log()
    log = launcher.log()
    assert "[1,1]<stderr>:Traceback (most recent call last):\n[1,1]<stderr>:ValueError: rank 1 gives up" in log, log
    assert "kubetrain launcher: rank 1 exited with code 3 (the MPI says so)" in log, log

    report = json.loads(launcher.termination_message())
    assert {key: report[key] for key in ("rank", "rankFrom", "exitCode", "signal", "linesOf")} == {
        "rank": 1, "rankFrom": "MPI", "exitCode": 3, "signal": None, "linesOf": "rank"}, report
    assert report["lastLines"] == ["rank 1 up", *TRACEBACK], report

    # what the job's status says of it: rank 1 ran on worker 1 (hostfile order), on that host's node
    read = read_report(launcher.termination_message())
    assert read is not None
    detail = from_launcher(read, placement(cluster.job, scheduled_workers(cluster), None), 3)
    node = cluster.worker_hosts[1].namespace
    assert detail.headline("launcher", "crash-launcher") == (
        f"rank 1 failed in pod crash-worker-1 on node {node}: Error (exit code 3)")


def test_a_sigterm_to_the_launcher_reaches_every_rank(deploy):
    """What the kubelet does to a launcher pod that is deleted (the job is suspended, restarted or deleted)."""
    cluster = deploy(job_body("stop", TRAPPING))
    folder = shared_folder(cluster)
    start_workers(cluster)
    launcher = cluster.start_launcher()
    launcher.wait_for_log(r"\[1,0\]<stdout>:rank 0 up")
    launcher.wait_for_log(r"\[1,1\]<stdout>:rank 1 up")
    command = Path(f"/proc/{launcher.process.pid}/cmdline").read_bytes().split(b"\0")
    assert command[2].endswith(b"/run_with_report.py"), command  # the container's process: what the kubelet signals
    started = time.monotonic()
    os.kill(launcher.process.pid, signal.SIGTERM)
    code = launcher.wait(timeout=60)
    assert code != 0, launcher.log()
    assert time.monotonic() - started < 30
    deadline = time.monotonic() + 10
    while not ((folder / "term-0").exists() and (folder / "term-1").exists()):
        assert time.monotonic() < deadline, f"a rank never got SIGTERM:\n{launcher.log()}"
        time.sleep(0.1)
    for host in cluster.worker_hosts:  # nothing of the job is left but sshd
        deadline = time.monotonic() + 10
        while len(cluster.network.pids(host)) > 1:
            assert time.monotonic() < deadline, f"processes left on {host.hostname}"
            time.sleep(0.1)


def test_horovodrun_names_the_failing_rank_and_the_pod_it_ran_in(deploy, scratch):
    body = job_body("flex", FAILING, workers=1, wait_seconds=10)
    body["spec"]["elastic"] = {"minWorkers": 1, "maxWorkers": 1}
    body["spec"]["launcher"]["runAsWorker"] = True
    cluster = deploy(body)
    (shared_folder(cluster) / "go").touch()
    root_home = scratch / "root-home"  # horovodrun's ssh reads root's ~/.ssh/config, which the launcher writes
    root_home.mkdir()
    cluster.network.install_passwd([f"root:x:0:0:root:{root_home}:/bin/bash"])
    worker = cluster.worker_hosts[0]
    worker.names = (*worker.names, "flex-ready.team.svc")  # the Service of Ready workers, for the discovery
    cluster.network.write_hosts_files()
    start_workers(cluster)
    launcher = cluster.start_launcher()
    assert launcher.wait(timeout=120) != 0, launcher.log()
    assert "[1]<stderr>:ValueError: rank 1 gives up" in launcher.log()

    report = json.loads(launcher.termination_message())
    assert (report["rank"], report["rankFrom"], report["exitCode"]) == (1, "MPI", 3), report
    assert sorted(report["lastLines"]) == sorted(["rank 1 up", *TRACEBACK]), report
    lines = report["lastLines"]
    assert lines.index(TRACEBACK[0]) < lines.index(TRACEBACK[1]), report  # in order within stderr
    # Horovod orders an elastic job's ranks itself: the host it named says which pod rank 1 ran in
    read = read_report(launcher.termination_message())
    assert read is not None
    launcher_pod = {"metadata": {"name": "flex-launcher-x"}, "spec": {"nodeName": "launcher-node"}}
    detail = from_launcher(read, placement(cluster.job, scheduled_workers(cluster), launcher_pod), 1)
    expected = {"flex-launcher": ("flex-launcher-x", "launcher-node"),
                "flex-worker-0": ("flex-worker-0", worker.namespace)}[report["host"].split(".")[0]]
    assert (detail.rank, detail.pod, detail.node) == (1, *expected)
