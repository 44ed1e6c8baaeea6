"""The headless Services of the workers: one gives every worker a stable DNS name from its start; an elastic job's
second one lists only Ready workers, which is how its launcher discovers them (DNS, no API calls, no ConfigMap lag).

That second Service has no selector: the operator writes its EndpointSlice itself, from the worker pods it created,
so a pod someone else makes with the job's labels is never discovered."""

from __future__ import annotations

from typing import Any

from kubetrain.api import Job
from kubetrain.contract import LABEL_JOB, LABEL_ROLE, ROLE_WORKER, SSH_PORT, ready_service_name, service_name
from kubetrain.manifests.names import metadata

# The label that ties an EndpointSlice to its Service, and the one that says who manages it (not Kubernetes).
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
MANAGED_BY = "operator.kubetrain.dev"


def build_service(job: Job) -> dict[str, Any]:
    """`<name>`: every worker pod's `<pod>.<name>.<namespace>.svc`, Ready or not (the pods' subdomain)."""
    return _headless(job, service_name(job.name), publish_not_ready=True)


def build_ready_service(job: Job) -> dict[str, Any] | None:
    """`<name>-ready` for an elastic job: its name resolves to the IPs of the Ready workers only; None otherwise."""
    if job.spec.elastic is None:
        return None
    # No selector (null removes one a Service made before still has): its endpoints are build_ready_endpoints'.
    return _headless(job, ready_service_name(job.name), publish_not_ready=False, selected=False)


def build_ready_endpoints(job: Job, ready: list[tuple[str, str, str]]) -> dict[str, Any]:
    """The EndpointSlice of `<name>-ready`: `ready` lists (pod name, uid, IP) of the Ready workers the operator
    created."""
    meta = metadata(job, ready_service_name(job.name), ROLE_WORKER)
    meta["labels"].update({SERVICE_NAME_LABEL: ready_service_name(job.name), MANAGED_BY_LABEL: MANAGED_BY})
    endpoints = [{"addresses": [ip], "conditions": {"ready": True}, "hostname": name,
                  "targetRef": {"kind": "Pod", "namespace": job.namespace, "name": name, "uid": uid}}
                 for name, uid, ip in sorted(ready)]
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": meta, "addressType": "IPv4",
            "ports": [{"name": "ssh", "port": SSH_PORT, "protocol": "TCP"}], "endpoints": endpoints}


def _headless(job: Job, name: str, publish_not_ready: bool, selected: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {"clusterIP": "None"}
    if publish_not_ready:  # false is the default, which the API server does not store (a drift check would not end)
        spec["publishNotReadyAddresses"] = True
    spec["selector"] = {LABEL_JOB: job.name, LABEL_ROLE: ROLE_WORKER} if selected else None
    spec["ports"] = [{"name": "ssh", "port": SSH_PORT, "targetPort": SSH_PORT, "protocol": "TCP"}]
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata(job, name, ROLE_WORKER), "spec": spec}
