"""The headless Services of the workers: one gives every worker a stable DNS name from its start; an elastic job's
second one lists only Ready workers, which is how its launcher discovers them (DNS, no API calls, no ConfigMap lag)."""

from __future__ import annotations

from typing import Any

from kubetrain.api import Job
from kubetrain.contract import LABEL_JOB, LABEL_ROLE, ROLE_WORKER, SSH_PORT, ready_service_name, service_name
from kubetrain.manifests.names import metadata


def build_service(job: Job) -> dict[str, Any]:
    """`<name>`: every worker pod's `<pod>.<name>.<namespace>.svc`, Ready or not (the pods' subdomain)."""
    return _headless(job, service_name(job.name), publish_not_ready=True)


def build_ready_service(job: Job) -> dict[str, Any] | None:
    """`<name>-ready` for an elastic job: its name resolves to the IPs of the Ready workers only; None otherwise."""
    if job.spec.elastic is None:
        return None
    return _headless(job, ready_service_name(job.name), publish_not_ready=False)


def _headless(job: Job, name: str, publish_not_ready: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {"clusterIP": "None"}
    if publish_not_ready:  # false is the default, which the API server does not store (a drift check would not end)
        spec["publishNotReadyAddresses"] = True
    spec["selector"] = {LABEL_JOB: job.name, LABEL_ROLE: ROLE_WORKER}
    spec["ports"] = [{"name": "ssh", "port": SSH_PORT, "targetPort": SSH_PORT, "protocol": "TCP"}]
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata(job, name, ROLE_WORKER), "spec": spec}
