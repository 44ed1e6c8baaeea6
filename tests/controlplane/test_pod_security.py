"""What spec.podTemplate lets a job's author ask for is what a Deployment's pod template lets them ask for in the same
namespace: any ServiceAccount and Secret of the namespace, host networking where the namespace allows it. Pod Security
admission judges both alike: a namespace that enforces the 'restricted' standard refuses the job's pod with the same
words as the Deployment's."""

from __future__ import annotations

import json

from tests.support.cluster import ControlPlane, wait_until
from tests.support.operator_harness import (
    OperatorProcess,
    create,
    events,
    live_pods,
    training,
    wait_for_pods,
    wait_for_status,
)

HOST_NETWORK = {"spec": {"hostNetwork": True}}
# The namespace's own ServiceAccount and Secret, and the host's network: what a Deployment's pod could have too.
POWERS = {"spec": {"hostNetwork": True, "serviceAccountName": "builder",
                   "volumes": [{"name": "token", "secret": {"secretName": "team-token"}}]}}


def deployment(name: str) -> dict:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"hostNetwork": True,
                                           "containers": [{"name": "main", "image": "kubetrain/mnist:0.1.0"}]}}}}


def replica_set_refusals(plane: ControlPlane, namespace: str) -> list[str]:
    listing = plane.kubectl("get", "events", "--namespace", namespace, "--field-selector=reason=FailedCreate",
                            "--output=json")
    return [event["message"] for event in json.loads(listing)["items"]]


def test_a_pod_template_power_is_what_a_deployment_has_and_pod_security_admission_judges_it_alike(
    control_plane: ControlPlane, namespace: str, operator: OperatorProcess
) -> None:
    control_plane.kubectl("create", "serviceaccount", "builder", "--namespace", namespace)
    control_plane.kubectl("create", "secret", "generic", "team-token", "--from-literal=token=t", "--namespace",
                          namespace)
    create(control_plane, namespace, training("allowed", resources={"gpusPerWorker": 0}, podTemplate=POWERS))
    workers = wait_for_pods(control_plane, namespace, "allowed", 2, ready=False)
    for pod in workers:  # the namespace enforces no Pod Security standard: the pods have what the template asked
        assert pod["spec"]["hostNetwork"] is True and pod["spec"]["serviceAccountName"] == "builder"
        assert {"name": "token", "secret": {"secretName": "team-token", "defaultMode": 420}} in pod["spec"]["volumes"]

    control_plane.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
    create(control_plane, namespace, training("refused", resources={"gpusPerWorker": 0}, podTemplate=HOST_NETWORK))
    failed = wait_for_status(control_plane, namespace, "refused", operator, phase="Failed")
    assert failed["reason"] == "AdmissionDenied", failed
    assert 'violates PodSecurity "restricted' in failed["message"] and "hostNetwork" in failed["message"], failed
    assert not live_pods(control_plane, namespace, "refused")
    assert [e for e in events(control_plane, namespace, "refused") if e["reason"] == "AdmissionDenied"]

    control_plane.kubectl("apply", "--namespace", namespace, "--filename=-", input=json.dumps(deployment("host")))
    refusals = wait_until(lambda: replica_set_refusals(control_plane, namespace) or None,
                          message="the Deployment's ReplicaSet to be refused its pod")
    assert any('violates PodSecurity "restricted' in m and "hostNetwork" in m for m in refusals), refusals
