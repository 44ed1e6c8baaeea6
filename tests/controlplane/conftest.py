"""Fixtures for tests against the real control plane in cluster.py; every test in this directory is marked
`controlplane`.

- `control_plane` (session): a started `cluster.ControlPlane` with fake nodes kwok-gpu-0 and kwok-gpu-1 (4
  nvidia.com/gpu each). Use `.kubeconfig` / `.env()` for clients, `.kubectl(...)`, `.get(kind, name, namespace)`,
  `.apply(manifest)`, `.set_pod_outcome(...)` to finish a running pod, `.add_node(...)` / `.delete_node(...)`.
  Component logs are in `<workdir>/logs/`.
- `namespace` (function): the name of a fresh namespace whose `default` ServiceAccount exists; deleted afterwards.

Fails (never skips) when the binaries are missing: build them with tests/controlplane/build.sh.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster import ControlPlane, ControlPlaneError, fresh_namespace

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.controlplane)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """The running control plane, shared by every test of the session and stopped at its end."""
    try:
        plane = ControlPlane.start(tmp_path_factory.mktemp("controlplane"))
    except ControlPlaneError as error:
        pytest.fail(f"could not start the test control plane: {error}", pytrace=False)
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture
def namespace(control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace (named after the test) that pods can be created in at once; deleted after the test."""
    with fresh_namespace(control_plane, request.node.name) as name:
        yield name
