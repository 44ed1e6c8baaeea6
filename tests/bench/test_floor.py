"""The floor replays exactly what an operator created, minus what the API server fills in itself."""

from __future__ import annotations

from typing import Any

from .floor import instantiate, templates
from .latency import KUBETRAIN, MPI_OPERATOR


def listed(kind: str, name: str, labels: dict[str, str], **extra: Any) -> dict[str, Any]:
    meta = {"name": name, "labels": labels, "uid": f"uid-{name}", "resourceVersion": "7",
            "ownerReferences": [{"kind": "DistributedTraining", "name": "warmup", "uid": "uid-warmup"}]}
    return {"apiVersion": "v1", "kind": kind, "metadata": meta, "status": {"phase": "Running"}, **extra}


def test_kubetrain_children_lose_what_the_server_set_and_keep_the_rest():
    job = {"kubetrain.dev/job-name": "warmup"}
    found = templates([
        listed("Pod", "warmup-worker-0", {**job, "kubetrain.dev/role": "worker"},
               spec={"nodeName": "kwok-0", "subdomain": "warmup", "serviceAccountName": "warmup"}),
        listed("Pod", "warmup-launcher-x", {**job, "kubetrain.dev/role": "launcher"}, spec={}),
        listed("Service", "warmup", job, spec={"clusterIP": "None", "clusterIPs": ["None"]}),
        listed("ServiceAccount", "warmup", job, secrets=[{"name": "token"}]),
        listed("ConfigMap", "other-hosts", {"kubetrain.dev/job-name": "other"}),
    ], KUBETRAIN)
    assert [(t.obj["kind"], t.obj["metadata"]["name"]) for t in found] == [
        ("Pod", "warmup-worker-0"), ("Service", "warmup"), ("ServiceAccount", "warmup")]
    pod, service, account = (t.obj for t in found)
    assert "status" not in pod and "uid" not in pod["metadata"] and "resourceVersion" not in pod["metadata"]
    assert pod["spec"] == {"subdomain": "warmup", "serviceAccountName": "warmup"}  # the scheduler binds it again
    assert service["spec"] == {"clusterIP": "None", "clusterIPs": ["None"]}  # headless stays headless
    assert "secrets" not in account


def test_a_replayed_child_names_the_new_job_and_is_owned_by_it():
    found = templates([listed("ConfigMap", "warmup-config", {"app": "warmup"}, data={"hostfile": "warmup-worker-0"})],
                      MPI_OPERATOR)
    obj = instantiate(found[0], "warmup", "floor-3", "uid-floor-3")
    assert obj["metadata"]["name"] == "floor-3-config" and obj["metadata"]["labels"] == {"app": "floor-3"}
    assert obj["data"] == {"hostfile": "floor-3-worker-0"}
    assert obj["metadata"]["ownerReferences"][0]["uid"] == "uid-floor-3"
    assert found[0].obj["metadata"]["name"] == "warmup-config"  # the template itself is unchanged
