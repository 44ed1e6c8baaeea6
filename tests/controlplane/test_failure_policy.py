"""spec.runPolicy.podFailurePolicy against a real API server: an eviction, a preemption by kube-scheduler and a lost
node restart the job without counting toward backoffLimit (and say so), the launcher's bad-configuration exit fails the
job at once, and a user's rule on an exit code is obeyed."""

from __future__ import annotations

import json

import pytest

from kubetrain.contract import LABEL_ATTEMPT
from tests.support.cluster import ControlPlane, wait_until
from tests.support.operator_harness import (
    OperatorProcess,
    create,
    events,
    live_pods,
    status,
    training,
    wait_for_pods,
    wait_for_status,
)

pytestmark = pytest.mark.controlplane


def restart_event(plane: ControlPlane, namespace: str, name: str, reason: str) -> dict:
    """The Warning event that reported a restart for `reason` (status moves on to Running at once)."""
    def found() -> dict | None:
        return next((e for e in events(plane, namespace, name) if e["type"] == "Warning" and e["reason"] == reason),
                    None)

    return wait_until(found, 120, message=f"a {reason} event for {name}")


def running_job(plane: ControlPlane, namespace: str, operator: OperatorProcess, name: str, **spec: object) -> None:
    create(plane, namespace, training(name, resources={"gpusPerWorker": 0}, **spec))
    wait_for_status(plane, namespace, name, operator, phase="Running", timeout=180)


def test_an_evicted_worker_restarts_the_job_without_counting(crd: ControlPlane, namespace: str,
                                                               operator: OperatorProcess) -> None:
    name = "evicted"
    running_job(crd, namespace, operator, name, runPolicy={"backoffLimit": 0})
    pod = f"{name}-worker-1"
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": namespace}}
    crd.kubectl("create", "--raw", f"/api/v1/namespaces/{namespace}/pods/{pod}/eviction", "--filename=-",
                input=json.dumps(eviction))  # what `kubectl drain` does to every pod of a node
    event = restart_event(crd, namespace, name, "Evicted")
    assert event["message"].startswith("restart, not counted toward backoffLimit (podFailurePolicy rule 0 "), event
    assert pod in event["message"] and "EvictionByEvictionAPI" in event["message"], event
    after = wait_for_status(crd, namespace, name, operator, phase="Running", attempt=1, timeout=180)
    assert after["restarts"] == 0 and after["ignoredFailures"] == 1, after  # backoffLimit 0, yet it runs again


def test_a_lost_node_is_reported_naming_it_and_does_not_count(crd: ControlPlane, namespace: str,
                                                              operator: OperatorProcess) -> None:
    name = "node-lost"
    node = f"kwok-lost-{namespace[-6:]}"[:63]
    crd.add_node(node, gpus=0)
    try:
        crd.kubectl("label", "node", node, f"kubetrain.dev/test-node={node}", "--overwrite")
        running_job(crd, namespace, operator, name, runPolicy={"backoffLimit": 0},
                    scheduling={"nodeSelector": {"kubetrain.dev/test-node": node}})
        # the node stops answering: its NoExecute taint makes the taint manager take every pod away
        crd.kubectl("taint", "node", node, "kubetrain.dev/unreachable=true:NoExecute")
        event = restart_event(crd, namespace, name, "NodeLost")
        assert f"node {node} lost (DeletionByTaintManager" in event["message"], event
        assert "not counted toward backoffLimit" in event["message"], event
        after = wait_for_status(crd, namespace, name, operator, attempt=1, timeout=120)
        assert after["restarts"] == 0 and after["ignoredFailures"] >= 1 and after["phase"] != "Failed", after
    finally:
        crd.delete_node(node)


def test_workers_preempted_by_a_higher_priority_pod_restart_the_job_without_counting(
        crd: ControlPlane, namespace: str, operator: OperatorProcess) -> None:
    name, node, priority = "preempted", f"kwok-preempt-{namespace[-6:]}"[:63], f"urgent-{namespace}"[:63]
    crd.add_node(node, gpus=2)
    try:
        crd.kubectl("label", "node", node, f"kubetrain.dev/test-node={node}", "--overwrite")
        selector = {"kubetrain.dev/test-node": node}
        create(crd, namespace, training(name, runPolicy={"backoffLimit": 0}, scheduling={"nodeSelector": selector}))
        wait_for_status(crd, namespace, name, operator, phase="Running", timeout=180)
        # another team's pod that needs both GPUs of the node, at a higher priority: kube-scheduler preempts the
        # workers (DisruptionTarget, reason PreemptionByScheduler) and deletes them to make room
        crd.kubectl("create", "--filename=-", input=json.dumps(
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": priority},
             "value": 1000000}))
        crd.kubectl("create", "--namespace", namespace, "--filename=-", input=json.dumps(
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "urgent"},
             "spec": {"priorityClassName": priority, "nodeSelector": selector,
                      "containers": [{"name": "main", "image": "urgent:1",
                                      "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}))
        event = restart_event(crd, namespace, name, "Preempted")
        assert "not counted toward backoffLimit" in event["message"], event
        assert "PreemptionByScheduler" in event["message"] and f"{name}-worker-" in event["message"], event

        def urgent_node() -> str | None:
            return crd.get("pod", "urgent", namespace)["spec"].get("nodeName")

        assert wait_until(urgent_node, 120, message="the urgent pod bound where the workers were") == node
        # The next attempt's workers may land on the node before the urgent pod does and be preempted again: every
        # such restart is one more ignored failure, none is counted.
        after = status(crd, namespace, name)
        assert after["attempt"] >= 1 and after["ignoredFailures"] == after["attempt"], after
        assert after["restarts"] == 0 and after["phase"] != "Failed", after
    finally:
        # everything on the node goes while the node is there: pods of a deleted node would wait for the pod GC and
        # keep the namespace terminating, where a later test's cluster-wide operator would still see this job
        crd.kubectl("delete", "distributedtraining", name, "--namespace", namespace, "--ignore-not-found",
                    "--wait=true")
        crd.kubectl("delete", "pods", "--all", "--namespace", namespace, "--wait=true")
        crd.kubectl("delete", "priorityclass", priority, "--ignore-not-found")
        crd.delete_node(node)


def test_the_launchers_bad_configuration_exit_fails_the_job_at_once(crd: ControlPlane, namespace: str,
                                                                    operator: OperatorProcess) -> None:
    name = "bad-config"
    running_job(crd, namespace, operator, name, runPolicy={"backoffLimit": 3})
    launcher = wait_for_pods(crd, namespace, name, 1, role="launcher", timeout=180)[0]
    crd.set_pod_outcome(namespace, launcher["metadata"]["name"], "Failed", exit_code=2)
    failed = wait_for_status(crd, namespace, name, operator, phase="Failed", timeout=120)
    assert failed["reason"] == "LauncherFailed" and failed["restarts"] == 0, failed
    assert "exit code 2" in failed["message"] and "FailJob on launcher exit code In [2]" in failed["message"], failed


def test_a_users_rule_on_an_exit_code_is_obeyed(crd: ControlPlane, namespace: str,
                                                operator: OperatorProcess) -> None:
    name = "user-rule"
    policy = {"rules": [{"action": "Ignore", "onExitCodes": {"role": "Launcher", "operator": "In", "values": [42]}},
                        {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [17]}}]}
    running_job(crd, namespace, operator, name, runPolicy={"backoffLimit": 1, "podFailurePolicy": policy})
    launcher = wait_for_pods(crd, namespace, name, 1, role="launcher", timeout=180)[0]
    crd.set_pod_outcome(namespace, launcher["metadata"]["name"], "Failed", exit_code=42)
    again = wait_for_status(crd, namespace, name, operator, phase="Running", attempt=1, timeout=180)
    assert again["restarts"] == 0 and again["ignoredFailures"] == 1, again
    launcher = next(p for p in live_pods(crd, namespace, name, role="launcher")
                    if p["metadata"]["labels"][LABEL_ATTEMPT] == "1")
    crd.set_pod_outcome(namespace, launcher["metadata"]["name"], "Failed", exit_code=17)
    failed = wait_for_status(crd, namespace, name, operator, phase="Failed", timeout=120)
    assert "podFailurePolicy rule 1 (FailJob on exit code In [17])" in failed["message"], failed
