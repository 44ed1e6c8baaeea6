"""Gang scheduling (spec.scheduling.gang): the PodGroup of the chosen scheduler and how a worker pod joins it.

- Coscheduling (scheduler-plugins): a `scheduling.x-k8s.io/v1alpha1` PodGroup; pods carry the label
  `scheduling.x-k8s.io/pod-group`.
- Volcano: a `scheduling.volcano.sh/v1beta1` PodGroup; pods carry the annotation `scheduling.k8s.io/group-name`.
Both hold every worker back until `minAvailable` of them fit at once, with the resources they ask for in
`minResources` (rank 0's TensorBoard sidecar included). The launcher is not a member: it starts once the workers
are up.
"""

from __future__ import annotations

from typing import Any

from kubernetes.utils.quantity import parse_quantity

from kubetrain.api import Gang, Job
from kubetrain.children import COSCHEDULING_POD_GROUP, VOLCANO_POD_GROUP
from kubetrain.contract import ROLE_WORKER, pod_group_name
from kubetrain.manifests.names import metadata

COSCHEDULING_LABEL = "scheduling.x-k8s.io/pod-group"
VOLCANO_ANNOTATION = "scheduling.k8s.io/group-name"
# Set on a Coscheduling PodGroup once every worker of the gang is gone: when it went (see release_patch).
RELEASED_ANNOTATION = "kubetrain.dev/workers-gone-since"


def build_pod_group(job: Job, gang: Gang, worker_requests: dict[str, Any],
                    sidecar_requests: dict[str, Any] | None = None) -> dict[str, Any]:
    """The job's PodGroup for `gang`'s scheduler; `worker_requests` is what one worker asks for (GPUs included),
    `sidecar_requests` what one member's sidecar adds once (rank 0's TensorBoard)."""
    once = sidecar_requests or {}
    min_resources = {name: _sum((worker_requests.get(name, 0), gang.min_available), (once.get(name, 0), 1))
                     for name in {**worker_requests, **once}}
    spec: dict[str, Any] = {"minMember": gang.min_available}
    if min_resources:
        spec["minResources"] = min_resources
    if gang.scheduler == "Coscheduling":
        spec["scheduleTimeoutSeconds"] = gang.schedule_timeout_seconds
        kind = COSCHEDULING_POD_GROUP
    else:
        kind = VOLCANO_POD_GROUP
        if gang.queue:
            spec["queue"] = gang.queue
    return {"apiVersion": kind.api_version, "kind": kind.kind,
            "metadata": metadata(job, pod_group_name(job.name), ROLE_WORKER), "spec": spec}


def release_patch(job: Job, since: str) -> dict[str, Any]:
    """A merge patch that marks the job's Coscheduling PodGroup: its workers are gone since `since`.

    Coscheduling retries a gang it turned away only when a pod is added or a PodGroup changes. Its controller's last
    update of a finished gang's PodGroup may come while some of its workers still hold their nodes, so without this
    change a waiting gang would wait for the scheduler's 5-minute flush of unschedulable pods."""
    return {"apiVersion": COSCHEDULING_POD_GROUP.api_version, "kind": COSCHEDULING_POD_GROUP.kind,
            "metadata": {"name": pod_group_name(job.name), "namespace": job.namespace,
                         "annotations": {RELEASED_ANNOTATION: since}}}


def join_gang(pod: dict[str, Any], job: Job, gang: Gang) -> None:
    """Make a worker pod a member of the job's gang (in place)."""
    pod["spec"]["schedulerName"] = gang.scheduler_name
    group = pod_group_name(job.name)
    if gang.scheduler == "Coscheduling":
        pod["metadata"].setdefault("labels", {})[COSCHEDULING_LABEL] = group
    else:
        pod["metadata"].setdefault("annotations", {})[VOLCANO_ANNOTATION] = group


def _sum(*terms: tuple[Any, int]) -> str:
    """The sum of quantity x count terms, as a plain-number quantity (("16Gi", 2) -> "34359738368")."""
    text = format(sum(parse_quantity(quantity) * count for quantity, count in terms), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text
