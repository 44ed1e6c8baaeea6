"""The test control plane behaves like a GPU cluster where the test decides how each pod ends."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.cluster import GPU_RESOURCE, UNPULLABLE_IMAGE_PREFIX, ControlPlane, KubectlError, wait_until

IMAGE = "registry.example/kubetrain/worker:1"


def pod_manifest(name: str, gpus: int = 0, image: str = IMAGE, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": image, "command": ["sleep", "infinity"]}
    if gpus:
        container["resources"] = {"limits": {GPU_RESOURCE: str(gpus)}}
    metadata: dict[str, Any] = {"name": name}
    if owner:
        metadata["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": {"restartPolicy": "Never", "containers": [container]}}


def job_manifest(name: str, backoff_limit: int = 0) -> dict[str, Any]:
    template = {"spec": pod_manifest("unused")["spec"]}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"backoffLimit": backoff_limit, "template": template}}


def create(plane: ControlPlane, namespace: str, manifest: dict[str, Any]) -> None:
    plane.kubectl("create", "--namespace", namespace, "--filename=-", input=json.dumps(manifest))


def conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in obj.get("status", {}).get("conditions", [])}


def wait_for_pod(plane: ControlPlane, namespace: str, name: str, phase: str) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        pod = plane.get("pod", name, namespace)
        return pod if pod.get("status", {}).get("phase") == phase else None

    return wait_until(reached, message=f"pod {namespace}/{name} to be {phase}")


def job_pod(plane: ControlPlane, namespace: str, job: str) -> dict[str, Any]:
    def running() -> dict[str, Any] | None:
        pods = plane.kubectl("get", "pods", "--namespace", namespace, f"--selector=job-name={job}", "--output=json")
        items = [p for p in json.loads(pods)["items"] if p.get("status", {}).get("phase") == "Running"]
        return items[0] if items else None

    return wait_until(running, message=f"a running pod of job {namespace}/{job}")


def test_gpu_pod_runs_and_is_ready_on_a_fake_gpu_node(control_plane: ControlPlane, namespace: str) -> None:
    create(control_plane, namespace, pod_manifest("trainer", gpus=2))

    pod = wait_for_pod(control_plane, namespace, "trainer", "Running")

    node = control_plane.get("node", pod["spec"]["nodeName"])
    assert node["status"]["allocatable"][GPU_RESOURCE] == "4"
    assert conditions(pod)["Ready"]["status"] == "True"
    [status] = pod["status"]["containerStatuses"]
    assert status["ready"] is True
    assert set(status["state"]) == {"running"}
    assert pod["status"]["podIP"]


def test_pod_asking_more_gpus_than_any_node_stays_pending_until_a_big_node_joins(
        control_plane: ControlPlane, namespace: str) -> None:
    create(control_plane, namespace, pod_manifest("greedy", gpus=8))

    def unschedulable() -> dict[str, Any] | None:
        scheduled = conditions(control_plane.get("pod", "greedy", namespace)).get("PodScheduled", {})
        return scheduled if scheduled.get("reason") == "Unschedulable" else None

    scheduled = wait_until(unschedulable, message="the scheduler to mark pod greedy Unschedulable")
    assert scheduled["status"] == "False"
    assert f"Insufficient {GPU_RESOURCE}" in scheduled["message"]
    assert control_plane.get("pod", "greedy", namespace)["status"]["phase"] == "Pending"

    control_plane.add_node("kwok-gpu-big", gpus=8)
    try:
        pod = wait_for_pod(control_plane, namespace, "greedy", "Running")
        assert pod["spec"]["nodeName"] == "kwok-gpu-big"
        control_plane.kubectl("delete", "pod", "greedy", "--namespace", namespace, "--wait=true")
    finally:
        control_plane.delete_node("kwok-gpu-big")
    with pytest.raises(KubectlError, match="not found"):
        control_plane.get("node", "kwok-gpu-big")


def test_job_completes_only_when_its_pod_is_made_to_succeed(control_plane: ControlPlane, namespace: str) -> None:
    create(control_plane, namespace, job_manifest("launcher"))
    pod = job_pod(control_plane, namespace, "launcher")
    assert conditions(pod)["Ready"]["status"] == "True"

    def counted() -> dict[str, Any] | None:
        job = control_plane.get("job", "launcher", namespace)
        return job if job["status"].get("ready") == 1 else None

    # Once the job controller has counted the ready pod, the pod still runs and the Job is still active.
    job = wait_until(counted, message="job launcher to count one ready pod")
    assert job["status"]["active"] == 1
    assert "Complete" not in conditions(job)
    assert control_plane.get("pod", pod["metadata"]["name"], namespace)["status"]["phase"] == "Running"

    control_plane.set_pod_outcome(namespace, pod["metadata"]["name"], phase="Succeeded")

    def complete() -> dict[str, Any] | None:
        job = control_plane.get("job", "launcher", namespace)
        return job if conditions(job).get("Complete", {}).get("status") == "True" else None

    job = wait_until(complete, message="job launcher to be Complete")
    assert job["status"]["succeeded"] == 1
    terminated = control_plane.get("pod", pod["metadata"]["name"], namespace)["status"]["containerStatuses"][0]
    assert terminated["state"]["terminated"]["reason"] == "Completed"
    assert terminated["state"]["terminated"]["exitCode"] == 0


def test_job_fails_when_its_pod_fails(control_plane: ControlPlane, namespace: str) -> None:
    create(control_plane, namespace, job_manifest("launcher", backoff_limit=0))
    pod = job_pod(control_plane, namespace, "launcher")

    control_plane.set_pod_outcome(namespace, pod["metadata"]["name"], phase="Failed", reason="Error", exit_code=3)

    def failed() -> dict[str, Any] | None:
        condition = conditions(control_plane.get("job", "launcher", namespace)).get("Failed", {})
        return condition if condition.get("status") == "True" else None

    assert wait_until(failed, message="job launcher to be Failed")["reason"] == "BackoffLimitExceeded"


@pytest.mark.parametrize(
    ("reason", "exit_code", "pod_reason"),
    [("OOMKilled", 137, None), ("Error", 2, None), ("Error", 137, "Evicted")],
)
def test_failed_pod_shows_the_terminated_reason_and_exit_code(
        control_plane: ControlPlane, namespace: str, reason: str, exit_code: int, pod_reason: str | None) -> None:
    create(control_plane, namespace, pod_manifest("worker-0", gpus=1))
    wait_for_pod(control_plane, namespace, "worker-0", "Running")

    control_plane.set_pod_outcome(namespace, "worker-0", phase="Failed", reason=reason, exit_code=exit_code,
                                  message="killed by the test", pod_reason=pod_reason)

    pod = wait_for_pod(control_plane, namespace, "worker-0", "Failed")
    [status] = pod["status"]["containerStatuses"]
    assert set(status["state"]) == {"terminated"}
    assert status["state"]["terminated"]["reason"] == reason
    assert status["state"]["terminated"]["exitCode"] == exit_code
    assert status["state"]["terminated"]["message"] == "killed by the test"
    assert conditions(pod)["Ready"]["status"] == "False"
    assert pod["status"].get("reason") == pod_reason


def test_set_pod_outcome_rejects_an_exit_code_that_contradicts_the_phase(control_plane: ControlPlane) -> None:
    with pytest.raises(ValueError, match="exit_code 0 does not fit phase Failed"):
        control_plane.set_pod_outcome("default", "any", phase="Failed", exit_code=0)


def test_unpullable_image_leaves_the_container_waiting_with_err_image_pull(
        control_plane: ControlPlane, namespace: str) -> None:
    image = f"{UNPULLABLE_IMAGE_PREFIX}kubetrain/worker:missing"
    create(control_plane, namespace, pod_manifest("worker-0", image=image))

    def waiting() -> dict[str, Any] | None:
        statuses = control_plane.get("pod", "worker-0", namespace).get("status", {}).get("containerStatuses", [])
        return statuses[0]["state"].get("waiting") if statuses else None

    state = wait_until(waiting, message="container of worker-0 to be waiting")
    assert state["reason"] == "ErrImagePull"
    assert image in state["message"]
    assert control_plane.get("pod", "worker-0", namespace)["status"]["phase"] == "Pending"


def test_deleted_pod_goes_away(control_plane: ControlPlane, namespace: str) -> None:
    create(control_plane, namespace, pod_manifest("worker-0"))
    wait_for_pod(control_plane, namespace, "worker-0", "Running")

    control_plane.kubectl("delete", "pod", "worker-0", "--namespace", namespace, "--wait=true")

    assert not control_plane.kubectl("get", "pods", "--namespace", namespace, "--output=name").strip()


def test_kwok_finishes_only_the_deletion_of_a_terminating_pod(control_plane: ControlPlane, namespace: str) -> None:
    """kwok's last DELETE of a pod is by name; the guard (kwok-guard.yaml) keeps it off a pod that is not terminating,
    as the kubelet's uid precondition keeps it off a new pod of the same name."""
    as_kwok = f"--kubeconfig={control_plane.kwok_kubeconfig}"  # the last --kubeconfig wins
    create(control_plane, namespace, pod_manifest("worker-0"))
    wait_for_pod(control_plane, namespace, "worker-0", "Running")

    with pytest.raises(KubectlError, match="kwok may delete only terminating pods"):
        control_plane.kubectl(as_kwok, "delete", "pod", "worker-0", "--namespace", namespace, "--grace-period=0",
                              "--force")
    assert control_plane.get("pod", "worker-0", namespace)["status"]["phase"] == "Running"

    control_plane.hold_deletion(namespace, "worker-0")
    control_plane.kubectl("delete", "pod", "worker-0", "--namespace", namespace, "--wait=false")
    control_plane.kubectl(as_kwok, "delete", "pod", "worker-0", "--namespace", namespace, "--grace-period=0", "--force")
    assert not control_plane.kubectl("get", "pods", "--namespace", namespace, "--output=name").strip()


def test_deleting_an_owner_garbage_collects_its_children(control_plane: ControlPlane, namespace: str) -> None:
    control_plane.kubectl("create", "configmap", "owner", "--namespace", namespace)
    owner = control_plane.get("configmap", "owner", namespace)
    reference = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    create(control_plane, namespace, pod_manifest("child", owner=reference))
    wait_for_pod(control_plane, namespace, "child", "Running")

    control_plane.kubectl("delete", "configmap", "owner", "--namespace", namespace)

    wait_until(lambda: not control_plane.kubectl("get", "pod", "child", "--namespace", namespace,
                                                 "--ignore-not-found", "--output=name").strip(),
               message="the garbage collector to remove pod child")


def test_new_namespace_gets_its_default_service_account(control_plane: ControlPlane) -> None:
    name = "fresh-namespace"
    control_plane.kubectl("create", "namespace", name)
    try:
        account = wait_until(
            lambda: control_plane.kubectl("get", "serviceaccount", "default", "--namespace", name,
                                          "--ignore-not-found", "--output=name").strip(),
            message=f"ServiceAccount {name}/default")
        assert account == "serviceaccount/default"
        ca = wait_until(
            lambda: control_plane.kubectl("get", "configmap", "kube-root-ca.crt", "--namespace", name,
                                          "--ignore-not-found", "--output=jsonpath={.data.ca\\.crt}"),
            message=f"ConfigMap {name}/kube-root-ca.crt")
        assert ca.startswith("-----BEGIN CERTIFICATE-----")
    finally:
        control_plane.kubectl("delete", "namespace", name, "--wait=false")
