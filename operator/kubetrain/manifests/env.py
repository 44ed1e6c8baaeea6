"""The environment contract between the operator, the entrypoints and the training programs."""

from __future__ import annotations

from typing import Any

from kubetrain.api import Job
from kubetrain.contract import ELASTIC_HOSTS, HOSTFILE, OPEN_MPI_ENV, SSH_DIR, SSH_PORT, ready_service_name

# Forwarded to every rank by the launcher (`mpirun -x`) besides the KUBETRAIN_* variables and the user's env.
FORWARDED_CLUSTER_VARIABLES = ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")
# spec.env sources each rank takes from its own pod, never from the launcher (KUBETRAIN_POD_ENV). The kubelet
# resolves fieldRef and resourceFieldRef per pod: the launcher's value would be wrong on every other pod. A
# secretKeyRef's value is the same everywhere, but horovodrun writes what it forwards into each rank's command line.
POD_OWN_SOURCES = ("fieldRef", "resourceFieldRef", "secretKeyRef")


def checkpoint_dir(job: Job) -> str:
    """Each job checkpoints into its own folder of the checkpoint volume."""
    return f"{job.spec.checkpoint.mount_path}/{job.namespace}/{job.name}"


def job_environment(job: Job, in_pod: bool = True, attempt: int | None = None) -> dict[str, str]:
    """KUBETRAIN_* variables every worker, launcher and rank sees, and Open MPI's defaults the job's env leaves.
    `in_pod=False` (`kubetrain run --local`) leaves out what only a pod has: a status to report to, and GPUs given.
    `attempt` is the pods' attempt (status.attempt), which rank 0 names in its startup report."""
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
    if in_pod:
        values["KUBETRAIN_REPORT_STATUS"] = "1"
        # a rank that holds GPUs its program cannot see stops at once (trainlib.gpus, lib/common.sh's kt_check_gpus)
        values["KUBETRAIN_GPUS_PER_RANK"] = str(spec.gpus_per_rank)
        if attempt is not None:
            values["KUBETRAIN_ATTEMPT"] = str(attempt)
    if spec.mpi_implementation == "OpenMPI":
        user_set = {entry["name"] for entry in spec.env}
        values.update({name: value for name, value in OPEN_MPI_ENV.items() if name not in user_set})
    own = pod_own_names(job)
    if own:
        values["KUBETRAIN_POD_ENV"] = " ".join(own)
    user_names = [entry["name"] for entry in spec.env if entry["name"] not in own]
    values["KUBETRAIN_FORWARD_ENV"] = " ".join(
        [*sorted(values), "KUBETRAIN_FORWARD_ENV", *FORWARDED_CLUSTER_VARIABLES, *user_names]
    )
    return values


def pod_own_names(job: Job) -> list[str]:
    """The spec.env names every rank reads from its own pod (POD_OWN_SOURCES): the launcher forwards none of them,
    and lib/pod-env.sh gives each rank the values its pod's entrypoint saved."""
    return [entry["name"] for entry in job.spec.env if set(entry.get("valueFrom") or {}) & set(POD_OWN_SOURCES)]


def container_env(job: Job, attempt: int) -> list[dict[str, Any]]:
    """The contract for a pod of `attempt` as a container env list, followed by the user's spec.env entries."""
    contract = [{"name": key, "value": value} for key, value in job_environment(job, attempt=attempt).items()]
    return [*contract, *(dict(entry) for entry in job.spec.env)]
