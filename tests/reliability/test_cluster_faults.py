"""Faults of the cluster under a running operator: a worker pod deleted, a worker's node deleted, the launcher
failing, the API server restarted. A job restarts as a whole within backoffLimit and says why, then fails with the
reason; its checkpoint volume and the resource itself are kept; the operator, as the chart runs it with its Lease,
rides out 60 s without an API server."""

from __future__ import annotations

import json
import traceback
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kubetrain.contract import LABEL_ATTEMPT
from tests.reliability.fault_harness import MeteredOperator, new_namespace, restart_apiserver
from tests.reliability.figures import FIGURES
from tests.support.chart_operator import helm, install, start_operator
from tests.support.cluster import ControlPlane, wait_until
from tests.support.operator_harness import (
    children,
    create,
    events,
    live_pods,
    status,
    training,
    wait_for_pods,
    wait_for_status,
)

pytestmark = pytest.mark.controlplane

POOL_LABEL = "kubetrain.dev/test-pool"
FAULT_NODES = ("kwok-fault-a", "kwok-fault-b")
STEADY_NODE = {"kubernetes.io/hostname": "kwok-gpu-0"}


def checkpoint_volume(plane: ControlPlane, namespace: str, claim: str) -> None:
    """A hostPath PersistentVolume bound to `claim`: the job's checkpoint volume, which no fault may delete."""
    pv = f"{namespace}-{claim}"[:63]
    plane.apply({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv},
                 "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"], "storageClassName": "",
                          "hostPath": {"path": f"/tmp/{pv}"}, "claimRef": {"namespace": namespace, "name": claim}}})
    plane.kubectl("apply", "--namespace", namespace, "--filename=-", input=json.dumps(
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": claim},
         "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": pv,
                  "resources": {"requests": {"storage": "1Gi"}}}}))
    wait_until(lambda: plane.get("pvc", claim, namespace).get("status", {}).get("phase") == "Bound",
               message=f"PVC {claim} to be Bound")


def start_job(plane: ControlPlane, namespace: str, operator: MeteredOperator, name: str, backoff_limit: int,
              node_selector: dict[str, str]) -> str:
    """A 2-worker CPU job with a checkpoint claim, Running; returns its SSH Secret's uid."""
    checkpoint_volume(plane, namespace, f"{name}-ckpt")
    create(plane, namespace, training(name, resources={"gpusPerWorker": 0}, runPolicy={"backoffLimit": backoff_limit},
                                      checkpoint={"claimName": f"{name}-ckpt"},
                                      scheduling={"nodeSelector": node_selector}))
    wait_for_status(plane, namespace, name, operator, phase="Running", timeout=180)
    return str(plane.get("secret", f"{name}-ssh", namespace)["metadata"]["uid"])


def worker_uids(plane: ControlPlane, namespace: str, name: str) -> set[str]:
    return {p["metadata"]["uid"] for p in live_pods(plane, namespace, name)}


def assert_kept(plane: ControlPlane, namespace: str, name: str, secret_uid: str) -> None:
    """What a failed or restarted job keeps: the resource, its checkpoint volume, and one key pair throughout."""
    assert plane.get("dtr", name, namespace)["metadata"].get("deletionTimestamp") is None
    pvc = plane.get("pvc", f"{name}-ckpt", namespace)
    assert pvc["status"]["phase"] == "Bound" and not pvc["metadata"].get("deletionTimestamp"), pvc["status"]
    assert plane.get("secret", f"{name}-ssh", namespace)["metadata"]["uid"] == secret_uid, "key pair replaced"


def restarted_whole(plane: ControlPlane, namespace: str, name: str, operator: MeteredOperator, before: set[str],
                    restarts: int, limit: int) -> dict:
    """Wait for restart number `restarts` and for the next attempt to run; every worker must be new. Returns the
    Warning event that reports the restart (status moves on to Running quickly; the event is the lasting record)."""
    wait_for_status(plane, namespace, name, operator, restarts=restarts, timeout=180)
    running = wait_for_status(plane, namespace, name, operator, phase="Running", timeout=180)
    after = {p["metadata"]["uid"]: p for p in wait_for_pods(plane, namespace, name, 2, timeout=120)}
    assert not before & set(after), "every worker is replaced, not only the lost one"
    assert {p["metadata"]["labels"][LABEL_ATTEMPT] for p in after.values()} == {str(restarts)}
    assert running["restarts"] == restarts
    reports = [e for e in events(plane, namespace, name)
               if e["type"] == "Warning" and e["message"].startswith(f"restart {restarts}/{limit}: ")]
    assert len(reports) == 1, [e["message"] for e in events(plane, namespace, name)]
    return reports[0]


def pod_loss(plane: ControlPlane, namespace: str, operator: MeteredOperator) -> None:
    name = "pod-loss"
    secret = start_job(plane, namespace, operator, name, 1, STEADY_NODE)
    before = worker_uids(plane, namespace, name)
    plane.kubectl("delete", "pod", f"{name}-worker-1", "--namespace", namespace, "--wait=false")
    restarting = restarted_whole(plane, namespace, name, operator, before, 1, 1)
    assert restarting["reason"] == "WorkerLost" and f"{name}-worker-1" in restarting["message"], restarting
    FIGURES.fault("worker pod deleted", True)

    plane.kubectl("delete", "pod", f"{name}-worker-0", "--namespace", namespace, "--wait=false")
    failed = wait_for_status(plane, namespace, name, operator, phase="Failed", timeout=180)
    assert failed["reason"] == "WorkerLost" and f"{name}-worker-0" in failed["message"], failed
    assert "backoffLimit 1 reached" in failed["message"], failed["message"]
    assert_kept(plane, namespace, name, secret)
    FIGURES.fault("worker pod deleted beyond backoffLimit (Failed, reason kept)", True)


def launcher_failures(plane: ControlPlane, namespace: str, operator: MeteredOperator) -> None:
    name = "launcher-fails"
    secret = start_job(plane, namespace, operator, name, 2, STEADY_NODE)
    for attempt in range(3):
        launcher = wait_for_pods(plane, namespace, name, 1, role="launcher", timeout=180)[0]
        assert launcher["metadata"]["labels"][LABEL_ATTEMPT] == str(attempt)
        before = worker_uids(plane, namespace, name)
        plane.set_pod_outcome(namespace, launcher["metadata"]["name"], "Failed", exit_code=17)
        if attempt < 2:
            restarting = restarted_whole(plane, namespace, name, operator, before, attempt + 1, 2)
            assert restarting["reason"] == "LauncherFailed" and "exit code 17" in restarting["message"], restarting
            FIGURES.fault("launcher pod failed", True)
    failed = wait_for_status(plane, namespace, name, operator, phase="Failed", timeout=180)
    assert failed["reason"] == "LauncherFailed" and "backoffLimit 2 reached after 2 restarts" in failed["message"]
    assert "exit code 17" in failed["message"], failed["message"]
    warnings = [e["message"] for e in events(plane, namespace, name) if e["type"] == "Warning"]
    assert sum("exit code 17" in m for m in warnings) >= 3, warnings
    assert_kept(plane, namespace, name, secret)
    FIGURES.fault("launcher pod failed beyond backoffLimit (Failed, reason kept)", True)


def node_loss(plane: ControlPlane, namespace: str, operator: MeteredOperator) -> None:
    name = "node-loss"
    for node in FAULT_NODES:
        plane.add_node(node, gpus=0)
        plane.kubectl("label", "node", node, f"{POOL_LABEL}=fault", "--overwrite")
    try:
        secret = start_job(plane, namespace, operator, name, 1, {POOL_LABEL: "fault"})
        before = worker_uids(plane, namespace, name)
        placed = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in children(plane, namespace, name, "pods")}
        launcher_node = next(node for pod, node in placed.items() if pod.startswith(f"{name}-launcher"))
        worker_nodes = {node for pod, node in placed.items() if "-worker-" in pod}
        # a node with workers, without the launcher when the scheduler left one such
        lost = sorted(worker_nodes - {launcher_node} or worker_nodes)[0]
        on_lost = [pod for pod, node in placed.items() if node == lost]
        plane.delete_node(lost)  # its pods are removed by the pod garbage collector, as in a real cluster
        # The garbage collector marks each pod (DisruptionTarget, DeletionByPodGC) and deletes it at once; whether
        # the operator saw the mark or only the deletion (whose last state carries it), the restart is NodeLost, named
        # and not counted toward backoffLimit (the default podFailurePolicy).
        running = wait_for_status(plane, namespace, name, operator, phase="Running", attempt=1, timeout=240)
        assert running["restarts"] == 0 and running.get("ignoredFailures") == 1, running
        assert not before & worker_uids(plane, namespace, name), "every worker is replaced, not only the lost one"
        reports = [e for e in events(plane, namespace, name)
                   if e["type"] == "Warning" and e["message"].startswith("restart")]
        assert len(reports) == 1, [e["message"] for e in events(plane, namespace, name)]
        restarting = reports[0]
        assert restarting["reason"] == "NodeLost" and f"node {lost} lost" in restarting["message"], restarting
        assert "not counted toward backoffLimit" in restarting["message"], restarting
        assert any(pod in restarting["message"] or (pod.startswith(f"{name}-launcher")
                                                     and f"{name}-launcher" in restarting["message"])
                   for pod in on_lost), (on_lost, restarting["message"])
        assert all(p["spec"]["nodeName"] != lost for p in live_pods(plane, namespace, name))
        FIGURES.fault("worker node deleted", True)

        launcher = wait_for_pods(plane, namespace, name, 1, role="launcher", timeout=180)[0]
        plane.set_pod_outcome(namespace, launcher["metadata"]["name"], "Succeeded")
        done = wait_for_status(plane, namespace, name, operator, phase="Succeeded", timeout=180)
        assert done["restarts"] == 0 and done.get("ignoredFailures") == 1, done
        assert_kept(plane, namespace, name, secret)
    finally:
        for node in FAULT_NODES:
            if node in plane.nodes:
                plane.delete_node(node)


SCENARIOS: dict[str, Callable[[ControlPlane, str, MeteredOperator], None]] = {
    "pod-loss": pod_loss, "launcher-failures": launcher_failures, "node-loss": node_loss}


@pytest.fixture(scope="module")
def fault_run(crd: ControlPlane) -> Iterator[dict[str, str | None]]:
    """The three scenarios at once (each its own job) under one operator; {scenario: failure text or None}."""
    namespace = new_namespace(crd, "faults")
    operator = MeteredOperator(crd, namespace).start()
    results: dict[str, str | None] = {}
    try:
        operator.wait_serving()

        def run(scenario: str) -> str | None:
            try:
                SCENARIOS[scenario](crd, namespace, operator)
                return None
            except Exception:
                FIGURES.fault(scenario, False, traceback.format_exc(limit=1).strip().splitlines()[-1])
                return traceback.format_exc()

        with ThreadPoolExecutor(len(SCENARIOS)) as pool:
            results = dict(zip(SCENARIOS, pool.map(run, SCENARIOS), strict=True))
        results["operator-alive"] = None if operator.alive() and operator.starts == 1 else operator.log_tail()
        yield results
    finally:
        operator.stop()
        print(f"operator log ({operator.log_path}):\n{operator.log_tail(100)}")
        crd.kubectl("delete", "namespace", namespace, "--wait=false", "--ignore-not-found")


@pytest.mark.parametrize("scenario", [*SCENARIOS, "operator-alive"])
def test_fault_is_survived(fault_run: dict[str, str | None], scenario: str) -> None:
    assert fault_run[scenario] is None, fault_run[scenario]


def test_the_chart_operator_with_its_lease_rides_out_60s_without_an_api_server(
    crd: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """The operator as the chart runs it (its Lease, its ServiceAccount, its liveness endpoint) through 60 s without an
    API server: longer than the watches' longest retry delay (kubetrain.runtime.watch, MAX_RETRY_SECONDS), so they
    reconnect from a capped delay, and longer than the Lease, so the leader steps down and leads again. A job's
    launcher that succeeds after the outage is seen (the watches are back), a job created afterwards runs, the failed
    Lease rounds are logged, and the process was never restarted."""
    down_seconds = 60
    system = new_namespace(crd, "kubetrain-system")
    release = f"kt-{uuid.uuid4().hex[:6]}"
    lease = f"{release}-kubetrain"
    what = f"API server down {down_seconds}s under the chart's operator (with its Lease)"
    try:
        deployment, pod = install(crd, release, system, f"--set=watch.namespaces={{{namespace}}}")
        env = {item["name"] for item in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert {"KUBETRAIN_LEASE_NAME", "KUBETRAIN_LEASE_NAMESPACE", "KUBETRAIN_POD_UID"} <= env
        operator = start_operator(crd, deployment, pod, system, tmp_path)
        try:
            create(crd, namespace, training("before", resources={"gpusPerWorker": 0}))
            wait_for_status(crd, namespace, "before", operator, phase="Running", timeout=180)
            holder = crd.get("lease", lease, system)["spec"]["holderIdentity"]

            restart_apiserver(crd, down_seconds=down_seconds)

            assert operator.alive() and operator.starts == 1
            # an event that happens only after the restart: the operator must be watching again to see it
            launcher = wait_for_pods(crd, namespace, "before", 1, role="launcher", timeout=120)[0]
            crd.set_pod_outcome(namespace, launcher["metadata"]["name"], "Succeeded")
            wait_for_status(crd, namespace, "before", operator, phase="Succeeded", timeout=240)
            create(crd, namespace, training("after", resources={"gpusPerWorker": 0}))
            wait_for_status(crd, namespace, "after", operator, phase="Running", timeout=240)
            assert status(crd, namespace, "after")["workers"]["ready"] == 2
            assert operator.alive() and operator.starts == 1, "the operator was not restarted"
            assert crd.get("lease", lease, system)["spec"]["holderIdentity"] == holder
            assert f"lease {system}/{lease}: " in operator.log_text(), "the failed Lease rounds are logged"
            assert operator.get(operator.health_port, "/healthz")[0] == 200
            FIGURES.fault(what, True)
        except Exception as error:
            FIGURES.fault(what, False, str(error)[:200])
            raise
        finally:
            operator.stop()
            print(f"operator log ({operator.log_path}):\n{operator.log_tail(80)}")
    finally:
        helm(crd, "uninstall", release, f"--namespace={system}")
        crd.kubectl("delete", "namespace", system, "--wait=false", "--ignore-not-found")
