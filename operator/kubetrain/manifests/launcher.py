"""The launcher Job: waits for sshd on every worker, then starts the training command with the job's MPI.

With launcher.runAsWorker it also runs ranks (the hostfile's first line): it gets the workers' resources, GPUs
included, and their data and checkpoint volumes."""

from __future__ import annotations

from typing import Any

from kubetrain.api import Job
from kubetrain.contract import (
    ENTRYPOINTS,
    HOME_DIR,
    LABEL_ATTEMPT,
    ROLE_LAUNCHER,
    TERMINATION_LOG,
    launcher_name,
)
from kubetrain.manifests.env import container_env
from kubetrain.manifests.names import launcher_hostname, metadata
from kubetrain.manifests.pods import (
    container_security_context,
    data_mounts,
    data_volumes,
    entrypoints_init_container,
    pod_labels,
    pod_security_context,
    scheduling,
    shared_mounts,
    shared_volumes,
    tensorboard_containers,
    tensorboard_volumes,
    worker_resources,
)
from kubetrain.manifests.ssh import LAUNCHER_KEYS
from kubetrain.manifests.template import merge_pod_template

LAUNCHER_RESOURCES = {"requests": {"cpu": "100m", "memory": "256Mi"}}
# The launcher only runs mpirun: hide every GPU of the node from it.
NO_GPU_ENV = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": ""}, {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": ""}]


def build_launcher_job(job: Job, attempt: int = 0) -> dict[str, Any]:
    """A batch Job with a single never-retried pod; the operator, not the Job controller, decides on restarts."""
    spec = job.spec
    runs_ranks = spec.launcher_runs_ranks
    container: dict[str, Any] = {
        "name": ROLE_LAUNCHER,
        "image": spec.image,
        "command": [f"{ENTRYPOINTS}/launcher", *spec.command],
        "env": [*container_env(job, attempt), {"name": "HOME", "value": HOME_DIR},
                # where the entrypoint writes which rank failed (its terminationMessagePath)
                {"name": "KUBETRAIN_TERMINATION_LOG", "value": TERMINATION_LOG},
                *([] if runs_ranks else NO_GPU_ENV)],
        "resources": worker_resources(job) if runs_ranks else LAUNCHER_RESOURCES,
        "securityContext": container_security_context(job),
        "volumeMounts": [*shared_mounts(), *(data_mounts(job) if runs_ranks else [])],
        # The entrypoint's failure report (which rank failed, its last lines) becomes the termination message; when
        # it wrote none, the tail of the log does. Both are kept in the pod's status after the container is gone.
        "terminationMessagePath": TERMINATION_LOG,
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    if spec.image_pull_policy:
        container["imagePullPolicy"] = spec.image_pull_policy
    template = {
        "metadata": {"labels": pod_labels(job, ROLE_LAUNCHER, attempt)},
        "spec": {
            # the name the hostfile gives it when it runs ranks (launcher.runAsWorker)
            "hostname": launcher_hostname(job),
            "restartPolicy": "Never",
            # rank 0 reports progress with the namespace's ServiceAccount token (the chart's admission policy lets
            # it patch this job's status only): it runs here with launcher.runAsWorker
            "automountServiceAccountToken": runs_ranks,
            "securityContext": pod_security_context(job),
            "initContainers": [entrypoints_init_container(job), *tensorboard_containers(job, ROLE_LAUNCHER)],
            "containers": [container],
            "volumes": [*shared_volumes(job, LAUNCHER_KEYS), *(data_volumes(job) if runs_ranks else []),
                        *tensorboard_volumes(job, ROLE_LAUNCHER)],
            **scheduling(job),
        },
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata(job, launcher_name(job.name), ROLE_LAUNCHER, **{LABEL_ATTEMPT: str(attempt)}),
        "spec": {"backoffLimit": 0, "template": merge_pod_template(template, job.spec.pod_template)},
    }
