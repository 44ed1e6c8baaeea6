"""A failed attempt's launcher output outlives its pods, against the real API server and operator: when an attempt fails
the operator makes its ConfigMap `<name>-attempt-<N>-log` (labelled, owned by the job, bounded) before the restart,
keeps the newest KEPT_ATTEMPTS, and the copies go with the job.

kwok runs no container, so no log can be read here: the API server answers the operator's read with an error, and the
copy (and a LogNotSaved event) says so while the restart goes on. The kind tier reads real logs
(tests/e2e/test_kind.py::test_restart_and_the_logs_of_both_attempts)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from kubetrain.contract import (
    LABEL_ATTEMPT,
    LABEL_JOB,
    LABEL_ROLE,
    ROLE_ATTEMPT_LOG,
    attempt_log_name,
    hosts_configmap_name,
)
from kubetrain.controller import watched
from kubetrain.manifests.attempt_log import KEEP_BYTES, KEPT_ATTEMPTS, LOG_KEY, NOTE_ANNOTATION, POD_ANNOTATION
from kubetrain.settings import Settings
from tests.support.cluster import ControlPlane, wait_until
from tests.support.operator_harness import (
    OperatorProcess,
    children,
    create,
    events,
    training,
    wait_for_pods,
    wait_for_status,
)

pytestmark = pytest.mark.controlplane

CPU_ONLY = {"resources": {"gpusPerWorker": 0}}


def fail_attempt(plane: ControlPlane, namespace: str, name: str, operator: OperatorProcess, attempt: int) -> str:
    """Once attempt `attempt` runs, its launcher pod exits 1; returns that pod's name."""
    wait_for_status(plane, namespace, name, operator, phase="Running", attempt=attempt, timeout=180)
    pod = wait_for_pods(plane, namespace, name, 1, role="launcher", timeout=180)[0]["metadata"]["name"]
    plane.set_pod_outcome(namespace, pod, "Failed", exit_code=1)
    return pod


def copies(plane: ControlPlane, namespace: str, name: str) -> dict[int, dict[str, Any]]:
    """The job's log copies by attempt, as `kubectl get configmaps -l kubetrain.dev/job-name=<name>` finds them."""
    return {int(configmap["metadata"]["labels"][LABEL_ATTEMPT]): configmap
            for configmap in children(plane, namespace, name, "configmaps")
            if configmap["metadata"]["labels"].get(LABEL_ROLE) == ROLE_ATTEMPT_LOG}


def test_a_failed_attempt_gets_a_labelled_bounded_copy_that_says_why_its_log_could_not_be_read(
    crd: ControlPlane, namespace: str, operator: OperatorProcess
) -> None:
    name = "copied"
    create(crd, namespace, training(name, runPolicy={"backoffLimit": 2}, **CPU_ONLY))
    pod = fail_attempt(crd, namespace, name, operator, 0)
    copy = wait_until(lambda: copies(crd, namespace, name).get(0), 120, message=f"{attempt_log_name(name, 0)}")
    meta = copy["metadata"]
    assert meta["name"] == attempt_log_name(name, 0)
    assert (meta["labels"][LABEL_JOB], meta["labels"][LABEL_ROLE]) == (name, ROLE_ATTEMPT_LOG)
    owner = crd.get("distributedtraining", name, namespace)["metadata"]["uid"]
    assert [(ref["kind"], ref["uid"]) for ref in meta["ownerReferences"]] == [("DistributedTraining", owner)]
    assert copy.get("immutable") is True
    assert len(base64.b64decode(copy["binaryData"][LOG_KEY])) <= KEEP_BYTES
    assert meta["annotations"][POD_ANNOTATION] == pod
    note = meta["annotations"][NOTE_ANNOTATION]
    # kwok's answer, as the operator read it: "404 Not Found: the server could not find the requested resource ..."
    assert note.startswith(f"the log of launcher pod {pod} could not be read: "), note
    warned = [e for e in events(crd, namespace, name) if e["reason"] == "LogNotSaved"]
    assert [e["message"] for e in warned] == [f"attempt 0: {note}"], warned
    # The restart went on: attempt 1 runs.
    wait_for_status(crd, namespace, name, operator, phase="Running", attempt=1, restarts=1, timeout=180)
    # The operator's watch of ConfigMaps lists its hostfile, and no copy: it never carries their logs.
    selector = next(resource.label_selector for field, resource in watched(Settings(namespaces=(namespace,)))
                    if field == "configmaps")
    listed = json.loads(crd.kubectl("get", "configmaps", "--namespace", namespace, f"--selector={selector}",
                                    "--output=json"))["items"]
    assert [item["metadata"]["name"] for item in listed] == [hosts_configmap_name(name)]


def test_only_the_newest_copies_stay_and_they_go_with_the_job(
    crd: ControlPlane, namespace: str, operator: OperatorProcess
) -> None:
    name = "many"
    create(crd, namespace, training(name, runPolicy={"backoffLimit": KEPT_ATTEMPTS + 1}, **CPU_ONLY))
    for attempt in range(KEPT_ATTEMPTS + 1):
        fail_attempt(crd, namespace, name, operator, attempt)
    last = KEPT_ATTEMPTS
    wait_until(lambda: last in copies(crd, namespace, name), 120, message=f"the copy of attempt {last}")
    newest = list(range(1, KEPT_ATTEMPTS + 1))
    wait_until(lambda: sorted(copies(crd, namespace, name)) == newest, 60,
               message=f"only the copies of attempts {newest}")
    crd.kubectl("delete", "distributedtraining", name, "--namespace", namespace)
    wait_until(lambda: not copies(crd, namespace, name), 120, message="the copies to go with the job")
