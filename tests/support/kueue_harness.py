"""Kueue in the control-plane tier: the names a pod uses to queue, builders for Kueue's objects, and where
build-kueue.sh put Kueue.

`ControlPlane.start(..., kueue=True)` runs Kueue v0.10.0 with its plain-Pod integration only. A pod is queued when it
has the label `QUEUE_NAME_LABEL: <LocalQueue>`: Kueue's webhook adds the scheduling gate `ADMISSION_GATE` and removes
it once the pod's Workload is admitted to the LocalQueue's ClusterQueue. Pods form one Workload, named `<group>`, when
they share the label `POD_GROUP_NAME_LABEL: <group>` and the annotation `POD_GROUP_TOTAL_COUNT_ANNOTATION: "<n>"`.
Kueue creates it once all n pods exist and admits the group as a whole. The Workload is owned by its pods: the garbage
collector deletes it, and frees its quota, when the last of them is deleted. `PRIORITY_CLASS_LABEL` names a
WorkloadPriorityClass. Pods without the queue label are left alone.

The builders here are pure: they return manifests and Kueue's configuration as dicts.
"""

from __future__ import annotations

import base64
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parents[1] / "controlplane"  # where its build script is
BUILD_SCRIPT = HERE / "build-kueue.sh"
BINARY = "kueue"
WEBHOOK_FILES = ("manifests.yaml", "kustomization.yaml")
KUEUE_API = "kueue.x-k8s.io/v1beta1"
CONFIG_API = "config.kueue.x-k8s.io/v1beta1"

QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
POD_GROUP_NAME_LABEL = "kueue.x-k8s.io/pod-group-name"
POD_GROUP_TOTAL_COUNT_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
# "false" on a group's pods: once none of them runs, Kueue finishes the group's Workload and frees its quota. A
# retriable group (the default) keeps its quota and waits for replacement pods.
RETRIABLE_IN_GROUP_ANNOTATION = "kueue.x-k8s.io/retriable-in-group"
ADMISSION_GATE = "kueue.x-k8s.io/admission"

ORPHAN = "kubetrain-orphan-probe"  # see orphan()

# Kueue's own namespace (its default). Kueue refuses a configuration that manages it or kube-system.
NAMESPACE = "kueue-system"
UNMANAGED_NAMESPACES = ("kube-system", NAMESPACE)
# Off: VisibilityOnDemand serves an aggregated API on :8082 of every interface; ProvisioningACC needs the
# ProvisioningRequest API of the cluster autoscaler. Nothing here uses either.
FEATURE_GATES = {"VisibilityOnDemand": False, "ProvisioningACC": False}


def configuration(webhook_port: int, cert_dir: Path, health_port: int, metrics_port: int) -> dict[str, Any]:
    """Kueue's Configuration: the Pod integration only, webhooks on 127.0.0.1 with the certificate in `cert_dir`
    (`tls.crt`, `tls.key`), every namespace but UNMANAGED_NAMESPACES managed, pods without a queue label ignored."""
    managed = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                     "values": list(UNMANAGED_NAMESPACES)}]}
    return {
        "apiVersion": CONFIG_API,
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "manageJobsWithoutQueueName": False,
        # The pod webhook checks both selectors.
        "managedJobsNamespaceSelector": managed,
        "integrations": {"frameworks": ["pod"], "podOptions": {"namespaceSelector": managed}},
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}"},  # never its default :8080
        "leaderElection": {"leaderElect": False},
        "featureGates": FEATURE_GATES,
    }


def webhook_configurations(directory: Path, url: str, ca_pem: bytes) -> list[dict[str, Any]]:
    """Kueue's webhook configurations from `directory` (WEBHOOK_FILES), with the namespace selectors of its kustomize
    patches; every webhook calls `url` + its path and trusts `ca_pem`. Rules and failure policies are kept."""
    manifests = [doc for doc in yaml.safe_load_all((directory / WEBHOOK_FILES[0]).read_text()) if doc]
    by_kind = {(doc["kind"], doc["metadata"]["name"]): doc for doc in manifests}
    for patch in yaml.safe_load((directory / WEBHOOK_FILES[1]).read_text()).get("patches", []):
        change = yaml.safe_load(patch["patch"])
        webhooks = {hook["name"]: hook for hook in by_kind[change["kind"], change["metadata"]["name"]]["webhooks"]}
        for hook in change.get("webhooks", []):
            webhooks[hook["name"]].update(hook)
    bundle = base64.b64encode(ca_pem).decode()
    for doc in manifests:
        doc["metadata"]["name"] = f"kueue-{doc['metadata']['name']}"  # as Kueue's kustomization names them
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"{url.rstrip('/')}{path}", "caBundle": bundle}
    return manifests


def resource_flavor(name: str = "default") -> dict[str, Any]:
    """A ResourceFlavor that matches every node."""
    return {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": name}}


def cluster_queue(name: str, flavor: str, quotas: dict[str, str],
                  within_cluster_queue: str | None = None) -> dict[str, Any]:
    """A ClusterQueue for every namespace with `quotas` (resource -> nominal quota) of one flavor.
    `within_cluster_queue` (e.g. "LowerPriority") lets its workloads preempt each other."""
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [{
            "coveredResources": list(quotas),
            "flavors": [{"name": flavor, "resources": [{"name": resource, "nominalQuota": quota}
                                                       for resource, quota in quotas.items()]}],
        }],
    }
    if within_cluster_queue:
        spec["preemption"] = {"withinClusterQueue": within_cluster_queue}
    return {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(namespace: str, name: str, cluster_queue: str) -> dict[str, Any]:
    """A LocalQueue in `namespace` that sends its workloads to `cluster_queue`."""
    return {"apiVersion": KUEUE_API, "kind": "LocalQueue", "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": cluster_queue}}


def workload_priority_class(name: str, value: int) -> dict[str, Any]:
    """A WorkloadPriorityClass; a pod selects it with the PRIORITY_CLASS_LABEL label."""
    return {"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value}


def join_pod_group(pod: dict[str, Any], queue: str, group: str, total_count: int,
                   priority_class: str | None = None) -> dict[str, Any]:
    """A copy of `pod` queued in LocalQueue `queue` as one of the `total_count` pods of group `group`."""
    metadata = dict(pod.get("metadata", {}))
    labels = {**metadata.get("labels", {}), QUEUE_NAME_LABEL: queue, POD_GROUP_NAME_LABEL: group}
    if priority_class:
        labels[PRIORITY_CLASS_LABEL] = priority_class
    annotations = {**metadata.get("annotations", {}), POD_GROUP_TOTAL_COUNT_ANNOTATION: str(total_count)}
    return {**pod, "metadata": {**metadata, "labels": labels, "annotations": annotations}}


def probe_pod(namespace: str) -> dict[str, Any]:
    """A queued pod to create with `--dry-run=server`: Kueue's pod webhook answers if it comes back gated."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "kueue-probe", "namespace": namespace, "labels": {QUEUE_NAME_LABEL: "probe"}},
            "spec": {"containers": [{"name": "probe", "image": "probe"}]}}


def orphan() -> dict[str, Any]:
    """A WorkloadPriorityClass owned by a Node that does not exist: the garbage collector deletes it as soon as it
    watches Kueue's kinds."""
    owner = {"apiVersion": "v1", "kind": "Node", "name": ORPHAN, "uid": str(uuid.uuid4())}
    manifest = workload_priority_class(ORPHAN, 0)
    return {**manifest, "metadata": {**manifest["metadata"], "ownerReferences": [owner]}}


def build_dir() -> Path:
    """Where build-kueue.sh put `bin/`, `crds/` and `webhooks/` (KUBETRAIN_KUEUE_DIR overrides)."""
    override = os.environ.get("KUBETRAIN_KUEUE_DIR")
    if override:
        return Path(override)
    result = subprocess.run([str(BUILD_SCRIPT), "--print-bin-dir"], capture_output=True, text=True, check=True)
    return Path(result.stdout.strip()).parent


def crd_files(directory: Path) -> list[Path]:
    """The CRDs build-kueue.sh copied into `directory`."""
    return sorted((directory / "crds").glob("*.yaml"))


def missing_files(directory: Path) -> list[str]:
    """The files that build-kueue.sh has not (yet) put into `directory`."""
    wanted = [f"bin/{BINARY}", *(f"webhooks/{name}" for name in WEBHOOK_FILES)]
    missing = [path for path in wanted if not (directory / path).is_file()]
    return missing if crd_files(directory) else [*missing, "crds/*.yaml"]
