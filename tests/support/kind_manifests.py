"""The objects the kind tests create, built as plain data: the kind cluster's config, the volumes every node shares,
the jobs of the scenarios (jobs/cifar_mixup/job.yaml made small, an elastic one, a user's own image) and the one-pod
Jobs that prepare data and read the checkpoint volume back."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from cifar_mixup.demo import DIGITS_FLAGS
from tests.support.programs import REPO

CIFAR_MIXUP_JOB = REPO / "jobs" / "cifar_mixup" / "job.yaml"
NODE_VOLUMES = "/kubetrain-volumes"  # where every node mounts the host directory that holds the PersistentVolumes
DATA_CLAIM = "kubetrain-data"
CHECKPOINT_CLAIM = "kubetrain-checkpoints"
DATA_MOUNT = "/data"
CHECKPOINT_MOUNT = "/checkpoints"
DIGITS = f"{DATA_MOUNT}/digits"
VOLUME_DIRECTORIES = {DATA_CLAIM: "data", CHECKPOINT_CLAIM: "checkpoints"}
IMAGES_USER = 1000  # the uid and gid kubetrain's images run as


def cluster_config(volumes: Path, worker_nodes: int, plain_cni: bool) -> dict[str, Any]:
    """kind's cluster config: one control plane and `worker_nodes` workers, each mounting `volumes`. kubelet may run
    on cgroup v1 hosts (it refuses them by default since Kubernetes 1.31; a no-op on cgroup v2)."""
    roles = ["control-plane"] + ["worker"] * worker_nodes
    config: dict[str, Any] = {
        "kind": "Cluster",
        "apiVersion": "kind.x-k8s.io/v1alpha4",
        "nodes": [{"role": role, "extraMounts": [{"hostPath": str(volumes), "containerPath": NODE_VOLUMES}]}
                  for role in roles],
        "kubeadmConfigPatches": ["kind: KubeletConfiguration\nfailCgroupV1: false\n"],
    }
    if plain_cni:
        config["networking"] = {"disableDefaultCNI": True}
    return config


def shared_volume(namespace: str, claim: str) -> list[dict[str, Any]]:
    """A PersistentVolume on the directory every node mounts, bound to the claim `claim`: ReadWriteMany, as shared
    storage on a real cluster would be."""
    volume = f"{namespace}-{claim}"
    return [
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": volume},
         "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"],
                  "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
                  "claimRef": {"namespace": namespace, "name": claim},
                  "hostPath": {"path": f"{NODE_VOLUMES}/{VOLUME_DIRECTORIES[claim]}", "type": "Directory"}}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": claim, "namespace": namespace},
         "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": volume,
                  "resources": {"requests": {"storage": "1Gi"}}}},
    ]


def pod_job(name: str, image: str, claim: str, mount: str, command: list[str]) -> dict[str, Any]:
    """A batch Job of one pod running `command` in `image` as the images' user, with `claim` at `mount`."""
    container = {"name": "main", "image": image, "imagePullPolicy": "IfNotPresent", "command": command,
                 "volumeMounts": [{"name": "volume", "mountPath": mount}]}
    pod = {"restartPolicy": "Never",
           "securityContext": {"runAsUser": IMAGES_USER, "runAsGroup": IMAGES_USER, "fsGroup": IMAGES_USER},
           "containers": [container],
           "volumes": [{"name": "volume", "persistentVolumeClaim": {"claimName": claim}}]}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"backoffLimit": 0, "template": {"spec": pod}}}


def cifar_mixup(name: str, epochs: int, image: str) -> dict[str, Any]:
    """jobs/cifar_mixup/job.yaml as shipped, made small for kind: `image` (loaded, never pulled), 2 workers x 1 slot
    without GPUs, the test's claims, the digits data with the demo's batch and learning rate, one restart at most."""
    body = yaml.safe_load(CIFAR_MIXUP_JOB.read_text())
    body["metadata"]["name"] = name
    spec = body["spec"]
    spec["image"] = image
    spec["imagePullPolicy"] = "IfNotPresent"
    spec["command"] = ["python", "-m", "cifar_mixup", "--data-dir", DIGITS, "--epochs", str(epochs), *DIGITS_FLAGS,
                       "--seed", "0", "--mixup", "--alpha", "0.2"]
    spec["workers"] = 2
    spec["slotsPerWorker"] = 1
    spec["resources"] = {"gpusPerWorker": 0, "cpu": "500m", "memory": "1500Mi"}
    spec["data"] = {"claimName": DATA_CLAIM, "mountPath": DATA_MOUNT, "readOnly": True}
    spec["checkpoint"] = {"claimName": CHECKPOINT_CLAIM, "mountPath": CHECKPOINT_MOUNT}
    spec.pop("scheduling", None)  # no GPU node selectors or tolerations on kind
    spec.setdefault("runPolicy", {})["backoffLimit"] = 1
    return body


def elastic(body: dict[str, Any], min_workers: int, max_workers: int) -> dict[str, Any]:
    """`body` as an elastic job that commits every 5 batches, its workers small enough for three and the launcher
    to share a kind node."""
    body = copy.deepcopy(body)
    spec = body["spec"]
    spec["elastic"] = {"minWorkers": min_workers, "maxWorkers": max_workers}
    spec["command"] = [*spec["command"], "--commit-every-batches", "5"]
    spec["resources"]["cpu"] = "400m"
    return body


def own_image(name: str, image: str) -> dict[str, Any]:
    """A user's own MPICH image (tests/images/byo) as a user writes its job: one worker and the launcher as a
    second, an mpi4py allreduce across both pods."""
    return {"apiVersion": "kubetrain.dev/v1alpha1", "kind": "DistributedTraining", "metadata": {"name": name},
            "spec": {"image": image, "imagePullPolicy": "IfNotPresent",
                     "command": ["python", "/opt/byo/allreduce.py", "2"], "mpi": {"implementation": "MPICH"},
                     "workers": 1, "launcher": {"runAsWorker": True}, "resources": {"cpu": "500m", "memory": "512Mi"}}}


# Run in a pod on the checkpoint volume: prints what a job's checkpoint folder holds as one line of JSON.
_READ_CHECKPOINT = """
import glob, json, os, sys
folder, checkpoint = sys.argv[1:]
def read(name, mode):
    path = os.path.join(folder, name)
    return open(path, mode).read() if os.path.exists(path) else None
history, png = read("history.json", "r"), read("history.png", "rb")
files = [os.path.relpath(os.path.join(root, name), folder) for root, _, names in os.walk(folder) for name in names]
print(json.dumps({
    "files": sorted(files),
    "checkpoint": os.path.exists(checkpoint) or bool(glob.glob(glob.escape(checkpoint) + "*")),
    "epochs": None if history is None else [record["epoch"] for record in json.loads(history)["epochs"]],
    "png_header": None if png is None else png[:8].hex(),
}))
"""


def prepare_digits(image: str) -> dict[str, Any]:
    """A Job writing scikit-learn's digits as HDF5 to DIGITS on the data claim, with cifar_mixup's converter."""
    return pod_job("prepare-data", image, DATA_CLAIM, DATA_MOUNT,
                   ["python", "-m", "cifar_mixup.convert", "digits", "--out", DIGITS])


def read_checkpoints(image: str, folder: str, checkpoint: str) -> dict[str, Any]:
    """A Job that prints, as one line of JSON, what `folder` on the checkpoint claim holds: its files, whether
    `checkpoint` (a path, or the prefix of its files) exists, history.json's epochs and history.png's first bytes."""
    return pod_job("read-checkpoint", image, CHECKPOINT_CLAIM, CHECKPOINT_MOUNT,
                   ["python", "-c", _READ_CHECKPOINT, folder, checkpoint])
