"""Labels, owner references and metadata of every child of a DistributedTraining, and the workers' DNS names."""

from __future__ import annotations

from typing import Any

from kubetrain.api import Job
from kubetrain.contract import (
    GROUP,
    KIND,
    LABEL_JOB,
    LABEL_ROLE,
    ROLE_LAUNCHER,
    ROLE_WORKER,
    VERSION,
    launcher_name,
    service_name,
    worker_name,
)


def worker_hostname(job: Job, index: int) -> str:
    """The fully qualified name a worker answers to through the headless Service."""
    return _qualified(job, worker_name(job.name, index))


def launcher_hostname(job: Job) -> str:
    """The launcher pod's hostname. The hostfile names it so (launcher.runAsWorker): the launcher's own name, which
    every MPI sees is this host and starts its ranks here without ssh (a fully qualified name fools Open MPI 5)."""
    return launcher_name(job.name)


def rank_hostnames(job: Job) -> list[str]:
    """Every pod that runs ranks, in hostfile order: the launcher first when it runs ranks, then the workers."""
    own = [launcher_hostname(job)] if job.spec.launcher_runs_ranks else []
    return [*own, *(worker_hostname(job, index) for index in range(job.spec.workers))]


def runs_rank0(job: Job, role: str, index: int = 0) -> bool:
    """Whether rank 0 runs in this pod (role, worker index): the first host of `rank_hostnames`, the launcher when it
    runs ranks, else worker 0. An elastic job starts so too; after a loss its rank 0 may be on another worker."""
    if job.spec.launcher_runs_ranks:
        return role == ROLE_LAUNCHER
    return role == ROLE_WORKER and index == 0


def elastic_hostnames(job: Job) -> list[str]:
    """Every pod that may run ranks of an elastic job: the launcher first when it runs ranks, then workers
    0..maxWorkers-1."""
    elastic = job.spec.elastic
    assert elastic is not None
    own = [launcher_hostname(job)] if job.spec.launcher_runs_ranks else []
    return [*own, *(worker_hostname(job, index) for index in range(elastic.max_workers))]


def _qualified(job: Job, pod_hostname: str) -> str:
    return f"{pod_hostname}.{service_name(job.name)}.{job.namespace}.svc"


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
