"""Deterministic names, labels and owner references of every child of a DistributedTraining."""

from __future__ import annotations

from typing import Any

from kubetrain.api import GROUP, KIND, VERSION, Job

LABEL_JOB = "kubetrain.dev/job-name"
LABEL_ROLE = "kubetrain.dev/role"
LABEL_INDEX = "kubetrain.dev/replica-index"
LABEL_ATTEMPT = "kubetrain.dev/attempt"
ROLE_WORKER = "worker"
ROLE_LAUNCHER = "launcher"
ROLE_CONFIG = "config"
SSH_PORT = 2222
SSH_DIR = "/etc/kubetrain/ssh"
HOSTS_DIR = "/etc/kubetrain/hosts"
ENTRYPOINTS = "/opt/kubetrain/entrypoints"
HOME_DIR = "/home/kubetrain"


def worker_name(name: str, index: int) -> str:
    return f"{name}-worker-{index}"


def worker_hostname(job: Job, index: int) -> str:
    """The fully qualified name a worker answers to through the headless Service."""
    return f"{worker_name(job.name, index)}.{service_name(job.name)}.{job.namespace}.svc"


def launcher_name(name: str) -> str:
    return f"{name}-launcher"


def service_name(name: str) -> str:
    return name


def ssh_secret_name(name: str) -> str:
    return f"{name}-ssh"


def hosts_configmap_name(name: str) -> str:
    return f"{name}-hosts"


def service_account_name(name: str) -> str:
    return f"{name}-job"


def role_name(name: str) -> str:
    return f"{name}-status-writer"


def labels(job: Job, role: str, **extra: str) -> dict[str, str]:
    """Labels on every child: who owns it and what it is."""
    return {
        "app.kubernetes.io/name": "kubetrain",
        "app.kubernetes.io/managed-by": "kubetrain-operator",
        "app.kubernetes.io/instance": job.name,
        LABEL_JOB: job.name,
        LABEL_ROLE: role,
        **extra,
    }


def owner_reference(job: Job) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "name": job.name,
        "uid": job.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def metadata(job: Job, name: str, role: str, **extra_labels: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": job.namespace,
        "labels": labels(job, role, **extra_labels),
        "ownerReferences": [owner_reference(job)],
    }
