"""The environment contract between the operator, the entrypoints and the training programs."""

from __future__ import annotations

from typing import Any

from kubetrain.api import Job
from kubetrain.contract import ELASTIC_HOSTS, HOSTFILE, SSH_DIR, SSH_PORT, ready_service_name

# Forwarded to every rank by the launcher (`mpirun -x`) besides the KUBETRAIN_* variables and the user's env.
FORWARDED_CLUSTER_VARIABLES = ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")


def checkpoint_dir(job: Job) -> str:
    """Each job checkpoints into its own folder of the checkpoint volume."""
    return f"{job.spec.checkpoint.mount_path}/{job.namespace}/{job.name}"


def job_environment(job: Job, report_status: bool = True) -> dict[str, str]:
    """KUBETRAIN_* variables every worker, launcher and rank sees."""
    spec = job.spec
    values = {
        "KUBETRAIN_JOB_NAME": job.name,
        "KUBETRAIN_NAMESPACE": job.namespace,
        "KUBETRAIN_DATA_DIR": spec.data.mount_path,
        "KUBETRAIN_CHECKPOINT_DIR": checkpoint_dir(job),
        "KUBETRAIN_CHECKPOINT_RESUME": spec.checkpoint_resume,
        # recorded with every checkpoint, so a later job of the same name knows who wrote it
        "KUBETRAIN_JOB_UID": job.uid,
        "KUBETRAIN_NUM_PROCESSES": str(spec.num_processes),
        "KUBETRAIN_SLOTS_PER_WORKER": str(spec.slots_per_worker),
        "KUBETRAIN_HOSTFILE": HOSTFILE,
        "KUBETRAIN_SSH_DIR": SSH_DIR,
        "KUBETRAIN_SSH_PORT": str(SSH_PORT),
        "KUBETRAIN_WAIT_SECONDS": str(spec.wait_for_workers_seconds),
        "KUBETRAIN_MPI_IMPLEMENTATION": spec.mpi_implementation,
        "KUBETRAIN_IMAGE": spec.image,
    }
    if spec.elastic is not None:
        values["KUBETRAIN_ELASTIC_MIN_WORKERS"] = str(spec.elastic.min_workers)
        values["KUBETRAIN_ELASTIC_MAX_WORKERS"] = str(spec.elastic.max_workers)
        values["KUBETRAIN_ELASTIC_HOSTS"] = ELASTIC_HOSTS
        values["KUBETRAIN_READY_SERVICE"] = f"{ready_service_name(job.name)}.{job.namespace}.svc"
    if report_status:
        values["KUBETRAIN_REPORT_STATUS"] = "1"
    user_names = [entry["name"] for entry in spec.env]
    values["KUBETRAIN_FORWARD_ENV"] = " ".join(
        [*sorted(values), "KUBETRAIN_FORWARD_ENV", *FORWARDED_CLUSTER_VARIABLES, *user_names]
    )
    return values


def container_env(job: Job) -> list[dict[str, Any]]:
    """The contract as a container env list, followed by the user's spec.env entries."""
    contract = [{"name": key, "value": value} for key, value in job_environment(job).items()]
    return [*contract, *(dict(entry) for entry in job.spec.env)]
