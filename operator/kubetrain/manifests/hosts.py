"""The hosts ConfigMap: the hostfile in the format of the job's MPI, and an elastic job's every possible host."""

from __future__ import annotations

from typing import Any

from kubetrain.api import Job
from kubetrain.contract import ELASTIC_HOSTS, HOSTFILE, MPI_IMPLEMENTATIONS, ROLE_CONFIG, hosts_configmap_name
from kubetrain.manifests.names import elastic_hostnames, metadata, rank_hostnames


def hostfile(job: Job) -> str:
    """One line per pod that runs ranks: `host slots=N` for Open MPI, `host:N` for Intel MPI and MPICH."""
    line = MPI_IMPLEMENTATIONS[job.spec.mpi_implementation]
    slots = job.spec.slots_per_worker
    return "".join(line.format(host=host, slots=slots) + "\n" for host in rank_hostnames(job))


def elastic_hosts(job: Job) -> str:
    """`host:slots` for every pod that may ever run ranks of an elastic job (Horovod's discovery format): the
    launcher's discovery prints the lines of those that are Ready. Fixed for the job's life (maxWorkers is)."""
    slots = job.spec.slots_per_worker
    return "".join(f"{host}:{slots}\n" for host in elastic_hostnames(job))


def build_hosts_configmap(job: Job) -> dict[str, Any]:
    data = {HOSTFILE.rsplit("/", 1)[1]: hostfile(job)}
    if job.spec.elastic is not None:
        data[ELASTIC_HOSTS.rsplit("/", 1)[1]] = elastic_hosts(job)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(job, hosts_configmap_name(job.name), ROLE_CONFIG),
        "data": data,
    }
