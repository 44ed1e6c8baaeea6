"""The hostfile ConfigMap: OpenMPI hostfile with slots, and discover_hosts.sh for Horovod elastic."""

from __future__ import annotations

from typing import Any

from kubetrain.api import Job
from kubetrain.contract import ROLE_CONFIG, hosts_configmap_name
from kubetrain.manifests.names import metadata, worker_hostname


def hostfile(job: Job) -> str:
    slots = job.spec.slots_per_worker
    return "".join(f"{worker_hostname(job, i)} slots={slots}\n" for i in range(job.spec.workers))


def discover_hosts_script(job: Job) -> str:
    slots = job.spec.slots_per_worker
    lines = "".join(f"echo {worker_hostname(job, i)}:{slots}\n" for i in range(job.spec.workers))
    header = f"# Hosts of DistributedTraining {job.namespace}/{job.name}, for horovodrun --host-discovery-script.\n"
    return f"#!/bin/sh\n{header}{lines}"


def build_hosts_configmap(job: Job) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(job, hosts_configmap_name(job.name), ROLE_CONFIG),
        "data": {"hostfile": hostfile(job), "discover_hosts.sh": discover_hosts_script(job)},
    }
