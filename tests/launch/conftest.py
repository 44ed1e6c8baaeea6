"""Fixtures for the launch tier: network-namespace hosts running the operator's pods with real sshd and mpirun.

Needs root (network namespaces), iproute2, util-linux (unshare, setpriv), openssh-server/-client and OpenMPI.
Every namespace, veth, bridge, /etc/netns/<ns> file and process a test creates is removed when it ends, pass or fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from kubetrain.api import Job, parse_job  # noqa: E402
from kubetrain.build.hosts import build_hosts_configmap  # noqa: E402
from kubetrain.build.launcher import build_launcher_job  # noqa: E402
from kubetrain.build.names import launcher_name, worker_hostname, worker_name  # noqa: E402
from kubetrain.build.pods import build_worker_pod  # noqa: E402
from kubetrain.build.ssh import build_ssh_secret  # noqa: E402
from kubetrain.keys import generate_ssh_keypair  # noqa: E402
from netns_hosts import Host, Network  # noqa: E402
from pod_emulator import Container, Kubelet  # noqa: E402

REQUIRED_TOOLS = ("ip", "unshare", "setpriv", "ssh", "ssh-keygen", "mpirun", "timeout")


def _missing_requirements() -> str | None:
    if os.geteuid() != 0:
        return "needs root for network namespaces"
    missing = [tool for tool in REQUIRED_TOOLS if shutil.which(tool) is None]
    if not os.access("/usr/sbin/sshd", os.X_OK):
        missing.append("sshd (openssh-server)")
    return f"missing {', '.join(missing)}" if missing else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = _missing_requirements()
    here = Path(__file__).parent
    for item in items:
        needs_hosts = {"network", "deploy"} & set(getattr(item, "fixturenames", ()))
        if reason and needs_hosts and Path(str(item.fspath)).is_relative_to(here):
            item.add_marker(pytest.mark.skip(reason=f"launch tier: {reason}"))


@pytest.fixture(scope="session")
def digits(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """train.h5 and test.h5 written by cifar_mixup's own converter from scikit-learn's bundled digits."""
    out = tmp_path_factory.mktemp("digits")
    subprocess.run([sys.executable, "-m", "cifar_mixup.convert", "digits", "--out", str(out)], check=True,
                   capture_output=True)  # fmt: skip
    return out


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A folder every uid can traverse (pytest's tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="kubetrain-launch-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def network() -> Iterator[Network]:
    net = Network()
    try:
        yield net
    finally:
        net.close()


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
    """One DistributedTraining laid out on hosts: a launcher host and one host per worker."""

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

    def start_launcher(self, extra_env: Mapping[str, str] | None = None) -> Container:
        return self.kubelet.start(self.launcher_host, build_launcher_job(self.job), extra_env)


@pytest.fixture
def deploy(network: Network, scratch: Path):
    """deploy(body, as_pod_user=False) -> JobOnHosts with the Secret and ConfigMap rendered by the builders."""

    def make(body: Mapping[str, Any], *, as_pod_user: bool = False) -> JobOnHosts:
        job = parse_job(body)
        objects = [build_ssh_secret(job, generate_ssh_keypair()), build_hosts_configmap(job)]
        claims = {"data": scratch / "data", "checkpoints": scratch / "checkpoints"}
        for folder in claims.values():
            folder.mkdir(exist_ok=True)
            folder.chmod(0o777)
        launcher = network.add_host(launcher_name(job.name))
        workers = [network.add_host(worker_name(job.name, i), worker_hostname(job, i)) for i in range(job.spec.workers)]
        job_paths = {job.spec.data.mount_path: claims["data"], job.spec.checkpoint.mount_path: claims["checkpoints"]}
        kubelet = Kubelet(network, scratch / "pods", objects, claims, job_paths, as_pod_user=as_pod_user)
        return JobOnHosts(job, network, kubelet, launcher, workers, claims["data"], claims["checkpoints"])

    return make
