"""The operator with real gang schedulers (scheduler-plugins' Coscheduling, Volcano) on 8 fake GPUs: two jobs of 3
workers x 2 GPUs each, both with `scheduling.gang`: one gets every worker and runs, the other has none bound and says
GangUnschedulable, then starts when the first finishes, also when one of the first job's workers takes longer to go
than the others. (tests/controlplane/test_gang_schedulers.py shows the same two jobs deadlocked without a gang.)"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from kubetrain.contract import LABEL_ROLE
from tests.support.cluster import ControlPlane, wait_until
from tests.support.operator_harness import (
    OperatorProcess,
    children,
    create,
    install_crd,
    live_pods,
    operator_watching,
    status,
    training,
    wait_for_pods,
    wait_for_status,
)

pytestmark = pytest.mark.controlplane

JOBS = ("gang-a", "gang-b")
WORKERS, GPUS = 3, 2


@pytest.fixture
def gang_operator(gang_control_plane: ControlPlane, gang_namespace: str) -> Iterator[OperatorProcess]:
    install_crd(gang_control_plane)
    yield from operator_watching(gang_control_plane, gang_namespace)


def bound(plane: ControlPlane, namespace: str, job: str) -> int:
    return sum(1 for pod in live_pods(plane, namespace, job) if pod["spec"].get("nodeName"))


@pytest.mark.parametrize("scheduler", ["Coscheduling", "Volcano"])
def test_one_gang_runs_whole_and_the_other_waits_with_nothing_bound(
        gang_control_plane: ControlPlane, gang_namespace: str, gang_operator: OperatorProcess, scheduler: str) -> None:
    plane, namespace = gang_control_plane, gang_namespace
    for job in JOBS:
        create(plane, namespace, training(job, workers=WORKERS, resources={"gpusPerWorker": GPUS},
                                          scheduling={"gang": {"scheduler": scheduler}}))
    def one_running() -> str:
        phases = {job: status(plane, namespace, job).get("phase") for job in JOBS}
        return next((job for job in JOBS if phases[job] == "Running"), "")

    first = wait_until(one_running, 180, message=f"one job running under {scheduler}")
    [second] = [job for job in JOBS if job != first]
    waiting = wait_for_status(plane, namespace, second, gang_operator, reason="GangUnschedulable", timeout=120)
    assert waiting["phase"] == "Pending" and "(6 GPUs together)" in waiting["message"], waiting
    assert bound(plane, namespace, first) == WORKERS and bound(plane, namespace, second) == 0
    api_group = "scheduling.x-k8s.io" if scheduler == "Coscheduling" else "scheduling.volcano.sh"
    groups = json.loads(plane.kubectl("get", f"podgroups.{api_group}", "--namespace", namespace,
                                      "--output=json"))["items"]
    assert {g["metadata"]["name"]: (g["spec"]["minMember"], g["metadata"]["ownerReferences"][0]["name"])
            for g in groups} == {f"{job}-workers": (WORKERS, job) for job in JOBS}

    # Two workers of the first job linger after the third is gone, as on a node slow to stop them. scheduler-plugins'
    # controller updates the first gang's PodGroup when its first worker goes, not when the last does, and
    # Coscheduling retries the waiting gang (which then still lacks 4 GPUs) on PodGroup changes and pod adds only:
    # without the operator's mark on the finished gang's PodGroup, the second job would wait for the scheduler's
    # 5-minute flush.
    lingering = [f"{first}-worker-0", f"{first}-worker-1"]
    for pod in lingering:
        plane.hold_deletion(namespace, pod)
    try:
        launcher = wait_for_pods(plane, namespace, first, 1, role="launcher", timeout=120)[0]
        plane.set_pod_outcome(namespace, launcher["metadata"]["name"], "Succeeded")
        wait_for_status(plane, namespace, first, gang_operator, phase="Succeeded", timeout=120)
        wait_until(lambda: sorted(p["metadata"]["name"] for p in children(plane, namespace, first, "pods")
                                  if p["metadata"]["labels"].get(LABEL_ROLE) == "worker") == lingering, 60,
                   message=f"{first}'s third worker gone")
        time.sleep(5)  # the scheduler-plugins controller has seen it go, the scheduler has tried the second gang
        assert status(plane, namespace, second).get("phase") == "Pending" and bound(plane, namespace, second) == 0
    finally:
        for pod in lingering:
            plane.hold_deletion(namespace, pod, held=False)
    wait_for_status(plane, namespace, second, gang_operator, phase="Running", timeout=120)
    assert bound(plane, namespace, second) == WORKERS
