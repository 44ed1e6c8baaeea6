"""Worker pods, and the pod pieces the worker and the launcher share (the TensorBoard container among them)."""

from __future__ import annotations

from typing import Any

from kubetrain.api import Job
from kubetrain.contract import (
    ENTRYPOINTS,
    HOME_DIR,
    HOSTS_DIR,
    INIT_CONTAINER,
    LABEL_ATTEMPT,
    LABEL_INDEX,
    ROLE_WORKER,
    SSH_DIR,
    SSH_PORT,
    TENSORBOARD_CONTAINER,
    TENSORBOARD_PORT,
    TENSORBOARD_PORT_NAME,
    hosts_configmap_name,
    service_name,
    worker_name,
)
from kubetrain.kueue import group_name, worker_metadata
from kubetrain.manifests.env import checkpoint_dir, container_env
from kubetrain.manifests.gang import build_pod_group, join_gang
from kubetrain.manifests.names import labels, metadata, runs_rank0
from kubetrain.manifests.ssh import WORKER_KEYS, ssh_volume
from kubetrain.manifests.template import merge_pod_template

GPU_RESOURCE = "nvidia.com/gpu"
# Where the init container puts the entrypoints: the volume the main containers mount read-only at ENTRYPOINTS.
ENTRYPOINTS_VOLUME = "kubetrain-entrypoints"
_COPY_TARGET = "/kubetrain-entrypoints"
CHECKPOINT_VOLUME = "checkpoint"
TENSORBOARD_TMP_VOLUME = "tensorboard-tmp"
# TensorBoard serving a job's scalars and graph: about 500 MiB resident (it loads TensorFlow), a little CPU when a
# browser reads it. The limit leaves room for large event files; the CPU is not limited.
TENSORBOARD_RESOURCES = {"requests": {"cpu": "100m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}}
# The container's script (arguments: folder, port, image): TensorBoard on the job's folder, or, where the image lacks
# it, one clear line in the log. It then stays up: a restarting container would keep its pod from being Ready, and so
# hold the training up.
SERVE_TENSORBOARD = (
    'if ! command -v tensorboard >/dev/null 2>&1; then\n'
    '  echo "kubetrain: error: image $3 has no tensorboard command: install it in the image (pip install'
    ' tensorboard; kubetrain\'s images have it), or set spec.tensorboard.enabled: false" >&2\n'
    "  trap 'kill $! 2>/dev/null; exit 0' TERM\n"
    '  while :; do sleep 3600 & wait $!; done\n'
    'fi\n'
    'exec tensorboard --logdir "$1" --bind_all --port "$2"\n'
)


def build_worker_pod(job: Job, index: int, attempt: int = 0) -> dict[str, Any]:
    """Worker `index`: sshd on 2222 (ready when it accepts TCP), GPUs, data and checkpoint volumes."""
    spec = job.spec
    name = worker_name(job.name, index)
    extra = {LABEL_INDEX: str(index), LABEL_ATTEMPT: str(attempt)}
    container = {
        "name": ROLE_WORKER,
        "image": spec.image,
        "command": [f"{ENTRYPOINTS}/worker"],
        "env": [*container_env(job, attempt), {"name": "HOME", "value": HOME_DIR}],
        "ports": [{"name": "ssh", "containerPort": SSH_PORT, "protocol": "TCP"}],
        "readinessProbe": {"tcpSocket": {"port": SSH_PORT}, "periodSeconds": 2, "failureThreshold": 3},
        "resources": worker_resources(job),
        "securityContext": container_security_context(job),
        "volumeMounts": [*shared_mounts(), *data_mounts(job)],
        # the tail of the log becomes the termination message: kept in status after the pod is gone
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    if spec.image_pull_policy:
        container["imagePullPolicy"] = spec.image_pull_policy
    pod_spec: dict[str, Any] = {
        "hostname": name,
        "subdomain": service_name(job.name),
        "restartPolicy": "Never",
        # rank 0 runs here and reports progress to the job's status with the namespace's ServiceAccount token (the
        # chart's admission policy lets it patch this job's status only)
        "automountServiceAccountToken": True,
        "securityContext": pod_security_context(job),
        "initContainers": [entrypoints_init_container(job), *tensorboard_containers(job, ROLE_WORKER, index)],
        "containers": [container],
        "volumes": [*shared_volumes(job, WORKER_KEYS), *data_volumes(job),
                    *tensorboard_volumes(job, ROLE_WORKER, index)],
        **scheduling(job),
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata(job, name, ROLE_WORKER, **extra),
        "spec": pod_spec,
    }
    pod = merge_pod_template(pod, job.spec.pod_template)
    if spec.scheduling.gang is not None:
        join_gang(pod, job, spec.scheduling.gang)
    if job.queue is not None:
        join_kueue_group(pod, job, attempt)
    return pod


def join_kueue_group(pod: dict[str, Any], job: Job, attempt: int) -> None:
    """Make the worker a member of the attempt's Kueue pod group (kubetrain.kueue), queued in the job's LocalQueue."""
    assert job.queue is not None
    group = group_name(job.name, job.uid, attempt)
    extra = worker_metadata(job.queue.name, job.queue.priority_class, group, job.spec.workers)
    meta = pod["metadata"]
    meta["labels"] = {**meta.get("labels", {}), **extra["labels"]}
    meta["annotations"] = {**meta.get("annotations", {}), **extra["annotations"]}


def build_worker_pod_group(job: Job) -> dict[str, Any] | None:
    """The PodGroup the workers join under spec.scheduling.gang (None without a gang)."""
    gang = job.spec.scheduling.gang
    if gang is None:
        return None
    resources = worker_resources(job)
    sidecar = TENSORBOARD_RESOURCES["requests"] if tensorboard_containers(job, ROLE_WORKER) else None
    return build_pod_group(job, gang, {**resources.get("limits", {}), **resources.get("requests", {})}, sidecar)


def worker_resources(job: Job) -> dict[str, Any]:
    resources = job.spec.resources
    requests: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    if resources.cpu:
        requests["cpu"] = limits["cpu"] = resources.cpu
    if resources.memory:
        requests["memory"] = limits["memory"] = resources.memory
    if resources.gpus_per_worker:
        limits[GPU_RESOURCE] = resources.gpus_per_worker
    out: dict[str, Any] = {}
    if requests:
        out["requests"] = requests
    if limits:
        out["limits"] = limits
    return out


def pod_security_context(job: Job) -> dict[str, Any]:
    """spec.runAsUser for user and group; fsGroup makes the Secret's 0400 files readable by a non-root uid."""
    uid = job.spec.run_as_user
    context: dict[str, Any] = {"runAsNonRoot": uid != 0, "runAsUser": uid, "runAsGroup": uid}
    if uid != 0:
        context["fsGroup"] = uid
    return {**context, "seccompProfile": {"type": "RuntimeDefault"}}


def container_security_context(job: Job) -> dict[str, Any]:
    """Non-root: the restricted Pod Security Standard. Root (spec.runAsUser: 0, an image that needs it): the runtime's
    default capabilities, which a root sshd needs, and a writable root filesystem (baseline, not restricted)."""
    if job.spec.run_as_user == 0:
        return {"allowPrivilegeEscalation": False}
    return _restricted_container()


def _restricted_container() -> dict[str, Any]:
    """A container's part of the restricted Pod Security Standard (with the pod's runAsNonRoot and seccomp)."""
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


def entrypoints_init_container(job: Job) -> dict[str, Any]:
    """Copies the worker and launcher entrypoints into the pod, so any image can run them."""
    return {
        "name": INIT_CONTAINER,
        "image": job.entrypoints_image,
        "command": ["/bin/busybox", "cp", "-R", f"{ENTRYPOINTS}/.", f"{_COPY_TARGET}/"],
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "16Mi"}},
        "securityContext": _restricted_container(),
        "volumeMounts": [{"name": ENTRYPOINTS_VOLUME, "mountPath": _COPY_TARGET}],
    }


def tensorboard_containers(job: Job, role: str, index: int = 0) -> list[dict[str, Any]]:
    """With spec.tensorboard.enabled, in the pod where rank 0 runs: TensorBoard from the job's image on the job's
    folder of the checkpoint volume (read-only), on the port named tensorboard. A sidecar (an init container that
    restarts always): it starts before the main container and ends after it, so the launcher's Job still completes."""
    if not (job.spec.tensorboard and runs_rank0(job, role, index)):
        return []
    container: dict[str, Any] = {
        "name": TENSORBOARD_CONTAINER,
        "image": job.spec.image,
        "restartPolicy": "Always",
        "command": ["/bin/sh", "-c", SERVE_TENSORBOARD, TENSORBOARD_CONTAINER, checkpoint_dir(job),
                    str(TENSORBOARD_PORT), job.spec.image],
        # TensorBoard and what it loads may write under HOME; the root filesystem is read-only
        "env": [{"name": "HOME", "value": "/tmp"}],
        "ports": [{"name": TENSORBOARD_PORT_NAME, "containerPort": TENSORBOARD_PORT, "protocol": "TCP"}],
        "resources": TENSORBOARD_RESOURCES,
        "securityContext": _restricted_container(),
        "volumeMounts": [{"name": CHECKPOINT_VOLUME, "mountPath": job.spec.checkpoint.mount_path, "readOnly": True},
                         {"name": TENSORBOARD_TMP_VOLUME, "mountPath": "/tmp"}],
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    if job.spec.image_pull_policy:
        container["imagePullPolicy"] = job.spec.image_pull_policy
    return [container]


def tensorboard_volumes(job: Job, role: str, index: int = 0) -> list[dict[str, Any]]:
    """The TensorBoard container's own writable /tmp, where it has one."""
    if not tensorboard_containers(job, role, index):
        return []
    return [{"name": TENSORBOARD_TMP_VOLUME, "emptyDir": {"sizeLimit": "64Mi"}}]


def shared_mounts() -> list[dict[str, Any]]:
    return [
        {"name": ENTRYPOINTS_VOLUME, "mountPath": ENTRYPOINTS, "readOnly": True},
        {"name": "ssh", "mountPath": SSH_DIR, "readOnly": True},
        {"name": "hosts", "mountPath": HOSTS_DIR, "readOnly": True},
        {"name": "home", "mountPath": HOME_DIR},
        {"name": "tmp", "mountPath": "/tmp"},
    ]


def shared_volumes(job: Job, ssh_keys: tuple[str, ...]) -> list[dict[str, Any]]:
    """The volumes of every pod of the job; `ssh_keys`: the keys of the job's SSH Secret this pod gets."""
    return [
        {"name": ENTRYPOINTS_VOLUME, "emptyDir": {}},
        ssh_volume(job, ssh_keys),
        {"name": "hosts", "configMap": {"name": hosts_configmap_name(job.name), "defaultMode": 0o555}},
        {"name": "home", "emptyDir": {}},
        {"name": "tmp", "emptyDir": {}},
    ]


def data_mounts(job: Job) -> list[dict[str, Any]]:
    data, checkpoint = job.spec.data, job.spec.checkpoint
    return [
        {"name": "data", "mountPath": data.mount_path, "readOnly": data.read_only},
        {"name": CHECKPOINT_VOLUME, "mountPath": checkpoint.mount_path},
        {"name": "shm", "mountPath": "/dev/shm"},
    ]


def data_volumes(job: Job) -> list[dict[str, Any]]:
    """PVCs when claimName is set; otherwise emptyDir (checkpoints then live only as long as the pod)."""

    def volume(name: str, claim: str | None, read_only: bool) -> dict[str, Any]:
        if claim:
            return {"name": name, "persistentVolumeClaim": {"claimName": claim, "readOnly": read_only}}
        return {"name": name, "emptyDir": {}}

    return [
        volume("data", job.spec.data.claim_name, job.spec.data.read_only),
        volume(CHECKPOINT_VOLUME, job.spec.checkpoint.claim_name, False),
        {"name": "shm", "emptyDir": {"medium": "Memory"}},
    ]


def scheduling(job: Job) -> dict[str, Any]:
    sched = job.spec.scheduling
    out: dict[str, Any] = {}
    if sched.node_selector:
        out["nodeSelector"] = dict(sched.node_selector)
    if sched.tolerations:
        out["tolerations"] = [dict(t) for t in sched.tolerations]
    if sched.priority_class_name:
        out["priorityClassName"] = sched.priority_class_name
    return out


def pod_labels(job: Job, role: str, attempt: int) -> dict[str, str]:
    return labels(job, role, **{LABEL_ATTEMPT: str(attempt)})
