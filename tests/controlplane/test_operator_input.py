"""What a job's author, or anyone who may write a job's status, can put in, and what the operator makes of it: on the
real API server, with the operator running for real."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from kubetrain.contract import LABEL_JOB
from tests.support.cluster import ControlPlane, KubectlError, wait_until
from tests.support.operator_harness import (
    OperatorProcess,
    create,
    events,
    get_training,
    live_pods,
    pause,
    training,
    wait_for_pods,
    wait_for_status,
)


def pods_of_job_anywhere(plane: ControlPlane, name: str) -> list[str]:
    listing = json.loads(plane.kubectl("get", "pods", "--all-namespaces", f"--selector={LABEL_JOB}={name}",
                                       "--output=json"))
    return [f"{pod['metadata']['namespace']}/{pod['metadata']['name']}" for pod in listing["items"]]


def test_a_template_naming_another_namespace_is_refused_and_no_pod_leaves_the_jobs_namespace(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess
) -> None:
    body = training("escape", podTemplate={"metadata": {"namespace": "kube-system", "name": "escape",
                                                        "labels": {"team": "a"}}})
    with pytest.raises(KubectlError) as refused:
        control_plane.kubectl("apply", "--namespace", namespace, "--filename=-", input=json.dumps(body))
    assert "spec.podTemplate.metadata.namespace" in refused.value.stderr, refused.value.stderr
    assert "spec.podTemplate.metadata.name" in refused.value.stderr, refused.value.stderr

    # A client that asks for no field validation gets the job stored without those fields (pruned): its pods stay
    # in its namespace, under their own names.
    control_plane.kubectl("apply", "--validate=false", "--namespace", namespace, "--filename=-",
                          input=json.dumps(body))
    assert get_training(control_plane, namespace, "escape")["spec"]["podTemplate"] == {
        "metadata": {"labels": {"team": "a"}}}
    workers = wait_for_pods(control_plane, namespace, "escape", 2)
    assert sorted(pod["metadata"]["name"] for pod in workers) == ["escape-worker-0", "escape-worker-1"]
    assert all(pod["metadata"]["labels"]["team"] == "a" for pod in workers)
    wait_for_pods(control_plane, namespace, "escape", 1, role="launcher")
    assert sorted(pods_of_job_anywhere(control_plane, "escape")) == sorted(
        f"{namespace}/{pod['metadata']['name']}"
        for pod in [*workers, *live_pods(control_plane, namespace, "escape", "launcher")])


def patch_status(plane: ControlPlane, namespace: str, name: str, status: dict) -> None:
    """What a person (or anyone granted the status subresource) can write with kubectl."""
    plane.kubectl("patch", "distributedtraining", name, "--namespace", namespace, "--subresource=status",
                  "--type=merge", f"--patch={json.dumps({'status': status})}")


def rfc3339(moment: datetime, fraction: str, offset: str = "Z") -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + fraction + offset


def sync_failures(plane: ControlPlane, namespace: str, name: str) -> list[str]:
    return [e["message"] for e in events(plane, namespace, name) if e["reason"] == "SyncFailed"]


def test_a_fractional_start_time_is_read_and_the_job_goes_on(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess
) -> None:
    now = datetime.now(timezone.utc)
    for name in ("recent", "overdue"):
        create(control_plane, namespace, training(name, runPolicy={"activeDeadlineSeconds": 3600}))
    for name in ("recent", "overdue"):
        wait_for_pods(control_plane, namespace, name, 1, role="launcher")
        wait_for_status(control_plane, namespace, name, operator, phase="Running")

    # Fractions of a second and a numeric offset, as RFC 3339 allows and the API server admits.
    patch_status(control_plane, namespace, "recent", {"startTime": rfc3339(now - timedelta(seconds=30), ".5")})
    patch_status(control_plane, namespace, "overdue", {"startTime": rfc3339(now + timedelta(hours=-3), ".25",
                                                                            "+01:00")})
    failed = wait_for_status(control_plane, namespace, "overdue", operator, phase="Failed")
    assert failed["reason"] == "DeadlineExceeded", failed  # 4 hours ago: the time was read, offset and all

    launcher = live_pods(control_plane, namespace, "recent", "launcher")[0]["metadata"]["name"]
    control_plane.set_pod_outcome(namespace, launcher, "Succeeded")
    wait_for_status(control_plane, namespace, "recent", operator, phase="Succeeded")
    for name in ("recent", "overdue"):
        assert not sync_failures(control_plane, namespace, name), sync_failures(control_plane, namespace, name)
    assert f"sync of {namespace}/" not in operator.log_text()


def test_a_start_time_the_operator_cannot_read_is_replaced_with_one_warning(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess
) -> None:
    create(control_plane, namespace, training("garbled"))
    wait_for_pods(control_plane, namespace, "garbled", 1, role="launcher")
    wait_for_status(control_plane, namespace, "garbled", operator, phase="Running")
    # The API server's date-time check lets any one character stand where RFC 3339 has the fraction's dot.
    garbled = "2026-01-01T00:00:00x5Z"
    patch_status(control_plane, namespace, "garbled", {"startTime": garbled})

    def replaced() -> dict | None:
        current = get_training(control_plane, namespace, "garbled").get("status") or {}
        return current if current.get("startTime") not in (None, garbled) else None

    wait_until(replaced, 60, message="the operator's own startTime in place of the garbled one")
    pause(5)  # passes go on (the operator's own writes come back as watch events): one warning, not one per pass
    warnings = [e for e in events(control_plane, namespace, "garbled") if e["reason"] == "StatusUnreadable"]
    assert len(warnings) == 1 and warnings[0].get("count", 1) == 1, warnings
    assert garbled in warnings[0]["message"] and warnings[0]["type"] == "Warning"
    launcher = live_pods(control_plane, namespace, "garbled", "launcher")[0]["metadata"]["name"]
    control_plane.set_pod_outcome(namespace, launcher, "Succeeded")
    wait_for_status(control_plane, namespace, "garbled", operator, phase="Succeeded")
    assert not sync_failures(control_plane, namespace, "garbled")
