"""Reliability and security suite: faults on the real control plane, bad input, crash-safe checkpoints, least
privilege. Every test here is marked `reliability`; those that need the control plane also `controlplane`.

Fixtures:
- `control_plane` (package: stopped after the tier's last test): a control plane of this suite's own
  (tests/support/cluster.py), so that restarting its API server or deleting its nodes never disturbs other tiers.
- `crd`: the plane with the DistributedTraining CRD installed.
- `namespace`: a fresh namespace, deleted afterwards.

At the end of the run the figures the tests record (faults injected/survived, bad inputs tried/rejected, duplicates,
orphans, checkpoints lost) are printed and written to tests/reliability/results/latest.md (tests/conftest.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import ControlPlane, fresh_namespace
from tests.support.operator_harness import install_crd
from tests.support.session_plane import session_plane

HERE = Path(__file__).resolve().parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "reliability: fault injection, bad input and security (tests/reliability)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.reliability)


@pytest.fixture(scope="package")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    yield from session_plane(tmp_path_factory.mktemp("reliability-plane"), "the test control plane")


@pytest.fixture(scope="package")
def crd(control_plane: ControlPlane) -> ControlPlane:
    install_crd(control_plane)
    return control_plane


@pytest.fixture
def namespace(control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    with fresh_namespace(control_plane, request.node.name) as name:
        yield name
