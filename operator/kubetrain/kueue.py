"""Kueue's plain-Pod integration as kubetrain uses it: the names Kueue reads and writes, and pure readings of its
pods and Workloads.

A job labelled `kueue.x-k8s.io/queue-name` puts each attempt's workers in one Kueue pod group (one Workload, admitted
whole). The launcher stays out of the group: it holds no GPU, and it is created only once every worker is Ready, which
a gated worker never is; Kueue makes a group's Workload only when all `pod-group-total-count` pods exist, so a launcher
in the group would wait for itself. Every worker is created `retriable-in-group: "false"`: an attempt is never
repaired pod by pod (a new attempt is a new group), so the group ends, and its quota is released, as soon as no worker
of it runs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
GROUP_COUNT_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
RETRIABLE_ANNOTATION = "kueue.x-k8s.io/retriable-in-group"
ADMISSION_GATE = "kueue.x-k8s.io/admission"
# The pod condition Kueue sets before it deletes the pods of a Workload it evicts (preempted, deactivated, ...).
STOPPED_CONDITION = "TerminationTarget"
WORKLOAD_API = ("kueue.x-k8s.io", "v1beta1", "workloads")
QUOTA_RESERVED = "QuotaReserved"
MAX_LABEL_VALUE = 63

Obj = Mapping[str, Any]


def group_name(job_name: str, job_uid: str, attempt: int) -> str:
    """The pod group (and so the Workload) of one attempt: unique per job object and attempt, a valid label value."""
    digest = hashlib.sha256(f"{job_uid}/{attempt}".encode()).hexdigest()[:8]
    suffix = f"-{attempt}-{digest}"
    return f"{job_name[:MAX_LABEL_VALUE - len(suffix)].rstrip('-')}{suffix}"


def worker_metadata(queue: str, priority_class: str | None, group: str, workers: int) -> dict[str, dict[str, str]]:
    """The labels and annotations that put a worker pod in `group` of `workers` pods, queued in LocalQueue `queue`."""
    labels = {QUEUE_LABEL: queue, GROUP_LABEL: group}
    if priority_class:
        labels[PRIORITY_LABEL] = priority_class
    return {"labels": labels,
            "annotations": {GROUP_COUNT_ANNOTATION: str(workers), RETRIABLE_ANNOTATION: "false"}}


def gated(pod: Obj) -> bool:
    """Whether Kueue still holds the pod back (its admission scheduling gate)."""
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    return any(gate.get("name") == ADMISSION_GATE for gate in gates)


def stopped_mark(pod: Obj) -> Obj | None:
    """Kueue's TerminationTarget condition on a pod it stopped (its Workload was evicted), or None."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == STOPPED_CONDITION and c.get("status") == "True"), None)


def waiting_words(workload: Obj | None) -> str:
    """What Kueue says of a Workload it has not admitted: its QuotaReserved condition's message."""
    if workload is None:
        return "Kueue has not made the Workload yet"
    conditions = (workload.get("status") or {}).get("conditions") or []
    reserved = next((c for c in conditions if c.get("type") == QUOTA_RESERVED), None)
    if reserved is None:
        return "Kueue has not looked at the Workload yet"
    return str(reserved.get("message") or reserved.get("reason") or "no quota reserved")


def cluster_queue(workload: Obj | None) -> str | None:
    """The ClusterQueue that admitted the Workload, or None."""
    admission = ((workload or {}).get("status") or {}).get("admission") or {}
    return admission.get("clusterQueue")
