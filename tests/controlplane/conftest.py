"""Fixtures for tests against the real control plane in tests/support/cluster.py; every test in this directory is marked
`controlplane`.

- `control_plane` (package: the tier, stopped after its last test, so that it does not idle beside the next
  tier): a started `cluster.ControlPlane` with fake nodes kwok-gpu-0 and kwok-gpu-1 (4 nvidia.com/gpu each). Use
  `.kubeconfig` / `.env()` for clients, `.kubectl(...)`, `.get(kind, name, namespace)`, `.apply(manifest)`,
  `.set_pod_outcome(...)` to finish a running pod, `.add_node(...)` / `.delete_node(...)`. Component logs are in
  `<workdir>/logs/`.
- `namespace` (function): the name of a fresh namespace whose `default` ServiceAccount exists; deleted afterwards.
- `crd` (module): `control_plane` with the DistributedTraining CRD installed; `operator` (function): the operator
  watching `namespace`, its log printed when the test fails.
- `gang_control_plane` (package, started only when a test asks for it): a second control plane whose fake nodes are
  GANG_NODES (kwok-gang-0..3, 2 nvidia.com/gpu each, 8 in all) and where two real gang schedulers run beside the
  default kube-scheduler (built by tests/controlplane/build-gang-schedulers.sh; names, labels and PodGroup builders in
  gang_schedulers.py): scheduler-plugins' Coscheduling answers pods with `schedulerName: scheduler-plugins-scheduler`
  (gang: a `scheduling.x-k8s.io/v1alpha1` PodGroup, label `scheduling.x-k8s.io/pod-group`), Volcano answers
  `schedulerName: volcano` (gang: a `scheduling.volcano.sh/v1beta1` PodGroup in Queue `default`, annotation
  `scheduling.k8s.io/group-name`). Pods without a schedulerName go to the default kube-scheduler as usual.
- `gang_namespace` (function): like `namespace`, in `gang_control_plane`.
- `kueue_control_plane` (package, started only when a test asks for it): a third control plane whose fake nodes are
  KUEUE_NODES (kwok-kueue-0 and kwok-kueue-1, 4 nvidia.com/gpu each) and where Kueue v0.10.0 runs with its plain-Pod
  integration (built by tests/controlplane/build-kueue.sh; labels, annotations and builders in kueue.py). No
  ClusterQueue or LocalQueue exists: a test creates its own. Pods with the label `kueue.x-k8s.io/queue-name` are gated
  until Kueue admits them; other pods go to the default kube-scheduler as usual.
- `kueue_namespace` (function): like `namespace`, in `kueue_control_plane`.

Fails (never skips) when the binaries are missing: build them with tests/controlplane/build.sh (and
build-gang-schedulers.sh, build-kueue.sh).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import tests.support.gang_schedulers as gang
import tests.support.kueue_harness as kueue
from tests.support.cluster import ControlPlane, fresh_namespace
from tests.support.operator_harness import OperatorProcess, install_crd, operator_watching
from tests.support.session_plane import session_plane

HERE = Path(__file__).resolve().parent
GANG_NODES = tuple((f"kwok-gang-{index}", 2) for index in range(4))
KUEUE_NODES = (("kwok-kueue-0", 4), ("kwok-kueue-1", 4))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.controlplane)


@pytest.fixture(scope="package")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """The running control plane, shared by every test of the tier and stopped after its last."""
    yield from session_plane(tmp_path_factory.mktemp("controlplane"), "the test control plane")


@pytest.fixture
def namespace(control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace (named after the test) that pods can be created in at once; deleted after the test."""
    with fresh_namespace(control_plane, request.node.name) as name:
        yield name


@pytest.fixture(scope="package")
def gang_control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A control plane with both gang schedulers beside the default one and 4 nodes x 2 GPUs; stopped with the
    tier."""
    yield from session_plane(tmp_path_factory.mktemp("gang-controlplane"), "the gang-scheduling control plane",
                             nodes=GANG_NODES, gang_schedulers=gang.GANG_SCHEDULERS)


@pytest.fixture
def gang_namespace(gang_control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace in `gang_control_plane`, deleted after the test."""
    with fresh_namespace(gang_control_plane, request.node.name) as name:
        yield name


@pytest.fixture(scope="package")
def kueue_control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A control plane with Kueue (Pod integration) and 2 nodes x 4 GPUs; stopped with the tier."""
    yield from session_plane(tmp_path_factory.mktemp("kueue-controlplane"), "the Kueue control plane",
                             nodes=KUEUE_NODES, kueue=True)


@pytest.fixture
def kueue_namespace(kueue_control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace in `kueue_control_plane`, deleted after the test. Its pods are first marked not
    retriable: Kueue keeps its finalizer on a failed pod of a retriable group until a replacement comes, which never
    happens in a namespace being deleted."""
    with fresh_namespace(kueue_control_plane, request.node.name) as name:
        yield name
        kueue_control_plane.kubectl("annotate", "pods", "--all", "--namespace", name, "--overwrite",
                                    f"{kueue.RETRIABLE_IN_GROUP_ANNOTATION}=false")


@pytest.fixture(scope="module")
def crd(control_plane: ControlPlane) -> ControlPlane:
    install_crd(control_plane)
    return control_plane


@pytest.fixture
def operator(crd: ControlPlane, namespace: str) -> Iterator[OperatorProcess]:
    """The operator watching this test's namespace; its log is printed when the test fails."""
    yield from operator_watching(crd, namespace)
