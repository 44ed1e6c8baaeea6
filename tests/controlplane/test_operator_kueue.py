"""The operator under a real Kueue (v0.10.0, plain-Pod integration) on 8 fake GPUs, with a ClusterQueue of 4: jobs of
2 workers x 2 GPUs labelled `kueue.x-k8s.io/queue-name` wait for quota as a whole, say so in their status, start when
the quota frees, and a preempted job restarts without counting and queues again. A job without the label is left to
the scheduler."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

import tests.support.kueue_harness as kueue
from tests.support.cluster import ControlPlane, wait_until
from tests.support.operator_harness import (
    OperatorProcess,
    create,
    events,
    install_crd,
    live_pods,
    operator_watching,
    status,
    training,
    wait_for_pods,
    wait_for_status,
)

pytestmark = pytest.mark.controlplane

WORKERS, GPUS = 2, 2
QUEUE = "team"


@pytest.fixture
def kueue_operator(kueue_control_plane: ControlPlane, kueue_namespace: str) -> Iterator[OperatorProcess]:
    install_crd(kueue_control_plane)
    yield from operator_watching(kueue_control_plane, kueue_namespace, env={"KUBETRAIN_KUEUE": "true"})


@pytest.fixture
def queue(kueue_control_plane: ControlPlane, kueue_namespace: str) -> Iterator[str]:
    """A LocalQueue `team` in the test's namespace, in a ClusterQueue of its own with 4 GPUs (one job) that lets a
    higher WorkloadPriorityClass preempt a lower one. It covers cpu and memory too: Kueue refuses a pod set that
    requests a resource its ClusterQueue does not cover (the workers' init container asks for cpu)."""
    plane, cluster_queue = kueue_control_plane, f"gpus-{kueue_namespace}"[:63].rstrip("-")
    plane.apply(kueue.resource_flavor())
    quotas = {"cpu": "100", "memory": "1Ti", "nvidia.com/gpu": str(WORKERS * GPUS)}  # the GPUs are the limit
    plane.apply(kueue.cluster_queue(cluster_queue, "default", quotas, within_cluster_queue="LowerPriority"))
    plane.apply(kueue.local_queue(kueue_namespace, QUEUE, cluster_queue))
    for name, value in (("low", 10), ("high", 1000)):
        plane.apply(kueue.workload_priority_class(name, value))
    yield cluster_queue
    plane.kubectl("delete", "clusterqueue", cluster_queue, "--wait=false")


def queued(name: str, priority: str | None = None, **spec: object) -> dict:
    body = training(name, workers=WORKERS, resources={"gpusPerWorker": GPUS}, **spec)
    body["metadata"]["labels"] = {kueue.QUEUE_NAME_LABEL: QUEUE}
    if priority:
        body["metadata"]["labels"][kueue.PRIORITY_CLASS_LABEL] = priority
    return body


def gated_and_unbound(plane: ControlPlane, namespace: str, job: str) -> bool:
    pods = live_pods(plane, namespace, job)
    return len(pods) == WORKERS and all(
        not pod["spec"].get("nodeName") and {"name": kueue.ADMISSION_GATE} in pod["spec"].get("schedulingGates", [])
        for pod in pods)


def finish(plane: ControlPlane, namespace: str, job: str) -> None:
    """The launcher of `job` exits 0 (kwok plays the outcome)."""
    launcher = wait_for_pods(plane, namespace, job, 1, role="launcher", timeout=120)[0]
    plane.set_pod_outcome(namespace, launcher["metadata"]["name"], "Succeeded")


def test_a_job_waits_for_quota_as_a_whole_and_starts_seconds_after_the_first_one_ends(
        kueue_control_plane: ControlPlane, kueue_namespace: str, kueue_operator: OperatorProcess, queue: str) -> None:
    plane, namespace = kueue_control_plane, kueue_namespace
    create(plane, namespace, queued("first"))
    wait_for_status(plane, namespace, "first", kueue_operator, phase="Running", timeout=180)
    create(plane, namespace, queued("second"))
    waiting = wait_for_status(plane, namespace, "second", kueue_operator, reason="WaitingForQuota", timeout=120)
    print(f"second waits: {waiting['message']}")
    assert waiting["phase"] == "Pending" and f"LocalQueue {QUEUE}" in waiting["message"]
    wait_until(lambda: "nvidia.com/gpu" in status(plane, namespace, "second")["message"], 60,
               message="Kueue's words (the GPUs missing) in the second job's status")
    assert gated_and_unbound(plane, namespace, "second")
    wide = plane.kubectl("get", "dtr", "second", "--namespace", namespace, "--output=wide")
    assert "Pending" in wide and "WaitingForQuota" in wide, wide

    # A job without Kueue's label is the scheduler's alone: it runs on the 4 GPUs outside the ClusterQueue.
    create(plane, namespace, training("unqueued", workers=WORKERS, resources={"gpusPerWorker": GPUS}))
    wait_for_status(plane, namespace, "unqueued", kueue_operator, phase="Running", timeout=180)
    assert all(not pod["spec"].get("schedulingGates") and kueue.QUEUE_NAME_LABEL not in pod["metadata"]["labels"]
               for pod in live_pods(plane, namespace, "unqueued"))
    assert gated_and_unbound(plane, namespace, "second")

    finish(plane, namespace, "first")
    wait_for_status(plane, namespace, "first", kueue_operator, phase="Succeeded", timeout=120)
    ended = time.monotonic()
    wait_until(lambda: not live_pods(plane, namespace, "second")[0]["spec"].get("schedulingGates"), 120,
               message="Kueue to admit the second job once the first has ended")
    print(f"the second job was admitted {time.monotonic() - ended:.1f} s after the first one succeeded")
    running = wait_for_status(plane, namespace, "second", kueue_operator, phase="Running", timeout=120)
    admitted = next(c for c in running["conditions"] if c["type"] == "Admitted")
    assert admitted["status"] == "True" and f"ClusterQueue {queue}" in admitted["message"], admitted


def test_a_preempted_job_restarts_without_counting_and_waits_for_admission_again(
        kueue_control_plane: ControlPlane, kueue_namespace: str, kueue_operator: OperatorProcess, queue: str) -> None:
    plane, namespace = kueue_control_plane, kueue_namespace
    create(plane, namespace, queued("low", priority="low"))
    wait_for_status(plane, namespace, "low", kueue_operator, phase="Running", timeout=180)
    create(plane, namespace, queued("high", priority="high"))
    wait_for_status(plane, namespace, "high", kueue_operator, phase="Running", timeout=180)
    # Restarting lasts only until the new workers exist: the event stays, and the attempt and restarts tell the rest.
    again = wait_for_status(plane, namespace, "low", kueue_operator, reason="WaitingForQuota", attempt=1, timeout=120)
    assert again["phase"] == "Pending" and again["restarts"] == 0, again
    [preempted] = [e["message"] for e in events(plane, namespace, "low") if e["reason"] == "PreemptedByKueue"]
    print(f"low preempted: {preempted}")
    assert "Preempted to accommodate a workload" in preempted and "not counted" in preempted
    wait_until(lambda: gated_and_unbound(plane, namespace, "low"), 60, message="the low job's new workers gated")

    finish(plane, namespace, "high")
    back = wait_for_status(plane, namespace, "low", kueue_operator, phase="Running", timeout=180)
    assert back["restarts"] == 0 and back["attempt"] == 1, back


def test_suspending_a_running_job_releases_its_quota_to_the_next(
        kueue_control_plane: ControlPlane, kueue_namespace: str, kueue_operator: OperatorProcess, queue: str) -> None:
    plane, namespace = kueue_control_plane, kueue_namespace
    create(plane, namespace, queued("first"))
    wait_for_status(plane, namespace, "first", kueue_operator, phase="Running", timeout=180)
    create(plane, namespace, queued("second"))
    wait_for_status(plane, namespace, "second", kueue_operator, reason="WaitingForQuota", timeout=120)
    plane.kubectl("patch", "dtr", "first", "--namespace", namespace, "--type=merge",
                  "--patch", '{"spec": {"runPolicy": {"suspend": true}}}')
    wait_for_status(plane, namespace, "first", kueue_operator, phase="Suspended", timeout=120)
    wait_for_status(plane, namespace, "second", kueue_operator, phase="Running", timeout=180)


def test_the_documented_kueue_objects_are_accepted_by_kueue(kueue_control_plane: ControlPlane,
                                                            kueue_namespace: str) -> None:
    """The ResourceFlavor, ClusterQueue and LocalQueue of docs/kueue.md, as Kueue's CRDs and webhooks
    judge them (server-side dry run; the LocalQueue in the test's namespace)."""
    from tests.controlplane.test_documented_yaml import documented

    shown = [d.document for d in documented.other_kinds() if d.file == "docs/kueue.md"]
    assert sorted(doc["kind"] for doc in shown) == ["ClusterQueue", "LocalQueue", "ResourceFlavor"]
    for doc in shown:
        body = {**doc, "metadata": {k: v for k, v in doc["metadata"].items() if k != "namespace"}}
        namespace = ["--namespace", kueue_namespace] if doc["kind"] == "LocalQueue" else []
        out = kueue_control_plane.kubectl("apply", "--dry-run=server", *namespace, "--output=name", "--filename=-",
                                          input=json.dumps(body))
        assert doc["kind"].lower() in out, out


def test_a_bad_queue_label_fails_the_job_naming_the_label(
        kueue_control_plane: ControlPlane, kueue_namespace: str, kueue_operator: OperatorProcess) -> None:
    plane, namespace = kueue_control_plane, kueue_namespace
    body = queued("badlabel")
    body["metadata"]["labels"][kueue.QUEUE_NAME_LABEL] = "Team_A"
    create(plane, namespace, body)
    failed = wait_for_status(plane, namespace, "badlabel", kueue_operator, phase="Failed", timeout=60)
    assert failed["reason"] == "InvalidSpec" and kueue.QUEUE_NAME_LABEL in failed["message"], failed
    assert not live_pods(plane, namespace, "badlabel")
