"""The benchmark's peer, Kubeflow's mpi-operator v0.8.0 (built by tests/bench/peer/build.sh), on the same control
plane as kubetrain: its CRD from the Go module cache, an MPIJob equal to the bench's DistributedTraining, and the
operator process as shipped or tuned."""

from __future__ import annotations

import fcntl
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from .controlplane_access import REPO, wait_until

BUILD = REPO / "tests" / "bench" / "peer" / "build.sh"
VERSION = "v0.8.0"
LOCK_NAMESPACE = "mpi-operator"  # its leader-election lock lives here
SHIPPED: tuple[str, ...] = ()  # its defaults: client QPS 5, burst 10, threadiness 2, queue 10/s burst 100
TUNED = ("--kube-api-qps=500", "--kube-api-burst=1000", "--threadiness=8", "--controller-queue-rate-limit=500",
         "--controller-queue-burst=1000")


def root() -> Path:
    return Path(subprocess.run([str(BUILD), "--print-root"], capture_output=True, text=True, check=True).stdout.strip())


def hold_health_port() -> IO[str]:
    """Wait for, then hold, this machine's lock on mpi-operator's health check port (8080, hard-coded): the bench and
    kind tiers each run one, perhaps at once. Closing the file releases it."""
    lock = (root().parent / "mpi-operator-8080.lock").open("w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    return lock


def binary() -> Path | None:
    """The built binary, or None (then the peer's rows say how to build it)."""
    path = root() / "bin" / "mpi-operator"
    return path if path.exists() else None


def crd_path() -> Path:
    """kubeflow.org_mpijobs.yaml of the pinned module, from the Go module cache the build filled."""
    module = root().parent / "go" / "path" / "pkg" / "mod" / "github.com" / "kubeflow" / f"mpi-operator@{VERSION}"
    return module / "manifests" / "base" / "kubeflow.org_mpijobs.yaml"


def install(kubectl: Callable[..., str]) -> None:
    """Its CRD, Established, and the namespace of its lock, on the cluster `kubectl` (kubectl's stdout) reaches."""
    kubectl("apply", "--server-side", f"--filename={crd_path()}")

    def established() -> bool:
        crd = json.loads(kubectl("get", "crd", "mpijobs.kubeflow.org", "--output=json"))
        conditions = (crd.get("status") or {}).get("conditions")
        return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions or [])

    wait_until(established, message="the MPIJob CRD to be Established")
    if not kubectl("get", "namespace", LOCK_NAMESPACE, "--ignore-not-found", "--output=name"):
        kubectl("create", "namespace", LOCK_NAMESPACE)


def mpijob(training: dict[str, Any]) -> dict[str, Any]:
    """The MPIJob that asks for what `training` (the bench's DistributedTraining) asks for: the same image, command,
    workers and GPUs, its launcher created once every worker is Ready, as kubetrain does."""
    spec = training["spec"]
    gpus = {"nvidia.com/gpu": spec["resources"]["gpusPerWorker"]}
    container = {"image": spec["image"], "imagePullPolicy": "IfNotPresent"}
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": training["metadata"]["name"]},
        "spec": {
            "slotsPerWorker": spec["resources"]["gpusPerWorker"] or 1,
            "launcherCreationPolicy": "WaitForWorkersReady",
            "runPolicy": {"cleanPodPolicy": "Running"},
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": {"spec": {"containers": [
                    {**container, "name": "launcher", "command": ["mpirun", *spec["command"]]}]}}},
                "Worker": {"replicas": spec["workers"], "template": {"spec": {"containers": [
                    {**container, "name": "worker", "command": ["/usr/sbin/sshd", "-De"],
                     "resources": {"limits": gpus}}]}}},
            },
        },
    }
