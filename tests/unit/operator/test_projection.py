"""The cache keeps a projection of each object, not its body: what every decision reads, and nothing a decision
does not (managedFields, pod specs, key material)."""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

import pytest
from dtr_bodies import training

from kubetrain.api import parse_job
from kubetrain.cache import TRAININGS, WORKLOADS, kept
from kubetrain.children import WATCHED_KINDS
from kubetrain.manifests.hosts import build_hosts_configmap
from kubetrain.manifests.launcher import build_launcher_job
from kubetrain.manifests.pods import build_worker_pod
from kubetrain.manifests.service import build_service
from kubetrain.plan import Children, decide
from kubetrain.projection import project

NOW = datetime(2026, 11, 24, 12, 0, 0)
MANAGED = [{"manager": "kube-apiserver", "operation": "Update", "fieldsV1": {"f:status": {"f:phase": {}}}}]


def stored(obj: dict[str, Any], uid: str) -> dict[str, Any]:
    """`obj` as the API server returns it: uid, resourceVersion, managedFields, server-set fields."""
    body = copy.deepcopy(obj)
    body["metadata"].update({"uid": uid, "resourceVersion": "42", "managedFields": MANAGED,
                             "creationTimestamp": "2026-11-24T11:59:00Z"})
    return body


def world(job: Any, workers: list[dict[str, Any]], launcher_status: dict[str, Any] | None) -> dict[str, list[Any]]:
    children: dict[str, list[Any]] = {child.field: [] for child in WATCHED_KINDS}
    for index, status in enumerate(workers):
        pod = stored(build_worker_pod(job, index, 0), f"uid-worker-{index}")
        pod["spec"]["nodeName"] = "node-a"
        pod["status"] = {"podIP": "10.0.0.1", "hostIP": "172.18.0.2", "qosClass": "Burstable", **status}
        children["pods"].append(pod)
    if launcher_status is not None:
        batch = stored(build_launcher_job(job, 0), "uid-launcher")
        batch["status"] = launcher_status
        children["jobs"].append(batch)
    service = stored(build_service(job), "uid-service")
    service["spec"].update({"clusterIP": "None", "clusterIPs": ["None"], "ipFamilies": ["IPv4"]})
    children["services"].append(service)
    children["configmaps"].append(stored(build_hosts_configmap(job), "uid-configmap"))
    children["secrets"].append(stored({"metadata": {"name": f"{job.name}-ssh"}, "data": {"id": "c2VjcmV0"}},
                                      "uid-secret"))
    return children


READY = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
         "containerStatuses": [{"name": "worker", "ready": True, "restartCount": 0, "image": "train:1",
                                "state": {"running": {"startedAt": "2026-11-24T11:59:30Z"}}}]}
SCENARIOS = {
    "all ready, no launcher yet": ([READY, READY], None),
    "running": ([READY, READY], {"active": 1, "startTime": "2026-11-24T11:59:40Z"}),
    "launcher succeeded": ([READY, READY], {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1}),
    "worker killed": ([READY, {"phase": "Failed", "containerStatuses": [
        {"name": "worker", "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]}],
        {"active": 1}),
    "unschedulable": ([READY, {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes: GPU"}]}], None),
    "image pull": ([READY, {"phase": "Pending", "containerStatuses": [
        {"name": "worker", "state": {"waiting": {"reason": "ImagePullBackOff", "message": "no such image"}}}]}],
        None),
    "node lost": ([READY, {"phase": "Failed", "reason": "Evicted", "conditions": [
        {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager", "message": "node gone"}]}],
        {"active": 1}),
}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_a_pass_decides_the_same_on_the_kept_objects_as_on_the_whole_bodies(scenario: str) -> None:
    job = parse_job(training())
    workers, launcher = SCENARIOS[scenario]
    whole = world(job, workers, launcher)
    projected = {field: [kept(field, obj) for obj in objects] for field, objects in whole.items()}
    status = {"phase": "Running", "attempt": 0, "restarts": 0, "startTime": "2026-11-24T11:59:00Z"}
    expected = decide(job, status, Children(**whole), NOW)
    assert decide(job, status, Children(**projected), NOW) == expected


def test_what_is_kept_of_a_pod_leaves_out_its_spec_and_managed_fields() -> None:
    job = parse_job(training())
    pod = world(job, [READY], None)["pods"][0]
    small = kept("pods", pod)
    assert "managedFields" not in small["metadata"] and small["metadata"]["uid"] == "uid-worker-0"
    assert small["spec"] == {"nodeName": "node-a"}
    assert small["status"]["containerStatuses"] == [{"name": "worker",
                                                     "state": {"running": {"startedAt": "2026-11-24T11:59:30Z"}}}]
    assert "hostIP" not in small["status"] and small["metadata"]["labels"] == pod["metadata"]["labels"]
    assert small["status"]["podIP"] == "10.0.0.1"  # an elastic job's ready EndpointSlice lists it
    assert len(repr(small)) * 4 < len(repr(pod))


def test_the_cache_keeps_no_key_material_of_the_ssh_secret() -> None:
    secret = world(parse_job(training()), [], None)["secrets"][0]
    assert set(kept("secrets", secret)) == {"metadata"}


def test_a_training_keeps_spec_and_status_but_not_kubectls_copy_of_the_spec() -> None:
    body = training()
    body["metadata"].update({"uid": "u", "generation": 3, "managedFields": MANAGED, "annotations": {
        "kubectl.kubernetes.io/last-applied-configuration": str(body["spec"])}})
    body["status"] = {"phase": "Running"}
    small = kept(TRAININGS, body)
    assert small["spec"] == body["spec"] and small["status"] == body["status"]
    assert small["metadata"]["generation"] == 3 and set(small["metadata"]) <= set(body["metadata"]) - {
        "managedFields", "annotations"}


def test_a_workload_keeps_its_status_not_the_pod_templates_of_its_spec() -> None:
    body = {"metadata": {"name": "cifar-0-1a2b3c4d", "namespace": "team", "managedFields": MANAGED},
            "spec": {"podSets": [{"template": {"spec": {"containers": []}}}]},
            "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "message": "no quota"}]}}
    assert kept(WORKLOADS, body) == {"metadata": {"name": "cifar-0-1a2b3c4d", "namespace": "team"},
                                     "status": body["status"]}
    owned = {**body, "metadata": {**body["metadata"], "ownerReferences": [{"kind": "Pod", "name": "cifar-worker-0"}]}}
    assert kept(WORKLOADS, owned)["metadata"]["ownerReferences"] == owned["metadata"]["ownerReferences"]


def test_a_projection_is_a_copy_and_applies_to_each_item_of_a_list() -> None:
    body = {"a": {"b": [{"c": 1, "d": 2}, {"c": 3}]}, "e": {"f": [1]}}
    small = project({"a": {"b": {"c": True}}, "e": True, "missing": True}, body)
    assert small == {"a": {"b": [{"c": 1}, {"c": 3}]}, "e": {"f": [1]}}
    small["e"]["f"].append(2)
    assert body["e"]["f"] == [1]
