"""The objects the kind tests create, built as plain data from the quick start's own files (examples/kind/): the
cluster's config as this machine runs it, the jobs of the scenarios (examples/kind/cifar-mixup.yaml renamed, an elastic
one, a user's own image) and the one-pod Job that reads the checkpoint volume back."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from tests.support.programs import REPO

EXAMPLES = REPO / "examples" / "kind"
CLUSTER_CONFIG = EXAMPLES / "cluster.yaml"
CIFAR_MIXUP_JOB = EXAMPLES / "cifar-mixup.yaml"
IMAGES_USER = 1000  # the uid and gid kubetrain's images run as


QUICK_START_JOB: dict[str, Any] = yaml.safe_load(CIFAR_MIXUP_JOB.read_text())
CHECKPOINT_CLAIM = QUICK_START_JOB["spec"]["checkpoint"]["claimName"]
CHECKPOINT_MOUNT = QUICK_START_JOB["spec"]["checkpoint"]["mountPath"]


def cluster_config(plain_cni: bool) -> dict[str, Any]:
    """examples/kind/cluster.yaml, without kind's default CNI where the node image has none (plain_cni: the pod
    network of tests/e2e/kind-node/cni.sh instead)."""
    config = yaml.safe_load(CLUSTER_CONFIG.read_text())
    if plain_cni:
        config["networking"] = {**config.get("networking", {}), "disableDefaultCNI": True}
    return config


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


def cifar_mixup(name: str, epochs: int, image: str | None = None) -> dict[str, Any]:
    """examples/kind/cifar-mixup.yaml (the quick start's job: the digits, 2 workers without GPUs) named `name`,
    training `epochs` epochs, in `image` if given."""
    body = copy.deepcopy(QUICK_START_JOB)
    body["metadata"]["name"] = name
    spec = body["spec"]
    if image is not None:
        spec["image"] = image
    command = spec["command"]
    command[command.index("--epochs") + 1] = str(epochs)
    return body


def job_image() -> str:
    """The image of the quick start's job (pulled from the quick start's registry)."""
    return str(QUICK_START_JOB["spec"]["image"])


def trained_epochs(body: dict[str, Any]) -> int:
    """The epochs a cifar_mixup job's command asks for."""
    command = body["spec"]["command"]
    return int(command[command.index("--epochs") + 1])


def elastic(body: dict[str, Any], min_workers: int, max_workers: int) -> dict[str, Any]:
    """`body` as an elastic job that commits every 5 batches, its workers small enough for three and the launcher
    to share a kind node."""
    body = copy.deepcopy(body)
    spec = body["spec"]
    spec["elastic"] = {"minWorkers": min_workers, "maxWorkers": max_workers}
    spec["command"] = [*spec["command"], "--commit-every-batches", "5"]
    spec["resources"]["cpu"] = "400m"
    return body


def with_tensorboard(body: dict[str, Any]) -> dict[str, Any]:
    """`body` with spec.tensorboard: {enabled: true}: a TensorBoard container in its rank-0 pod."""
    body = copy.deepcopy(body)
    body["spec"]["tensorboard"] = {"enabled": True}
    return body


def own_image(name: str, image: str) -> dict[str, Any]:
    """A user's own MPICH image (tests/images/byo) as a user writes its job: one worker and the launcher as a
    second, an mpi4py allreduce across both pods."""
    return {"apiVersion": "kubetrain.dev/v1alpha1", "kind": "DistributedTraining", "metadata": {"name": name},
            "spec": {"image": image, "command": ["python", "/opt/byo/allreduce.py", "2"],
                     "mpi": {"implementation": "MPICH"}, "workers": 1, "launcher": {"runAsWorker": True},
                     "resources": {"cpu": "500m", "memory": "512Mi"}}}


# Run in a pod on the checkpoint volume: prints what a job's checkpoint folder holds as one line of JSON.
_READ_CHECKPOINT = """
import glob, json, os, sys
folder, checkpoint = sys.argv[1:]
def read(name, mode):
    path = os.path.join(folder, name)
    return open(path, mode).read() if os.path.exists(path) else None
history = read("history.json", "r")
files = [os.path.relpath(os.path.join(root, name), folder) for root, _, names in os.walk(folder) for name in names]
print(json.dumps({
    "files": sorted(files),
    "checkpoint": os.path.exists(checkpoint) or bool(glob.glob(glob.escape(checkpoint) + "*")),
    "epochs": None if history is None else [record["epoch"] for record in json.loads(history)["epochs"]],
}))
"""


def read_checkpoints(image: str, folder: str, checkpoint: str) -> dict[str, Any]:
    """A Job that prints, as one line of JSON, what `folder` on the checkpoint claim holds: its files, whether
    `checkpoint` (a path, or the prefix of its files) exists and history.json's epochs."""
    return pod_job("read-checkpoint", image, CHECKPOINT_CLAIM, CHECKPOINT_MOUNT,
                   ["python", "-c", _READ_CHECKPOINT, folder, checkpoint])

