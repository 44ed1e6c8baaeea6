"""The operator, for real, against a real API server: what a user sees after each thing they or the cluster do."""

from __future__ import annotations

import json

import yaml

from kubetrain.children import CHILD_KINDS
from kubetrain.contract import LABEL_ATTEMPT
from tests.support.cluster import ControlPlane, wait_until
from tests.support.operator_harness import (
    REPO,
    OperatorProcess,
    children,
    create,
    events,
    live_pods,
    posted,
    status,
    training,
    wait_for_pods,
    wait_for_status,
    wait_gone,
)


def _volumes(plane: ControlPlane, namespace: str, claims: list[str]) -> None:
    """hostPath PersistentVolumes bound to the claims a job.yaml names (the PV controller binds them for real)."""
    for claim in claims:
        pv_name = f"{namespace}-{claim}"[:63]
        plane.apply({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv_name},
                     "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"],
                              "storageClassName": "", "hostPath": {"path": f"/tmp/{pv_name}"},
                              "claimRef": {"namespace": namespace, "name": claim}}})
        plane.kubectl("apply", "--namespace", namespace, "--filename=-", input=json.dumps(
            {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": claim},
             "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": pv_name,
                      "resources": {"requests": {"storage": "1Gi"}}}}))
    for claim in claims:
        wait_until(lambda c=claim: plane.get("pvc", c, namespace).get("status", {}).get("phase") == "Bound",
                   message=f"PVC {claim} to be Bound")


def test_applied_job_yaml_gets_every_child_then_a_launcher(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess
) -> None:
    path = REPO / "jobs" / "cifar_mixup" / "job.yaml"
    body = yaml.safe_load(path.read_text())
    name = body["metadata"]["name"]
    claims = [body["spec"][v]["claimName"] for v in ("data", "checkpoint") if body["spec"].get(v, {}).get("claimName")]
    _volumes(control_plane, namespace, claims)
    control_plane.kubectl("apply", "--namespace", namespace, f"--filename={path}")

    workers = body["spec"].get("workers", 1)
    pods = wait_for_pods(control_plane, namespace, name, workers)
    for pod in pods:
        assert pod["spec"]["nodeName"].startswith("kwok-gpu-"), "worker pods run on the GPU nodes"
        limits = pod["spec"]["containers"][0]["resources"]["limits"]
        assert int(limits["nvidia.com/gpu"]) == body["spec"]["resources"]["gpusPerWorker"]
    for kind, child in (("secret", f"{name}-ssh"), ("configmap", f"{name}-hosts"), ("service", name)):
        assert control_plane.get(kind, child, namespace)["metadata"]["ownerReferences"][0]["name"] == name
    hostfile = control_plane.get("configmap", f"{name}-hosts", namespace)["data"]["hostfile"]
    assert hostfile.splitlines()[0].startswith(f"{name}-worker-0.{name}.{namespace}.svc slots=")

    wait_until(lambda: children(control_plane, namespace, name, "jobs"), message="the launcher Job")
    launcher_pods = wait_for_pods(control_plane, namespace, name, 1, role="launcher")
    assert "nvidia.com/gpu" not in json.dumps(launcher_pods[0]["spec"]["containers"][0]["resources"])
    current = wait_for_status(control_plane, namespace, name, operator, phase="Running")
    assert current["workers"] == {"ready": workers, "total": workers, "summary": f"{workers}/{workers}",
                                  "selector": f"kubetrain.dev/job-name={name},kubetrain.dev/role=worker"}
    assert current["startTime"]

    table = control_plane.kubectl("get", "dtr", "--namespace", namespace)
    header, row = table.splitlines()[:2]
    assert header.split()[:3] == ["NAME", "PHASE", "WORKERS"]
    assert row.split()[:3] == [name, "Running", f"{workers}/{workers}"]


def test_launcher_success_means_succeeded_then_cleanup_and_ttl(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess
) -> None:
    create(control_plane, namespace, training("done", runPolicy={"ttlSecondsAfterFinished": 5}))
    wait_for_pods(control_plane, namespace, "done", 1, role="launcher")
    launcher = live_pods(control_plane, namespace, "done", "launcher")[0]["metadata"]["name"]
    control_plane.set_pod_outcome(namespace, launcher, "Succeeded")

    final = wait_for_status(control_plane, namespace, "done", operator, phase="Succeeded")
    assert final["completionTime"] >= final["startTime"]
    assert {c["type"]: c["status"] for c in final["conditions"]}["Succeeded"] == "True"
    wait_until(lambda: not live_pods(control_plane, namespace, "done"), message="cleanPodPolicy Running")
    assert control_plane.get("pod", launcher, namespace)["status"]["phase"] == "Succeeded", "launcher logs are kept"
    wait_gone(control_plane, "distributedtraining", "done", namespace)
    wait_gone(control_plane, "secret", "done-ssh", namespace)  # children follow their owner


def test_failed_worker_restarts_everything_then_fails_after_backoff_limit(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess
) -> None:
    create(control_plane, namespace, training("flaky", runPolicy={"backoffLimit": 1}))
    first = {p["metadata"]["uid"] for p in wait_for_pods(control_plane, namespace, "flaky", 2)}
    wait_for_pods(control_plane, namespace, "flaky", 1, role="launcher")
    control_plane.set_pod_outcome(namespace, "flaky-worker-1", "Failed", reason="OOMKilled", exit_code=137)

    restarting = wait_for_status(control_plane, namespace, "flaky", operator, restarts=1)
    assert restarting["phase"] in ("Restarting", "Running")  # kwok may have brought the new attempt up already
    if restarting["phase"] == "Restarting":
        assert "flaky-worker-1" in restarting["message"] and "OOMKilled" in restarting["message"]
    said = [e["message"] for e in posted(control_plane, namespace, "flaky", "WorkerFailed")]
    assert any("flaky-worker-1" in m and "OOMKilled" in m for m in said), said
    second = wait_for_pods(control_plane, namespace, "flaky", 2)
    assert not first & {p["metadata"]["uid"] for p in second}, "every worker is recreated, not only the failed one"
    assert all(p["metadata"]["labels"][LABEL_ATTEMPT] == "1" for p in second)
    wait_for_pods(control_plane, namespace, "flaky", 1, role="launcher")
    wait_for_status(control_plane, namespace, "flaky", operator, phase="Running")

    control_plane.set_pod_outcome(namespace, "flaky-worker-0", "Failed", reason="Error", exit_code=3)
    failed = wait_for_status(control_plane, namespace, "flaky", operator, phase="Failed")
    assert failed["reason"] == "WorkerFailed" and "backoffLimit 1 reached" in failed["message"]
    assert "exit code 3" in failed["message"]
    warnings = [e for e in events(control_plane, namespace, "flaky") if e["type"] == "Warning"]
    assert any("flaky-worker-1" in e["message"] for e in warnings)
    assert control_plane.get("pod", "flaky-worker-0", namespace)["status"]["phase"] == "Failed", "failed pod kept"


def test_not_enough_gpus_leaves_pods_pending_and_says_why(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess
) -> None:
    create(control_plane, namespace, training("greedy", resources={"gpusPerWorker": 8}))
    pending = wait_for_status(control_plane, namespace, "greedy", operator, reason="Unschedulable")
    assert pending["phase"] == "Pending"
    assert "nvidia.com/gpu" in pending["message"]
    assert all(p["status"]["phase"] == "Pending" for p in live_pods(control_plane, namespace, "greedy"))
    assert not children(control_plane, namespace, "greedy", "jobs"), "no launcher without workers"
    assert operator.alive()


def test_suspend_deletes_pods_and_resume_brings_them_back(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess
) -> None:
    create(control_plane, namespace, training("pausable"))
    wait_for_pods(control_plane, namespace, "pausable", 1, role="launcher")
    secret_uid = control_plane.get("secret", "pausable-ssh", namespace)["metadata"]["uid"]
    patch = json.dumps({"spec": {"runPolicy": {"suspend": True}}})
    control_plane.kubectl("patch", "dtr", "pausable", "--namespace", namespace, "--type=merge", f"--patch={patch}")
    wait_for_status(control_plane, namespace, "pausable", operator, phase="Suspended")
    wait_until(lambda: not live_pods(control_plane, namespace, "pausable"), message="workers deleted on suspend")
    wait_until(lambda: not children(control_plane, namespace, "pausable", "jobs"), message="launcher deleted")
    assert control_plane.get("secret", "pausable-ssh", namespace)["metadata"]["uid"] == secret_uid

    patch = json.dumps({"spec": {"runPolicy": {"suspend": False}}})
    control_plane.kubectl("patch", "dtr", "pausable", "--namespace", namespace, "--type=merge", f"--patch={patch}")
    wait_for_pods(control_plane, namespace, "pausable", 2)
    wait_for_status(control_plane, namespace, "pausable", operator, phase="Running")
    assert status(control_plane, namespace, "pausable")["restarts"] == 0, "a resume is not a failure"


def test_active_deadline_fails_the_job(control_plane: ControlPlane, namespace: str, operator: OperatorProcess) -> None:
    create(control_plane, namespace, training("slow", runPolicy={"activeDeadlineSeconds": 8}))
    wait_for_pods(control_plane, namespace, "slow", 2)
    failed = wait_for_status(control_plane, namespace, "slow", operator, phase="Failed")
    assert failed["reason"] == "DeadlineExceeded" and "activeDeadlineSeconds=8" in failed["message"]
    wait_until(lambda: not children(control_plane, namespace, "slow", "jobs"), message="the launcher stopped")


def test_deleting_the_training_removes_every_child(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess
) -> None:
    create(control_plane, namespace, training("gone"))
    wait_for_pods(control_plane, namespace, "gone", 1, role="launcher")
    control_plane.kubectl("delete", "dtr", "gone", "--namespace", namespace)
    for kind in (child.plural for child in CHILD_KINDS if child.watched):
        wait_until(lambda k=kind: not children(control_plane, namespace, "gone", k), message=f"{kind} of gone")
    assert operator.alive()


def test_operator_killed_while_creating_children_leaves_exactly_one_set(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess
) -> None:
    names = [f"burst-{i}" for i in range(6)]
    for name in names:  # CPU-only, so the fake nodes' 8 GPUs do not limit how many run at once
        create(control_plane, namespace, training(name, resources={"gpusPerWorker": 0}))
    # kill -9 as soon as the first children show up, with most of them still to be made
    wait_until(lambda: any(children(control_plane, namespace, n, "configmaps") for n in names), interval=0.05,
               message="the first children")
    operator.kill()
    operator.start()
    for name in names:
        wait_for_status(control_plane, namespace, name, operator, phase="Running", timeout=180)
    operator.kill()  # and once more in the steady state, then check nothing is made twice
    operator.start()
    for name in names:
        wait_for_status(control_plane, namespace, name, operator, phase="Running", timeout=180)
        counts = {kind: len(children(control_plane, namespace, name, kind))
                  for kind in ("pods", "jobs", "services", "configmaps", "secrets")}
        assert counts == {"pods": 3, "jobs": 1, "services": 1, "configmaps": 1, "secrets": 1}, name


def test_spec_the_schema_cannot_catch_fails_with_the_field_named(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess
) -> None:
    # A toleration with operator Exists and a value: the schema leaves which fields go together to the pod's own
    # validation, which the parser applies first
    create(control_plane, namespace, training("clash", scheduling={"tolerations": [
        {"key": "gpu", "operator": "Exists", "value": "x"}]}))
    failed = wait_for_status(control_plane, namespace, "clash", operator, phase="Failed")
    assert failed["reason"] == "InvalidSpec" and "spec.scheduling.tolerations[0].value" in failed["message"]
    assert not live_pods(control_plane, namespace, "clash")
    assert operator.alive()


def test_worker_refused_by_a_full_quota_waits_saying_so_then_starts_when_there_is_room(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess
) -> None:
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "one-pod", "namespace": namespace},
             "spec": {"hard": {"pods": "1"}}}
    control_plane.apply(quota)
    wait_until(lambda: control_plane.get("resourcequota", "one-pod", namespace).get("status", {}).get("hard"),
               message="the quota controller to count the namespace")
    create(control_plane, namespace, training("squeezed", resources={"gpusPerWorker": 0}))
    waiting = wait_for_status(control_plane, namespace, "squeezed", operator, reason="QuotaExceeded")
    assert waiting["phase"] == "Pending" and "one-pod" in waiting["message"] and "ResourceQuota" in waiting["message"]
    assert "or change spec.workers" in waiting["message"]
    assert len(live_pods(control_plane, namespace, "squeezed")) == 1
    warned = [e for e in events(control_plane, namespace, "squeezed") if e["reason"] == "QuotaExceeded"]
    assert warned and warned[0]["type"] == "Warning" and "one-pod" in warned[0]["message"]

    control_plane.apply({**quota, "spec": {"hard": {"pods": "10"}}})
    wait_for_pods(control_plane, namespace, "squeezed", 2, timeout=180)
    started = wait_for_status(control_plane, namespace, "squeezed", operator, phase="Running", timeout=180)
    assert started["reason"] != "QuotaExceeded"
    assert "Traceback" not in operator.log_text(), "a refusal is reported, not a crash"


def test_worker_refused_by_admission_fails_the_job_with_the_api_servers_words(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess
) -> None:
    create(control_plane, namespace, training("urgent", scheduling={"priorityClassName": "no-such-class"}))
    failed = wait_for_status(control_plane, namespace, "urgent", operator, phase="Failed")
    assert failed["reason"] == "AdmissionDenied"
    assert "no PriorityClass with name no-such-class was found" in failed["message"]
    assert "Change spec.scheduling.priorityClassName: name a PriorityClass that exists" in failed["message"]
    assert not live_pods(control_plane, namespace, "urgent")
    wait_until(lambda: [e for e in events(control_plane, namespace, "urgent") if e["reason"] == "AdmissionDenied"],
               timeout=30, message="an AdmissionDenied event")
    assert "Traceback" not in operator.log_text()
    assert operator.alive()


def test_a_kind_the_cluster_does_not_serve_fails_the_job_naming_the_field(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess
) -> None:
    # this control plane has no gang scheduler: the API server does not know Volcano's PodGroup
    create(control_plane, namespace, training("herd", scheduling={"gang": {"scheduler": "Volcano"}}))
    failed = wait_for_status(control_plane, namespace, "herd", operator, phase="Failed")
    assert failed["reason"] == "KindNotServed"
    assert "the cluster does not serve PodGroup (scheduling.volcano.sh/v1beta1)" in failed["message"]
    assert "Change spec.scheduling.gang.scheduler: Volcano needs Volcano" in failed["message"]
    # the event is written after the status that ends the job
    warned = wait_until(lambda: [e for e in events(control_plane, namespace, "herd") if e["reason"] == "KindNotServed"],
                        timeout=30, message="a KindNotServed event")
    assert len(warned) == 1 and warned[0]["type"] == "Warning"
    assert not live_pods(control_plane, namespace, "herd")
    assert "Traceback" not in operator.log_text()
    assert operator.alive()
