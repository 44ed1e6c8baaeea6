"""The launcher's host check: the seconds from its "waiting up to" line to its "all hosts ready" line, checking its
default number of hosts at a time against one host after another (KUBETRAIN_SSH_CHECKS=1), side by side on the same
hosts.

The launch tier's layout (tests/support/job_on_hosts.py): a job of N workers whose names are spread round-robin over
8 network-namespace hosts, each running the worker entrypoint's sshd. Both sides of every ssh login share this
machine's cores, where in a cluster each worker has its own. The lines are timed as this process reads the launcher's
log (every 10 ms), which leaves its log as users see it. The launcher is stopped at "all hosts ready", before its MPI
starts N ranks. Needs root and the launch tier's tools.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.support.job_on_hosts import JobOnHosts, deploy_job, job_body, missing_requirements
from tests.support.netns_hosts import Network
from tests.support.pod_emulator import Container

from .processes import REPO, BenchError
from .report import Row
from .stats import ratio

SECTION = "7 launcher"
LAUNCHER = REPO / "images" / "entrypoints" / "lib" / "launcher.sh"
WORKER_HOSTS = 8
GOAL_SECONDS = 60  # the goal: 1,000 hosts in seconds, not minutes
GOAL_HOSTS = 1000
TIMEOUT = 3600  # the launcher's bound and this benchmark's: one host after another takes minutes
STARTED, READY = "waiting up to", "all hosts ready"


def line_times(container: Container, markers: Sequence[str], timeout: float) -> list[float]:
    """time.monotonic() when each marker, in order, first shows in the container's log."""
    times: list[float] = []
    text = ""
    deadline = time.monotonic() + timeout
    with open(container.log_path, errors="replace") as log:
        while len(times) < len(markers):
            text += log.read()
            now = time.monotonic()
            while len(times) < len(markers) and markers[len(times)] in text:
                times.append(now)
            if len(times) == len(markers):
                break
            if container.process.poll() is not None or now > deadline:
                raise BenchError(f"the launcher never logged {markers[len(times)]!r}:\n{text[-3000:]}")
            time.sleep(0.01)
    return times


def default_ssh_checks() -> int:
    """The launcher's default KUBETRAIN_SSH_CHECKS, read from launcher.sh, which holds it."""
    match = re.search(r"\$\{KUBETRAIN_SSH_CHECKS:-(\d+)\}", LAUNCHER.read_text())
    if match is None:
        raise BenchError(f"{LAUNCHER} has no default for KUBETRAIN_SSH_CHECKS")
    return int(match.group(1))


def check_seconds(cluster: JobOnHosts, env: Mapping[str, str]) -> float:
    """One launcher's host check with `env` added to its own; every worker must accept ssh."""
    launcher = cluster.start_launcher(env)
    try:
        started, ready = line_times(launcher, (STARTED, READY), TIMEOUT)
    finally:
        cluster.network.kill_host(launcher.host)
        launcher.wait(timeout=10)
    accepted = len(re.findall(r"^kubetrain launcher: worker \S+ accepts ssh$", launcher.log(), re.MULTILINE))
    if accepted != cluster.job.spec.workers:
        raise BenchError(f"{accepted} of {cluster.job.spec.workers} workers accepted ssh:\n{launcher.log()[-3000:]}")
    return ready - started


def measure(workdir: Path, hosts: int) -> list[Row]:
    """The check's seconds for `hosts` hostfile hosts at the launcher's default and one at a time, and their ratio."""
    reason = missing_requirements()
    if reason:
        raise BenchError(f"the host check runs on the launch tier's network-namespace hosts: {reason}")
    default = default_ssh_checks()
    scratch = workdir / "host-check"
    scratch.mkdir(parents=True, exist_ok=True)
    network = Network()
    try:
        cluster = deploy_job(network, scratch, job_body("hostcheck", ["true"], workers=hosts, wait_seconds=TIMEOUT),
                             worker_hosts=WORKER_HOSTS)
        cluster.give_root_a_home(scratch / "root-home")
        cluster.start_workers()
        parallel, serial = check_seconds(cluster, {}), check_seconds(cluster, {"KUBETRAIN_SSH_CHECKS": "1"})
    finally:
        network.close()
        shutil.rmtree(scratch, ignore_errors=True)
    layout = f"{hosts} names on {WORKER_HOSTS} sshd hosts, this machine's cores for both ends of every login"
    goal = {"target": f"< {GOAL_SECONDS}", "meets": parallel < GOAL_SECONDS} if hosts >= GOAL_HOSTS else {}
    return [
        Row(SECTION, f"host check, {hosts} hosts, parallel ({default} at a time)", parallel, "s", **goal,
            detail=f"the launcher's default, KUBETRAIN_SSH_CHECKS={default}; {layout}"),
        Row(SECTION, f"host check, {hosts} hosts, serial (1 at a time)", serial, "s",
            detail=f"KUBETRAIN_SSH_CHECKS=1, right after the parallel run; {layout}"),
        Row(SECTION, f"host check serial / parallel, {hosts} hosts", ratio(serial, parallel), "x",
            detail="the two runs above, side by side"),
    ]
