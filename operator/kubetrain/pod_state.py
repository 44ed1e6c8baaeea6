"""Pure functions from observed children to what the status says: pod states, failures, phase, conditions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubetrain import reasons
from kubetrain.contract import INIT_CONTAINER
from kubetrain.failure_policy import DISRUPTION_TARGET, Cause
from kubetrain.failure_report import FailureDetail, Placement, from_launcher, from_pod, read_report
from kubetrain.kueue import stopped_mark

IMAGE_ERRORS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName")
# the launcher entrypoint exits 3 when a worker never accepted ssh within launcher.waitForWorkersSeconds
LAUNCHER_UNREACHABLE_EXIT = 3
CONTAINER_START_ERRORS = ("CreateContainerConfigError", "CreateContainerError", "RunContainerError")
# Why Kubernetes took a pod away (the DisruptionTarget condition's reason) -> what the job reports.
DISRUPTIONS = {
    "DeletionByTaintManager": reasons.NODE_LOST,  # its node became unreachable or was tainted NoExecute
    "DeletionByPodGC": reasons.NODE_LOST,  # its node no longer exists
    "PreemptionByScheduler": reasons.PREEMPTED,
    "EvictionByEvictionAPI": reasons.EVICTED,  # kubectl drain, the descheduler, a user's eviction
    "TerminationByKubelet": reasons.EVICTED,  # node pressure or graceful node shutdown
}

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class Failure:
    """Why the current attempt cannot go on: names the pod and what happened to it; `cause` is what
    spec.runPolicy.podFailurePolicy decides on."""

    reason: str
    message: str
    cause: Cause = Cause()
    detail: FailureDetail | None = None  # status.failure: the failing rank, its pod and node, its last lines


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_phase(pod: Obj) -> str:
    return (pod.get("status") or {}).get("phase") or "Pending"


def is_terminating(obj: Obj) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def is_ready(pod: Obj) -> bool:
    if pod_phase(pod) != "Running" or is_terminating(pod):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in _conditions(pod))


def unschedulable_message(pod: Obj) -> str | None:
    """The scheduler's message when it cannot place the pod (e.g. not enough nvidia.com/gpu)."""
    for condition in _conditions(pod):
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            if condition.get("reason") == "Unschedulable":
                return condition.get("message") or "no node fits the pod"
    return None


def pod_failure(pod: Obj, role: str, where: Placement | None = None) -> Failure | None:
    """A failure of one pod, named with its reason: a disruption (node lost, preempted, evicted), exit code,
    OOMKilled, image pull errors. A failed pod's detail names the failing rank (the launcher's report, or the pod's
    own rank), its pod and its node; `where` places the attempt's ranks."""
    name = (pod.get("metadata") or {}).get("name", "?")
    status = pod.get("status") or {}
    cause = Cause(role.capitalize(), _exit_code(pod),
                  frozenset((str(c.get("type")), str(c.get("status"))) for c in _conditions(pod)))
    disruption = _disruption(pod, role, name)
    if disruption is not None:
        return Failure(disruption[0], disruption[1], cause)
    failed_reason = reasons.LAUNCHER_FAILED if role == "launcher" else reasons.WORKER_FAILED
    for container in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in IMAGE_ERRORS:
            detail = waiting.get("message") or waiting["reason"]
            if container.get("name") == INIT_CONTAINER:  # not the job's image: the installation's
                detail += " (the operator's entrypoints image: the chart's entrypoints.image)"
            return Failure(reasons.IMAGE_PULL_FAILED, f"{role} pod {name}: {waiting['reason']}: {detail}", cause)
        if waiting.get("reason") in CONTAINER_START_ERRORS:
            detail = waiting.get("message") or waiting["reason"]
            return Failure(failed_reason, f"{role} pod {name}: {waiting['reason']}: {detail}", cause)
    phase = pod_phase(pod)
    if phase == "Failed":
        detail = failure_detail(pod, role, where or Placement())
        if role == "launcher" and cause.exit_code == LAUNCHER_UNREACHABLE_EXIT and not detail.reported:
            failed_reason = reasons.WORKERS_UNREACHABLE  # not a rank's exit 3: the MPI command never ran
        return Failure(failed_reason, detail.headline(role, name), cause, detail)
    if phase == "Succeeded" and role == "worker":
        return Failure(reasons.WORKER_FAILED, f"worker pod {name} exited before the launcher finished", cause)
    return None


def is_disrupted(pod: Obj) -> bool:
    """Whether Kubernetes marked the pod for taking away (DisruptionTarget True), or Kueue did (TerminationTarget)."""
    return _disruption_mark(pod) is not None or stopped_mark(pod) is not None


def kueue_stop(pod: Obj, role: str) -> Failure | None:
    """Kueue stopped the pod (its Workload was evicted: preempted, deactivated, ...): a requeue, not a failure."""
    mark = stopped_mark(pod)
    if mark is None:
        return None
    words = str(mark.get("message") or mark.get("reason") or "evicted")
    reason = reasons.PREEMPTED_BY_KUEUE if words.startswith("Preempted") else reasons.EVICTED_BY_KUEUE
    name = (pod.get("metadata") or {}).get("name", "?")
    return Failure(reason, f"Kueue stopped {role} pod {name}: {words}")


def _disruption_mark(pod: Obj) -> Obj | None:
    return next((c for c in _conditions(pod) if c.get("type") == DISRUPTION_TARGET and c.get("status") == "True"),
                None)


def _disruption(pod: Obj, role: str, name: str) -> tuple[str, str] | None:
    """(reason, message) when Kubernetes is taking the pod away (DisruptionTarget True), naming the node."""
    condition = _disruption_mark(pod)
    if condition is None:
        return None
    why = str(condition.get("reason") or "Disrupted")
    reason = DISRUPTIONS.get(why, reasons.DISRUPTED)
    node = (pod.get("spec") or {}).get("nodeName") or "no node"
    detail = f"{why}: {condition['message']}" if condition.get("message") else why
    if reason == reasons.NODE_LOST:
        return reason, f"{role} pod {name}: node {node} lost ({detail})"
    return reason, f"{role} pod {name} on node {node}: {detail}"


def failure_detail(pod: Obj, role: str, where: Placement) -> FailureDetail:
    """What status.failure says of a failed pod: the launcher's report when it wrote one (its termination message),
    else the pod's own state."""
    terminated = _terminated(pod, role)
    if role == "launcher" and terminated is not None and not (pod.get("status") or {}).get("reason"):
        report = read_report(terminated.get("message"))
        if report is not None:
            return from_launcher(report, where, terminated.get("exitCode"))
    return from_pod(pod, role, where, terminated)


def _terminated(pod: Obj, container_name: str | None = None) -> Obj | None:
    """The terminated state of the named container (each pod's main container is named for its role), else of the
    first container that has one."""
    found = [(container.get("name"), (container.get("state") or {}).get("terminated"))
             for container in (pod.get("status") or {}).get("containerStatuses") or []]
    ended = [(name, terminated) for name, terminated in found if terminated]
    chosen = next((terminated for name, terminated in ended if name == container_name), None)
    if chosen is None and ended:
        chosen = ended[0][1]
    return dict(chosen) if chosen else None


def _exit_code(pod: Obj) -> int | None:
    terminated = _terminated(pod)
    return terminated.get("exitCode") if terminated else None


def job_finished(job: Obj | None) -> str | None:
    """'Complete' or 'Failed' when a batch Job reached either condition."""
    if job is None:
        return None
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("status") == "True" and condition.get("type") in ("Complete", "Failed"):
            return str(condition["type"])
    return None


def headline_metric(progress: Mapping[str, Any]) -> str | None:
    """The one metric `kubectl get dtr` shows: the one rank 0 names as its headline (status.progress.headline), or,
    where it names none, its first metric by name."""
    metrics = progress.get("metrics") or {}
    key = progress.get("headline")
    if key not in metrics:
        key = min(metrics, default=None)
    value = metrics.get(key) if key is not None else None
    return f"{key}={value:.4f}" if isinstance(value, int | float) and not isinstance(value, bool) else None


def merge_conditions(
    previous: Sequence[Obj], updates: Mapping[str, tuple[str, str, str]], now: datetime
) -> list[dict[str, Any]]:
    """Apply {type: (status, reason, message)}; lastTransitionTime moves only when the status flips."""
    merged: dict[str, dict[str, Any]] = {c["type"]: dict(c) for c in previous if "type" in c}
    for kind, (state, reason, message) in updates.items():
        old = merged.get(kind)
        changed = old is None or old.get("status") != state
        merged[kind] = {
            "type": kind,
            "status": state,
            "reason": reason,
            "message": message,
            "lastTransitionTime": iso(now) if changed else old.get("lastTransitionTime", iso(now)),  # type: ignore[union-attr]
        }
    return list(merged.values())


def _conditions(pod: Obj) -> list[Obj]:
    return list((pod.get("status") or {}).get("conditions") or [])
