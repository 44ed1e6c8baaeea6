"""Per-job ServiceAccount and Role: rank 0 may patch this one resource's status and nothing else."""

from __future__ import annotations

from typing import Any

from kubetrain.api import Job
from kubetrain.contract import GROUP, PLURAL, ROLE_CONFIG, role_name, service_account_name
from kubetrain.manifests.names import metadata


def build_service_account(job: Job) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": metadata(job, service_account_name(job.name), ROLE_CONFIG),
        "automountServiceAccountToken": False,
    }


def build_role(job: Job) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": metadata(job, role_name(job.name), ROLE_CONFIG),
        "rules": [
            {
                "apiGroups": [GROUP],
                "resources": [f"{PLURAL}/status"],
                "resourceNames": [job.name],
                "verbs": ["get", "patch"],
            }
        ],
    }


def build_role_binding(job: Job) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": metadata(job, role_name(job.name), ROLE_CONFIG),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role_name(job.name)},
        "subjects": [{"kind": "ServiceAccount", "name": service_account_name(job.name), "namespace": job.namespace}],
    }
