"""An elastic job (spec.elastic) against a real API server and the operator: kubectl scale within the bounds, the
CRD's refusals, and a lost worker replaced while the launcher goes on."""

from __future__ import annotations

import json

import pytest

from kubetrain.contract import LABEL_ATTEMPT, LABEL_INDEX, LABEL_JOB, LABEL_ROLE
from tests.support.cluster import ControlPlane, KubectlError, wait_until
from tests.support.operator_harness import (
    OperatorProcess,
    children,
    create,
    events,
    get_training,
    live_pods,
    pause,
    status,
    training,
    wait_for_pods,
    wait_for_status,
)

ELASTIC = {"minWorkers": 1, "maxWorkers": 3}


def scale(plane: ControlPlane, namespace: str, name: str, replicas: int) -> str:
    return plane.kubectl("scale", "dtr", name, "--namespace", namespace, f"--replicas={replicas}")


def refused(plane: ControlPlane, *args: str) -> str:
    with pytest.raises(KubectlError) as error:
        plane.kubectl(*args)
    return error.value.stderr


def test_kubectl_scale_moves_an_elastic_job_within_its_bounds_only(crd: ControlPlane, namespace: str) -> None:
    create(crd, namespace, training("grow", workers=2, elastic=ELASTIC))
    create(crd, namespace, training("fixed", workers=2))

    assert "scaled" in scale(crd, namespace, "grow", 3)
    assert get_training(crd, namespace, "grow")["spec"]["workers"] == 3
    over = refused(crd, "scale", "dtr", "grow", "--namespace", namespace, "--replicas=4")
    assert "spec.workers" in over and "within elastic.minWorkers and elastic.maxWorkers" in over
    assert "spec.workers" in refused(crd, "scale", "dtr", "grow", "--namespace", namespace, "--replicas=0")

    static = refused(crd, "scale", "dtr", "fixed", "--namespace", namespace, "--replicas=3")
    assert "spec.workers: Forbidden: workers is immutable unless the job is elastic" in static
    assert get_training(crd, namespace, "fixed")["spec"]["workers"] == 2

    patch = '{"spec": {"elastic": null}}'
    removed = refused(crd, "patch", "dtr", "grow", "--namespace", namespace, "--type=merge", f"--patch={patch}")
    assert "elastic cannot be added or removed" in removed
    bounds = '{"spec": {"elastic": {"maxWorkers": 5}}}'
    assert "elastic is immutable" in refused(crd, "patch", "dtr", "grow", "--namespace", namespace, "--type=merge",
                                             f"--patch={bounds}")


def test_a_lost_worker_is_replaced_and_nothing_else_restarts(crd: ControlPlane, namespace: str,
                                                             operator: OperatorProcess) -> None:
    create(crd, namespace, training("elastic", workers=2, elastic=ELASTIC))
    running = wait_for_status(crd, namespace, "elastic", operator, phase="Running")
    assert (running["workers"]["min"], running["workers"]["max"]) == (1, 3)
    wait_until(lambda: len(status(crd, namespace, "elastic")["workers"].get("members") or []) == 2,
               message="both workers recorded as members")
    launcher_uid = children(crd, namespace, "elastic", "jobs")[0]["metadata"]["uid"]
    ready_service = crd.get("service", "elastic-ready", namespace)
    assert not ready_service["spec"].get("publishNotReadyAddresses")

    old = {p["metadata"]["name"]: p["metadata"]["uid"] for p in live_pods(crd, namespace, "elastic")}
    crd.set_pod_outcome(namespace, "elastic-worker-1", phase="Failed", reason="Error", exit_code=137)

    def replaced() -> bool:
        pods = {p["metadata"]["name"]: p["metadata"]["uid"] for p in wait_for_pods(crd, namespace, "elastic", 2)}
        return pods.get("elastic-worker-1") not in (None, old["elastic-worker-1"])

    wait_until(replaced, timeout=120, message="a new elastic-worker-1")
    now = wait_for_status(crd, namespace, "elastic", operator, phase="Running")
    wait_until(lambda: "elastic-worker-1" in (status(crd, namespace, "elastic")["workers"].get("lastJoined") or ""),
               message="the replacement recorded as joined")
    now = status(crd, namespace, "elastic")
    assert now["restarts"] == 0 and now["attempt"] == 0
    assert now["workers"]["lastLeft"].startswith("elastic-worker-1 at ")
    assert "exit code 137" in now["workers"]["lastLeft"]
    assert children(crd, namespace, "elastic", "jobs")[0]["metadata"]["uid"] == launcher_uid  # never restarted
    assert {p["metadata"]["uid"] for p in live_pods(crd, namespace, "elastic")} >= {old["elastic-worker-0"]}
    reasons = [e["reason"] for e in events(crd, namespace, "elastic")]
    assert "WorkerLeft" in reasons and "WorkerJoined" in reasons and "WorkerFailed" not in reasons

    scale(crd, namespace, "elastic", 3)
    wait_for_pods(crd, namespace, "elastic", 3)
    wait_until(lambda: status(crd, namespace, "elastic")["workers"].get("total") == 3, message="3 workers wanted")
    wait_until(lambda: len(status(crd, namespace, "elastic")["workers"].get("members") or []) == 3,
               message="the third worker recorded as a member")
    assert status(crd, namespace, "elastic")["restarts"] == 0
    scale(crd, namespace, "elastic", 1)
    wait_for_pods(crd, namespace, "elastic", 1)
    assert children(crd, namespace, "elastic", "jobs")[0]["metadata"]["uid"] == launcher_uid
    wait_until(lambda: "scaled down to 1 workers" in (status(crd, namespace, "elastic")["workers"].get("lastLeft")
                                                       or ""), message="the scale-down recorded")


def ready_endpoints(plane: ControlPlane, namespace: str, service: str) -> list[tuple[str, str]]:
    """(pod name, IP) of every endpoint the Service's EndpointSlices list, whoever wrote them."""
    slices = json.loads(plane.kubectl("get", "endpointslices", "--namespace", namespace, "--output=json",
                                      f"--selector=kubernetes.io/service-name={service}"))["items"]
    return sorted((e.get("targetRef", {}).get("name", ""), e["addresses"][0])
                  for s in slices for e in s.get("endpoints") or [] if e.get("conditions", {}).get("ready", True))


def test_discovery_lists_only_the_ready_workers_the_operator_created(crd: ControlPlane, namespace: str,
                                                                      operator: OperatorProcess) -> None:
    """A pod someone else makes with the job's labels and a worker's hostname, and Ready, is not among the hosts the
    launcher discovers (the <name>-ready Service's endpoints, which its DNS name answers with). (One that also names
    the job as its owner is deleted by the operator as a worker it did not make.)"""
    create(crd, namespace, training("found", workers=2, elastic=ELASTIC))
    wait_for_status(crd, namespace, "found", operator, phase="Running")
    job = get_training(crd, namespace, "found")
    workers = {p["metadata"]["name"]: p["status"]["podIP"] for p in wait_for_pods(crd, namespace, "found", 2)}
    impostor = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "impostor", "labels": {LABEL_JOB: "found", LABEL_ROLE: "worker", LABEL_INDEX: "2",
                                                    LABEL_ATTEMPT: str(job["status"].get("attempt", 0))}},
        "spec": {"hostname": "found-worker-2", "subdomain": "found",
                 "containers": [{"name": "worker", "image": "busybox", "ports": [{"containerPort": 2222}]}]},
    }
    crd.kubectl("create", "--namespace", namespace, "--filename=-", input=json.dumps(impostor))
    wait_until(lambda: (crd.get("pod", "impostor", namespace).get("status") or {}).get("podIP"),
               message="the impostor running with an address")
    expected = sorted(workers.items())
    wait_until(lambda: ready_endpoints(crd, namespace, "found-ready") == expected,
               message="the ready Service to list both workers")
    pause(5)  # an endpoints controller following labels would have added the impostor by now
    assert ready_endpoints(crd, namespace, "found-ready") == expected
    assert crd.get("service", "found-ready", namespace)["spec"].get("selector") is None
