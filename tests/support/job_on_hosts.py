"""A DistributedTraining laid out on netns hosts: its Secret and ConfigMap rendered by the operator's builders, one host
for the launcher and one per worker (or the workers' names spread over fewer hosts), the claims backed by folders every
host shares."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubetrain.api import Job, parse_job
from kubetrain.contract import SSH_PORT, launcher_name, worker_name
from kubetrain.keys import generate_job_keys
from kubetrain.manifests.hosts import build_hosts_configmap
from kubetrain.manifests.launcher import build_launcher_job
from kubetrain.manifests.names import worker_hostname
from kubetrain.manifests.pods import build_worker_pod
from kubetrain.manifests.ssh import build_ssh_secret
from tests.support.netns_hosts import Host, Network
from tests.support.pod_emulator import Container, Kubelet

REQUIRED_TOOLS = ("ip", "unshare", "setpriv", "ssh", "ssh-keygen", "mpirun", "timeout")
SSHD_LISTENING = f"Server listening on 0.0.0.0 port {SSH_PORT}"


def missing_requirements() -> str | None:
    """Why jobs cannot run on netns hosts here (not root, a tool missing), or None when they can."""
    if os.geteuid() != 0:
        return "needs root for network namespaces"
    missing = [tool for tool in REQUIRED_TOOLS if shutil.which(tool) is None]
    if not os.access("/usr/sbin/sshd", os.X_OK):
        missing.append("sshd (openssh-server)")
    return f"missing {', '.join(missing)}" if missing else None


def job_body(
    name: str,
    command: list[str],
    *,
    workers: int = 2,
    wait_seconds: int = 60,
    pod_template: Mapping[str, Any] | None = None,
    env: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """A DistributedTraining as a user writes it, with data and checkpoint claims the test backs with folders."""
    return {
        "apiVersion": "kubetrain.dev/v1alpha1",
        "kind": "DistributedTraining",
        "metadata": {"name": name, "namespace": "team", "uid": "0f0e0d0c"},
        "spec": {
            "image": "kubetrain/base:0.1.0",
            "command": command,
            "env": env or [],
            "workers": workers,
            "slotsPerWorker": 1,
            "data": {"claimName": "data"},
            "checkpoint": {"claimName": "checkpoints"},
            "launcher": {"waitForWorkersSeconds": wait_seconds},
            "podTemplate": dict(pod_template or {}),
        },
    }


@dataclass
class JobOnHosts:
    """One DistributedTraining laid out on hosts: a launcher host and the worker hosts. Worker host i runs worker pod
    i and answers to the names of workers i, i + k, i + 2k, ... (k worker hosts: one per worker unless asked)."""

    job: Job
    network: Network
    kubelet: Kubelet
    launcher_host: Host
    worker_hosts: list[Host]
    data_dir: Path
    checkpoint_root: Path
    workers: dict[int, Container] = field(default_factory=dict)

    @property
    def checkpoint_dir(self) -> Path:
        return self.checkpoint_root / self.job.namespace / self.job.name

    def start_worker(self, index: int) -> Container:
        self.workers[index] = self.kubelet.start(self.worker_hosts[index], build_worker_pod(self.job, index))
        return self.workers[index]

    def start_workers(self) -> list[Container]:
        """A worker pod on every worker host; returns once each sshd listens."""
        started = [self.start_worker(index) for index in range(len(self.worker_hosts))]
        for worker in started:
            worker.wait_for_log(SSHD_LISTENING)
        return started

    def give_root_a_home(self, home: Path) -> None:
        """root's home on every host: `home`, an empty folder as in an image, not this machine's /root, whose ~/.bashrc
        every ssh login as root runs."""
        home.mkdir(exist_ok=True)
        self.network.install_passwd([f"root:x:0:0:root:{home}:/bin/bash"])

    def start_launcher(self, extra_env: Mapping[str, str] | None = None) -> Container:
        return self.kubelet.start(self.launcher_host, build_launcher_job(self.job), extra_env)


def deploy_job(network: Network, scratch: Path, body: Mapping[str, Any], *, as_pod_user: bool = False,
               secrets: Sequence[Mapping[str, Any]] = (), worker_hosts: int | None = None) -> JobOnHosts:
    """`secrets`: Secrets of the namespace the job's env may read (secretKeyRef). `worker_hosts`: how many hosts carry
    the workers' names, round-robin (default: one per worker)."""
    job = parse_job(body)
    objects = [build_ssh_secret(job, generate_job_keys(job.name)), build_hosts_configmap(job), *secrets]
    claims = {"data": scratch / "data", "checkpoints": scratch / "checkpoints"}
    for folder in claims.values():
        folder.mkdir(exist_ok=True)
        folder.chmod(0o777)
    launcher = network.add_host(launcher_name(job.name))
    count = job.spec.workers if worker_hosts is None else min(worker_hosts, job.spec.workers)
    workers = []
    for i in range(count):
        names = [worker_hostname(job, j) for j in range(i, job.spec.workers, count)]
        workers.append(network.add_host(worker_name(job.name, i), *names))
    job_paths = {job.spec.data.mount_path: claims["data"], job.spec.checkpoint.mount_path: claims["checkpoints"]}
    kubelet = Kubelet(network, scratch / "pods", objects, claims, job_paths, as_pod_user=as_pod_user)
    return JobOnHosts(job, network, kubelet, launcher, workers, claims["data"], claims["checkpoints"])
