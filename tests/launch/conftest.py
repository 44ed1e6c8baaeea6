"""Fixtures for the launch tier: network-namespace hosts running the operator's pods with real sshd and mpirun.

Needs root (network namespaces), iproute2, util-linux (unshare, setpriv), openssh-server/-client and OpenMPI.
Every namespace, veth, bridge, /etc/netns/<ns> file and process a test creates is removed when it ends, pass or fail.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.support.job_on_hosts import JobOnHosts, deploy_job, missing_requirements
from tests.support.netns_hosts import Network


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = missing_requirements()
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
                   capture_output=True)
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


@pytest.fixture
def deploy(scratch: Path, network: Network):
    """deploy(body, as_pod_user=False, secrets=(), worker_hosts=None) -> JobOnHosts. Hosts and processes are torn down
    before scratch is removed."""

    def make(body: Mapping[str, Any], *, as_pod_user: bool = False, secrets: Sequence[Mapping[str, Any]] = (),
             worker_hosts: int | None = None) -> JobOnHosts:
        return deploy_job(network, scratch, body, as_pod_user=as_pod_user, secrets=secrets, worker_hosts=worker_hosts)

    return make
