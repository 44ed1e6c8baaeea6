"""Kueue v0.10.0 admits whole groups of plain pods against a ClusterQueue's quota.

Each story uses a ClusterQueue with quota for one group of 2 pods x 2 GPUs (the cluster has 8 GPUs: the quota, not
the nodes, is what runs out). No operator runs here: the pods are created as raw objects, labelled as a user would.
What each test asserts is what `kubectl get pods,workloads` shows: which pods are gated, bound and Running, and what
the waiting group's Workload says.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import tests.support.kueue_harness as kueue
from tests.support.cluster import GPU_RESOURCE, ControlPlane, KubectlError, wait_for_free_gpus, wait_until

PODS_PER_GROUP = 2
GPUS_PER_POD = 2
GROUP_QUOTA = {"cpu": "8", "memory": "16Gi", GPU_RESOURCE: str(PODS_PER_GROUP * GPUS_PER_POD)}
FLAVOR = "default"
LOCAL_QUEUE = "training"
IMAGE = "registry.example/kubetrain/worker:1"
ADMIT_TIMEOUT = 60.0


def pod(name: str) -> dict[str, Any]:
    container = {"name": "main", "image": IMAGE, "command": ["sleep", "infinity"],
                 "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {GPU_RESOURCE: str(GPUS_PER_POD)}}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"restartPolicy": "Never", "containers": [container]}}


def group(name: str, priority_class: str | None = None) -> list[dict[str, Any]]:
    """The pods of group `name`, queued in LOCAL_QUEUE."""
    return [kueue.join_pod_group(pod(f"{name}-{index}"), LOCAL_QUEUE, name, PODS_PER_GROUP, priority_class)
            for index in range(PODS_PER_GROUP)]


def create(plane: ControlPlane, namespace: str, manifests: list[dict[str, Any]]) -> None:
    document = {"apiVersion": "v1", "kind": "List", "items": manifests}
    plane.kubectl("create", "--namespace", namespace, "--filename=-", input=json.dumps(document))


def pods_of(plane: ControlPlane, namespace: str, name: str) -> list[dict[str, Any]]:
    """The pods of group `name`, by name."""
    items = json.loads(plane.kubectl("get", "pods", "--namespace", namespace, "--output=json",
                                     f"--selector={kueue.POD_GROUP_NAME_LABEL}={name}"))["items"]
    return sorted(items, key=lambda item: item["metadata"]["name"])


def gated(pod: dict[str, Any]) -> bool:
    return {"name": kueue.ADMISSION_GATE} in pod["spec"].get("schedulingGates", [])


def running(pod: dict[str, Any]) -> bool:
    return bool(pod["spec"].get("nodeName")) and pod["status"].get("phase") == "Running"


def all_running(plane: ControlPlane, namespace: str, name: str) -> bool:
    pods = pods_of(plane, namespace, name)
    return len(pods) == PODS_PER_GROUP and all(running(p) and not gated(p) for p in pods)


def all_waiting(plane: ControlPlane, namespace: str, name: str) -> bool:
    """Every pod of the group is gated and bound to no node."""
    pods = pods_of(plane, namespace, name)
    return len(pods) == PODS_PER_GROUP and all(gated(p) and not p["spec"].get("nodeName") for p in pods)


def workload(plane: ControlPlane, namespace: str, name: str) -> dict[str, Any]:
    """The Workload of pod group `name` (Kueue names it after the group), or {}."""
    text = plane.kubectl("get", "workloads.kueue.x-k8s.io", name, "--namespace", namespace, "--ignore-not-found",
                         "--output=json")
    return json.loads(text) if text.strip() else {}


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    """The condition of type `kind` of `obj`, or {}."""
    conditions = obj.get("status", {}).get("conditions", [])
    return next((c for c in conditions if c["type"] == kind), {})


def holds(check: Callable[[], bool], seconds: float, message: str) -> None:
    """`check` is true at every look for `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert check(), message
        time.sleep(1.0)


@contextmanager
def watch(plane: ControlPlane, namespace: str, kind: str) -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """Every (event type, object) a watch on `kind` in `namespace` sees while the block runs; filled at its end."""
    events: list[tuple[str, dict[str, Any]]] = []
    command = [str(plane.kubectl_path), f"--kubeconfig={plane.kubeconfig}", "get", kind, "--namespace", namespace,
               "--watch", "--output-watch-events", "--output=json"]
    with tempfile.TemporaryFile() as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.DEVNULL)
        try:
            wait_until(lambda: out.tell() > 0 or process.poll() is not None, message=f"a watch on {kind}")
            yield events
        finally:
            process.terminate()
            process.wait(10)
        out.seek(0)
        text, decoder, index = out.read().decode(), json.JSONDecoder(), 0
    while index < len(text.rstrip()):
        event, index = decoder.raw_decode(text, index)
        events.append((event["type"], event["object"]))
        while index < len(text) and text[index].isspace():
            index += 1


QueueFactory = Callable[..., str]


@pytest.fixture
def queue(kueue_control_plane: ControlPlane, kueue_namespace: str) -> Iterator[QueueFactory]:
    """Creates the test's ClusterQueue (named after its namespace, quota GROUP_QUOTA, options as in
    kueue.cluster_queue) and LocalQueue LOCAL_QUEUE in the namespace; returns the ClusterQueue's name."""
    plane = kueue_control_plane
    wait_for_free_gpus(plane)
    plane.apply(kueue.resource_flavor(FLAVOR))

    def make(**options: Any) -> str:
        plane.apply(kueue.cluster_queue(kueue_namespace, FLAVOR, GROUP_QUOTA, **options))
        plane.apply(kueue.local_queue(kueue_namespace, LOCAL_QUEUE, kueue_namespace))
        return kueue_namespace

    yield make
    plane.kubectl("delete", "clusterqueues.kueue.x-k8s.io", kueue_namespace, "--ignore-not-found", "--wait=false")


def test_one_group_runs_the_other_waits_gated_with_its_reason_then_runs_when_the_first_succeeds(
        kueue_control_plane: ControlPlane, kueue_namespace: str, queue: QueueFactory) -> None:
    plane, namespace = kueue_control_plane, kueue_namespace
    cluster_queue = queue()
    create(plane, namespace, group("group-a") + group("group-b"))

    def one_running() -> str:
        """The group whose pods all run while the other's all wait, or ''."""
        for first, second in (("group-a", "group-b"), ("group-b", "group-a")):
            if all_running(plane, namespace, first) and all_waiting(plane, namespace, second):
                return first
        return ""

    first = wait_until(one_running, ADMIT_TIMEOUT, message="Kueue to admit exactly one of the two groups")
    second = "group-b" if first == "group-a" else "group-a"
    holds(lambda: all_waiting(plane, namespace, second), 5.0, f"{second} got a pod ungated or bound")
    assert condition(workload(plane, namespace, first), "Admitted")["status"] == "True"
    reserved = condition(workload(plane, namespace, second), "QuotaReserved")
    print(f"{second} waits: QuotaReserved={reserved['status']} reason={reserved['reason']}: {reserved['message']}")
    assert reserved["status"] == "False" and reserved["reason"] == "Pending"
    assert GPU_RESOURCE in reserved["message"] or cluster_queue in reserved["message"]

    started = time.monotonic()
    for member in pods_of(plane, namespace, first):
        plane.set_pod_outcome(namespace, member["metadata"]["name"], phase="Succeeded")
    wait_until(lambda: all_running(plane, namespace, second), ADMIT_TIMEOUT,
               message=f"{second} to run once {first} succeeded")
    print(f"{second} runs {time.monotonic() - started:.1f}s after {first}'s pods were told to succeed")
    assert condition(workload(plane, namespace, first), "Finished")["status"] == "True"


def test_a_pod_without_a_queue_name_is_not_gated_and_runs(
        kueue_control_plane: ControlPlane, kueue_namespace: str, queue: QueueFactory) -> None:
    plane, namespace = kueue_control_plane, kueue_namespace
    queue()
    create(plane, namespace, [pod("plain")])

    def plain_running() -> dict[str, Any]:
        found = plane.get("pod", "plain", namespace)
        return found if running(found) else {}

    running_pod = wait_until(plain_running, ADMIT_TIMEOUT, message="the plain pod to run")
    assert not gated(running_pod)
    assert kueue.QUEUE_NAME_LABEL not in running_pod["metadata"].get("labels", {})
    assert not running_pod["metadata"].get("finalizers")
    assert not workload(plane, namespace, "plain")


def a_running_and_b_queued(plane: ControlPlane, namespace: str, queue: QueueFactory,
                           not_retriable: bool) -> list[str]:
    """group-a running and group-b's Workload made, in a queue with room for one group; group-a's pod names, marked
    `retriable-in-group: "false"` when `not_retriable`."""
    queue()
    create(plane, namespace, group("group-a"))
    wait_until(lambda: all_running(plane, namespace, "group-a"), ADMIT_TIMEOUT, message="group-a to run")
    create(plane, namespace, group("group-b"))
    wait_until(lambda: workload(plane, namespace, "group-b"), ADMIT_TIMEOUT, message="group-b's Workload")
    names = [member["metadata"]["name"] for member in pods_of(plane, namespace, "group-a")]
    if not_retriable:
        plane.kubectl("annotate", "pods", *names, "--namespace", namespace, "--overwrite",
                      f"{kueue.RETRIABLE_IN_GROUP_ANNOTATION}=false")
    return names


@pytest.mark.parametrize("not_retriable", [False, True], ids=["retriable", "not-retriable"])
def test_deleting_a_running_groups_pods_admits_the_next_group(
        kueue_control_plane: ControlPlane, kueue_namespace: str, queue: QueueFactory, not_retriable: bool) -> None:
    """The Workload is owned by its pods: the garbage collector deletes it with the last of them, marked or not."""
    plane, namespace = kueue_control_plane, kueue_namespace
    names = a_running_and_b_queued(plane, namespace, queue, not_retriable)
    holds(lambda: all_waiting(plane, namespace, "group-b"), 3.0, "group-b got a pod ungated while group-a runs")
    started = time.monotonic()
    plane.kubectl("delete", "pods", *names, "--namespace", namespace, "--wait=false")
    wait_until(lambda: all_running(plane, namespace, "group-b"), ADMIT_TIMEOUT,
               message="group-b to run once group-a's pods were deleted")
    print(f"group-b runs {time.monotonic() - started:.1f}s after group-a's pods were deleted")
    wait_until(lambda: not workload(plane, namespace, "group-a"), ADMIT_TIMEOUT,
               message="group-a's Workload to go with its pods")


@pytest.mark.parametrize("not_retriable", [False, True], ids=["retriable", "not-retriable"])
def test_a_failed_group_frees_its_quota_only_when_marked_not_retriable(
        kueue_control_plane: ControlPlane, kueue_namespace: str, queue: QueueFactory, not_retriable: bool) -> None:
    plane, namespace = kueue_control_plane, kueue_namespace
    names = a_running_and_b_queued(plane, namespace, queue, not_retriable)
    for name in names:
        plane.set_pod_outcome(namespace, name, phase="Failed")

    if not_retriable:
        wait_until(lambda: all_running(plane, namespace, "group-b"), ADMIT_TIMEOUT,
                   message="group-b to run once group-a failed")
        finished = condition(workload(plane, namespace, "group-a"), "Finished")
        print(f"group-a Finished={finished['status']} reason={finished['reason']}: {finished['message']}")
        assert finished["status"] == "True"
        return
    # A retriable group keeps its quota and waits for replacement pods; its failed pods keep Kueue's finalizer.
    holds(lambda: all_waiting(plane, namespace, "group-b"), 10.0, "group-b got a pod ungated after group-a failed")
    waiting = condition(workload(plane, namespace, "group-a"), "WaitingForReplacementPods")
    print(f"group-a WaitingForReplacementPods={waiting['status']} reason={waiting['reason']}: {waiting['message']}")
    assert waiting["status"] == "True"
    assert all(member["metadata"].get("finalizers") == ["kueue.x-k8s.io/managed"]
               for member in pods_of(plane, namespace, "group-a"))
    # A replacement joins the admitted Workload and runs at once.
    replacement = group("group-a")[0]
    replacement["metadata"]["name"] = "group-a-replacement"
    create(plane, namespace, [replacement])
    wait_until(lambda: running(plane.get("pod", "group-a-replacement", namespace)), ADMIT_TIMEOUT,
               message="the replacement pod to run")


def test_an_incomplete_group_gets_no_workload_until_its_last_pod_exists(
        kueue_control_plane: ControlPlane, kueue_namespace: str, queue: QueueFactory) -> None:
    plane, namespace = kueue_control_plane, kueue_namespace
    queue()
    first, last = group("group-a")
    create(plane, namespace, [first])
    holds(lambda: not workload(plane, namespace, "group-a") and gated(plane.get("pod", "group-a-0", namespace)),
          5.0, "Kueue made a Workload for 1 of 2 pods, or ungated it")
    events = plane.kubectl("get", "events", "--namespace", namespace, "--output=json",
                           "--field-selector=involvedObject.name=group-a-0")
    print("events of the lone pod:", [(e["reason"], e["message"]) for e in json.loads(events)["items"]])
    create(plane, namespace, [last])
    wait_until(lambda: all_running(plane, namespace, "group-a"), ADMIT_TIMEOUT, message="the whole group to run")


@pytest.mark.parametrize(("key", "value", "message"), [
    (kueue.QUEUE_NAME_LABEL, "Training_Queue", "a lowercase RFC 1123 subdomain"),
    (kueue.POD_GROUP_TOTAL_COUNT_ANNOTATION, "two", 'parsing "two": invalid syntax'),
    (kueue.POD_GROUP_TOTAL_COUNT_ANNOTATION, "0", "group total count should be greater than zero"),
])
def test_kueues_webhook_refuses_a_pod_with_a_bad_queue_label_or_group_count(
        kueue_control_plane: ControlPlane, kueue_namespace: str, key: str, value: str, message: str) -> None:
    manifest = group("group-a")[0]
    place = "labels" if key == kueue.QUEUE_NAME_LABEL else "annotations"
    manifest["metadata"][place][key] = value
    with pytest.raises(KubectlError) as refused:
        create(kueue_control_plane, kueue_namespace, [manifest])
    print(refused.value.stderr.strip())
    assert 'admission webhook "vpod.kb.io" denied the request' in refused.value.stderr
    assert f"{place}[{key}]" in refused.value.stderr and message in refused.value.stderr


def test_a_higher_priority_group_preempts_a_running_one_whose_pods_are_deleted(
        kueue_control_plane: ControlPlane, kueue_namespace: str, queue: QueueFactory) -> None:
    plane, namespace = kueue_control_plane, kueue_namespace
    queue(within_cluster_queue="LowerPriority")
    low, high = f"{namespace}-low", f"{namespace}-high"
    plane.apply(kueue.workload_priority_class(low, 100))
    plane.apply(kueue.workload_priority_class(high, 1000))
    try:
        create(plane, namespace, group("low", low))
        wait_until(lambda: all_running(plane, namespace, "low"), ADMIT_TIMEOUT, message="the low group to run")
        evicted_uid = workload(plane, namespace, "low")["metadata"]["uid"]
        with watch(plane, namespace, "pods") as pod_events, watch(plane, namespace, "workloads") as workload_events:
            create(plane, namespace, group("high", high))
            wait_until(lambda: all_running(plane, namespace, "high"), ADMIT_TIMEOUT, message="the high group to run")
            wait_until(lambda: not pods_of(plane, namespace, "low"), ADMIT_TIMEOUT,
                       message="the preempted group's pods to be deleted")
            wait_until(lambda: not workload(plane, namespace, "low"), ADMIT_TIMEOUT,
                       message="the preempted group's Workload to go with its pods")
        # What Kueue did to the low group, from every change the watches saw.
        for kind, obj in pod_events:
            if obj["metadata"]["name"].startswith("low-"):
                conditions = [(c["type"], c.get("reason")) for c in obj["status"].get("conditions", [])
                              if c["type"] not in ("Initialized", "ContainersReady", "PodReadyToStartContainers")]
                print(f"{kind} pod {obj['metadata']['name']}: deleting={'deletionTimestamp' in obj['metadata']} "
                      f"finalizers={obj['metadata'].get('finalizers')} {conditions}")
        low_workload = [obj for _, obj in workload_events if obj["metadata"]["name"] == "low"]
        for kind in ("Evicted", "Preempted", "WaitingForReplacementPods"):
            found = condition(low_workload[-1], kind)
            print(f"low Workload {kind}: {found.get('status')} {found.get('reason')}: {found.get('message')}")
        assert condition(low_workload[-1], "Evicted").get("reason") == "Preempted"
        targets = [condition(obj, "TerminationTarget") for _, obj in pod_events if obj["metadata"]["name"] == "low-0"]
        assert any(target.get("reason") == "WorkloadEvictedDueToPreempted" for target in targets)

        # Pods made again under the same group name wait for quota in a new Workload.
        create(plane, namespace, group("low", low))
        again = wait_until(lambda: workload(plane, namespace, "low"), ADMIT_TIMEOUT, message="a Workload for 'low'")
        assert again["metadata"]["uid"] != evicted_uid
        holds(lambda: all_waiting(plane, namespace, "low"), 3.0, "the recreated low group got a pod ungated")
        reserved = condition(workload(plane, namespace, "low"), "QuotaReserved")
        print(f"recreated low group: QuotaReserved={reserved.get('status')} {reserved.get('reason')}: "
              f"{reserved.get('message')}")
        assert reserved.get("status") == "False"
    finally:
        plane.kubectl("delete", "workloadpriorityclasses.kueue.x-k8s.io", low, high, "--ignore-not-found")
