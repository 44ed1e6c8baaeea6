"""The operator's deletes on the real API server: a delete decided on one object never removes its successor of the
same name (a restart's next attempt reuses its pods' names), and what is already gone is nothing to do."""

from __future__ import annotations

import json

from kubernetes import client, config

from kubetrain.kube import Kube
from tests.support.cluster import ControlPlane


def kube_of(plane: ControlPlane) -> Kube:
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(plane.kubeconfig), client_configuration=configuration)
    return Kube(client.ApiClient(configuration))


def uid_of(plane: ControlPlane, namespace: str, name: str) -> str:
    return str(json.loads(plane.kubectl("get", "configmap", name, "--namespace", namespace,
                                        "--output=json"))["metadata"]["uid"])


def test_a_delete_for_an_earlier_object_leaves_its_successor_of_the_same_name(
        control_plane: ControlPlane, namespace: str) -> None:
    kube = kube_of(control_plane)
    control_plane.kubectl("create", "configmap", "worker-0", "--namespace", namespace)
    first = uid_of(control_plane, namespace, "worker-0")
    control_plane.kubectl("delete", "configmap", "worker-0", "--namespace", namespace)
    control_plane.kubectl("create", "configmap", "worker-0", "--namespace", namespace)
    second = uid_of(control_plane, namespace, "worker-0")
    assert second != first

    kube.delete("v1", "ConfigMap", namespace, "worker-0", first)  # decided on the first: the server refuses, 409
    assert uid_of(control_plane, namespace, "worker-0") == second
    kube.delete("v1", "ConfigMap", namespace, "worker-0", second)
    assert not control_plane.kubectl("get", "configmaps", "--namespace", namespace, "--field-selector",
                                     "metadata.name=worker-0", "--output=name").strip()
    kube.delete("v1", "ConfigMap", namespace, "worker-0", second)  # already gone: nothing to do
    kube.delete("scheduling.volcano.sh/v1beta1", "PodGroup", namespace, "worker-0")  # a kind not served here
