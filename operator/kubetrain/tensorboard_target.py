"""`kubetrain tensorboard`: which pod to forward to, the kubectl command that forwards, and why there is none.

Pure functions of plain data (the job and its pods as the API server returns them). The command itself, which asks
the cluster and runs kubectl, is kubetrain.tensorboard_forward.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubetrain import reasons
from kubetrain.api import parse_job
from kubetrain.contract import LABEL_ATTEMPT, LABEL_INDEX, LABEL_ROLE, TENSORBOARD_CONTAINER, TENSORBOARD_PORT_NAME
from kubetrain.manifests.names import runs_rank0
from kubetrain.pod_state import is_terminating, pod_phase

DEFAULT_LOCAL_PORT = 6006
LOOPBACK = "127.0.0.1"


class NoTensorBoard(Exception):
    """The job has no TensorBoard to forward to now; the message (one line) says why and what to do."""


@dataclass(frozen=True)
class Target:
    """The pod where rank 0 runs and its TensorBoard's container port."""

    namespace: str
    pod: str
    port: int


def url(local_port: int) -> str:
    return f"http://{LOOPBACK}:{local_port}/"


def port_forward_command(kubectl: str, target: Target, local_port: int) -> list[str]:
    """`kubectl port-forward` from this machine's loopback to the pod's TensorBoard."""
    return [kubectl, "port-forward", "--namespace", target.namespace, "--address", LOOPBACK, f"pod/{target.pod}",
            f"{local_port}:{target.port}"]


def logs_command(target: Target) -> str:
    return f"kubectl logs {target.pod} --namespace {target.namespace} --container {TENSORBOARD_CONTAINER}"


def find_target(body: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> Target:
    """The running pod of the job's current attempt where rank 0 runs, and its port named tensorboard; NoTensorBoard
    when tensorboard is off, no such pod is running, or its TensorBoard container is not."""
    job = parse_job(body, admitted=True)
    where = f"DistributedTraining {job.namespace}/{job.name}"
    if not job.spec.tensorboard:
        raise NoTensorBoard(f"{where} has no TensorBoard: spec.tensorboard.enabled is false; it cannot change on a "
                            "job, so create the job again with spec.tensorboard: {enabled: true}")
    status = body.get("status") or {}
    attempt = str(status.get("attempt", 0))
    phase = status.get("phase") or reasons.PENDING
    ours = [pod for pod in pods if not is_terminating(pod) and _labels(pod).get(LABEL_ATTEMPT) == attempt
            and runs_rank0(job, _labels(pod).get(LABEL_ROLE, ""), int(_labels(pod).get(LABEL_INDEX, 0)))]
    if not ours:
        if phase in reasons.TERMINAL_PHASES:
            raise NoTensorBoard(f"{where} is {phase} and its pods are gone, TensorBoard with them; its event files "
                                "stay in the job's folder of the checkpoint volume")
        raise NoTensorBoard(f"{where} has no pod for rank 0 yet (phase {phase}): try again once it is Running "
                            f"(kubetrain status {job.name})")
    pod = ours[0]
    name = str(pod["metadata"]["name"])
    if pod_phase(pod) != "Running":
        raise NoTensorBoard(f"{where}: pod {name}, where TensorBoard runs, is {pod_phase(pod)}: try again once it is "
                            f"Running (kubetrain status {job.name})")
    port = _tensorboard_port(pod)
    if port is None:
        raise NoTensorBoard(f"{where}: pod {name} has no port named {TENSORBOARD_PORT_NAME} (an operator older than "
                            "spec.tensorboard made it); it gets one at the job's next attempt")
    target = Target(job.namespace, name, port)
    waiting = _container_waiting(pod)
    if waiting:
        raise NoTensorBoard(f"{where}: the {TENSORBOARD_CONTAINER} container of pod {name} is not running "
                            f"({waiting}); its log says why: {logs_command(target)}")
    return target


def _labels(pod: Mapping[str, Any]) -> Mapping[str, str]:
    return (pod.get("metadata") or {}).get("labels") or {}


def _containers(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    spec = pod.get("spec") or {}
    return [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]


def _tensorboard_port(pod: Mapping[str, Any]) -> int | None:
    for container in _containers(pod):
        for port in container.get("ports") or []:
            if port.get("name") == TENSORBOARD_PORT_NAME:
                return int(port["containerPort"])
    return None


def _container_waiting(pod: Mapping[str, Any]) -> str | None:
    """Why the TensorBoard container is not running (its waiting reason), None when it runs or has no status yet."""
    status = pod.get("status") or {}
    for container in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        if container.get("name") == TENSORBOARD_CONTAINER:
            state = container.get("state") or {}
            if "running" in state:
                return None
            waiting = state.get("waiting") or {}
            terminated = state.get("terminated") or {}
            return str(waiting.get("reason") or terminated.get("reason") or "not started")
    return None
