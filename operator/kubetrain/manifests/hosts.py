"""The hostfile ConfigMap: the hostfile in the format of the job's MPI, and discover_hosts.sh for Horovod elastic."""

from __future__ import annotations

from typing import Any

from kubetrain.api import Job
from kubetrain.contract import MPI_IMPLEMENTATIONS, ROLE_CONFIG, hosts_configmap_name
from kubetrain.manifests.names import metadata, rank_hostnames


def hostfile(job: Job) -> str:
    """One line per pod that runs ranks: `host slots=N` for Open MPI, `host:N` for Intel MPI and MPICH."""
    line = MPI_IMPLEMENTATIONS[job.spec.mpi_implementation]
    slots = job.spec.slots_per_worker
    return "".join(line.format(host=host, slots=slots) + "\n" for host in rank_hostnames(job))


def discover_hosts_script(job: Job) -> str:
    slots = job.spec.slots_per_worker
    lines = "".join(f"echo {host}:{slots}\n" for host in rank_hostnames(job))
    header = f"# Hosts of DistributedTraining {job.namespace}/{job.name}, for horovodrun --host-discovery-script.\n"
    return f"#!/bin/sh\n{header}{lines}"


def build_hosts_configmap(job: Job) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(job, hosts_configmap_name(job.name), ROLE_CONFIG),
        "data": {"hostfile": hostfile(job), "discover_hosts.sh": discover_hosts_script(job)},
    }
