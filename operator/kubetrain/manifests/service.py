"""The headless Service that gives every worker a stable DNS name."""

from __future__ import annotations

from typing import Any

from kubetrain.api import Job
from kubetrain.contract import LABEL_JOB, LABEL_ROLE, ROLE_WORKER, SSH_PORT, service_name
from kubetrain.manifests.names import metadata


def build_service(job: Job) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(job, service_name(job.name), ROLE_WORKER),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {LABEL_JOB: job.name, LABEL_ROLE: ROLE_WORKER},
            "ports": [{"name": "ssh", "port": SSH_PORT, "targetPort": SSH_PORT, "protocol": "TCP"}],
        },
    }
