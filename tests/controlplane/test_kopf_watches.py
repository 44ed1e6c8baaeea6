"""The operator with kopf's watches (KUBETRAIN_WATCH=kopf, kubetrain.kopf_watches) on a real API server: the same
controller above them, so a job goes the same way as with kubetrain.runtime's watches. The second test restarts the
operator while its jobs run: its first passes, which follow kopf's indexing of every kind, change nothing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.cluster import ControlPlane, free_port, wait_until
from tests.support.operator_harness import (
    OperatorProcess,
    children,
    create,
    live_pods,
    operator_metrics,
    operator_watching,
    status,
    training,
    wait_for_pods,
    wait_for_status,
)

METRICS_PORT_ENV = "KUBETRAIN_METRICS_PORT"


@pytest.fixture
def kopf_operator(crd: ControlPlane, namespace: str) -> Iterator[OperatorProcess]:
    yield from operator_watching(crd, namespace, env={"KUBETRAIN_WATCH": "kopf", METRICS_PORT_ENV: str(free_port())})


def passes(operator: OperatorProcess) -> int:
    """The reconcile passes the running operator has made (its Prometheus metrics); 0 before it serves them."""
    samples = operator_metrics(int(operator.env[METRICS_PORT_ENV]))
    return int(samples.get("kubetrain_reconcile_duration_seconds_count", 0))


def test_a_job_under_kopfs_watches_runs_restarts_once_and_succeeds(
    control_plane: ControlPlane, namespace: str, kopf_operator: OperatorProcess
) -> None:
    create(control_plane, namespace, training("kopf-job", resources={"gpusPerWorker": 0}))
    first = {pod["metadata"]["uid"] for pod in wait_for_pods(control_plane, namespace, "kopf-job", 2)}
    wait_for_pods(control_plane, namespace, "kopf-job", 1, role="launcher")
    wait_for_status(control_plane, namespace, "kopf-job", kopf_operator, phase="Running")

    control_plane.set_pod_outcome(namespace, "kopf-job-worker-1", "Failed", reason="Error", exit_code=3)
    wait_for_status(control_plane, namespace, "kopf-job", kopf_operator, restarts=1)
    second = wait_for_pods(control_plane, namespace, "kopf-job", 2)
    assert not first & {pod["metadata"]["uid"] for pod in second}, "every worker is made again"
    launcher = wait_for_pods(control_plane, namespace, "kopf-job", 1, role="launcher")[0]["metadata"]["name"]
    wait_for_status(control_plane, namespace, "kopf-job", kopf_operator, phase="Running")

    control_plane.set_pod_outcome(namespace, launcher, "Succeeded")
    final = wait_for_status(control_plane, namespace, "kopf-job", kopf_operator, phase="Succeeded")
    assert final["restarts"] == 1
    assert "Traceback" not in kopf_operator.log_text(), kopf_operator.log_tail()


def test_restarted_under_kopfs_watches_it_leaves_running_jobs_as_they_are(
    control_plane: ControlPlane, namespace: str, kopf_operator: OperatorProcess
) -> None:
    names = [f"steady-{index}" for index in range(4)]
    for name in names:
        create(control_plane, namespace, training(name, resources={"gpusPerWorker": 0}))
    for name in names:
        wait_for_status(control_plane, namespace, name, kopf_operator, phase="Running", timeout=180)
    before = {name: sorted(pod["metadata"]["uid"] for pod in live_pods(control_plane, namespace, name))
              for name in names}
    kopf_operator.kill()
    kopf_operator.start()
    wait_until(lambda: passes(kopf_operator) >= len(names), timeout=120,
               message="a pass of every job by the restarted operator")
    for name in names:
        assert status(control_plane, namespace, name)["restarts"] == 0, name
        assert sorted(pod["metadata"]["uid"] for pod in live_pods(control_plane, namespace, name)) == before[name]
        counts = {kind: len(children(control_plane, namespace, name, kind))
                  for kind in ("pods", "jobs", "services", "configmaps", "secrets")}
        assert counts == {"pods": 3, "jobs": 1, "services": 1, "configmaps": 1, "secrets": 1}, name
