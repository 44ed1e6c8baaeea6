"""Two training jobs that each want 6 of the cluster's 8 GPUs (3 workers x 2 GPUs on 4 nodes x 2 GPUs), their workers
created at the same time, interleaved, as two operators would create them.

Without a gang both jobs hold part of the cluster and neither ever starts: the deadlock users of mpi-operator and
Trainer report. With a real gang scheduler (scheduler-plugins' Coscheduling, Volcano) one job gets all its workers,
the other waits with none bound, and starts whole when the first finishes. No operator runs here: the pods and
PodGroups are created as raw objects.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import tests.support.gang_schedulers as gang
from tests.support.cluster import GPU_RESOURCE, ControlPlane, wait_for_free_gpus, wait_until

JOBS = ("job-a", "job-b")
WORKERS = 3
GPUS_PER_WORKER = 2
JOB_LABEL = "kubetrain.dev/test-job"
IMAGE = "registry.example/kubetrain/worker:1"
SCHEDULE_TIMEOUT = 180.0  # a gang scheduler backs a rejected gang off and tries again; a loaded machine is slow


def worker_pod(job: str, index: int) -> dict[str, Any]:
    container = {"name": "main", "image": IMAGE, "command": ["sleep", "infinity"],
                 "resources": {"limits": {GPU_RESOURCE: str(GPUS_PER_WORKER)}}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{job}-worker-{index}", "labels": {JOB_LABEL: job}},
            "spec": {"restartPolicy": "Never", "containers": [container]}}


def interleaved_workers(scheduler: str | None) -> list[dict[str, Any]]:
    """Every worker of both jobs, in the order a-0, b-0, a-1, b-1, ...; members of their job's gang if `scheduler`."""
    pods = [worker_pod(job, index) for index in range(WORKERS) for job in JOBS]
    if scheduler is None:
        return pods
    return [gang.join_pod_group(scheduler, pod, pod["metadata"]["labels"][JOB_LABEL]) for pod in pods]


def create_all(plane: ControlPlane, namespace: str, manifests: list[dict[str, Any]]) -> None:
    """One request stream, in order: the scheduler sees the workers arrive interleaved."""
    document = {"apiVersion": "v1", "kind": "List", "items": manifests}
    plane.kubectl("create", "--namespace", namespace, "--filename=-", input=json.dumps(document))


def workers(plane: ControlPlane, namespace: str) -> list[dict[str, Any]]:
    return json.loads(plane.kubectl("get", "pods", "--namespace", namespace, "--output=json"))["items"]


def running_by_job(plane: ControlPlane, namespace: str) -> dict[str, int]:
    """How many workers of each job are bound to a node and not finished: what `kubectl get pods` shows Running."""
    counts = dict.fromkeys(JOBS, 0)
    for pod in workers(plane, namespace):
        if pod["spec"].get("nodeName") and pod["status"].get("phase") not in ("Succeeded", "Failed"):
            counts[pod["metadata"]["labels"][JOB_LABEL]] += 1
    return counts


def pending_by_job(plane: ControlPlane, namespace: str) -> dict[str, int]:
    counts = dict.fromkeys(JOBS, 0)
    for pod in workers(plane, namespace):
        if not pod["spec"].get("nodeName"):
            counts[pod["metadata"]["labels"][JOB_LABEL]] += 1
    return counts


def unschedulable(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
               for c in pod.get("status", {}).get("conditions", []))


def holds(condition: Callable[[], bool], seconds: float, message: str) -> None:
    """`condition` is true at every look for `seconds` (a scheduler's later pass does not undo it)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert condition(), message
        time.sleep(1.0)


def finish(plane: ControlPlane, namespace: str, job: str) -> None:
    """The job's workers succeed, as when training ends; their GPUs are free again."""
    for index in range(WORKERS):
        plane.set_pod_outcome(namespace, f"{job}-worker-{index}", phase="Succeeded")


@pytest.fixture
def cluster(gang_control_plane: ControlPlane) -> Iterator[ControlPlane]:
    gpus = sum(int(node["status"]["allocatable"][GPU_RESOURCE]) for node in json.loads(
        gang_control_plane.kubectl("get", "nodes", "--output=json"))["items"])
    assert gpus == 8, "these stories need a cluster of exactly 8 GPUs"
    wait_for_free_gpus(gang_control_plane)
    yield gang_control_plane


def test_without_a_gang_two_jobs_hold_part_of_the_gpus_and_neither_starts(
        cluster: ControlPlane, gang_namespace: str) -> None:
    create_all(cluster, gang_namespace, interleaved_workers(scheduler=None))

    def both_stuck() -> bool:
        return sum(unschedulable(pod) for pod in workers(cluster, gang_namespace)) == 2

    wait_until(both_stuck, message="the default scheduler to give up on the last worker of each job")
    # What a user sees: each job has 2 of its 3 workers running (4 GPUs held each, all 8 in use) and 1 pending for
    # lack of GPUs, and neither job can ever start training.
    assert running_by_job(cluster, gang_namespace) == {"job-a": 2, "job-b": 2}
    assert pending_by_job(cluster, gang_namespace) == {"job-a": 1, "job-b": 1}
    for pod in workers(cluster, gang_namespace):
        if not pod["spec"].get("nodeName"):
            [scheduled] = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
            assert f"Insufficient {GPU_RESOURCE}" in scheduled["message"]


@pytest.mark.parametrize("scheduler", gang.GANG_SCHEDULERS)
def test_with_a_gang_one_job_gets_every_worker_and_the_other_waits_with_none_then_starts(
        cluster: ControlPlane, gang_namespace: str, scheduler: str) -> None:
    groups = [gang.pod_group_manifest(scheduler, job, min_member=WORKERS) for job in JOBS]
    create_all(cluster, gang_namespace, groups + interleaved_workers(scheduler))

    def whole_job() -> str:
        """The job with every worker running while the other has none, or ''."""
        counts = running_by_job(cluster, gang_namespace)
        return next((job for job in JOBS if counts[job] == WORKERS and sum(counts.values()) == WORKERS), "")

    first = wait_until(whole_job, SCHEDULE_TIMEOUT,
                       message=f"{scheduler} to place one job's {WORKERS} workers and none of the other's")
    [second] = [job for job in JOBS if job != first]
    # The waiting job holds nothing, pass after pass of the scheduler: no GPU is bound for a job that cannot start.
    holds(lambda: running_by_job(cluster, gang_namespace) == {first: WORKERS, second: 0}, 10.0,
          message=f"{second} got a worker bound while {first} runs")
    assert pending_by_job(cluster, gang_namespace) == {first: 0, second: WORKERS}

    finish(cluster, gang_namespace, first)

    def second_whole() -> bool:
        return running_by_job(cluster, gang_namespace) == {first: 0, second: WORKERS}

    wait_until(second_whole, SCHEDULE_TIMEOUT, message=f"{scheduler} to place {second}'s workers after {first} ended")
    assert pending_by_job(cluster, gang_namespace) == {first: 0, second: 0}
