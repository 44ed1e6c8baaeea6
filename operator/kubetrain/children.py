"""The one registry of the kinds of object a DistributedTraining owns: what `kubetrain render` shows, what the chart's
RBAC must allow, what the API layer writes, what the cache watches and keeps (`keep`), and what the planner
receives (`plan.Children` has one field per watched entry, in this order)."""

from __future__ import annotations

import dataclasses

from kubetrain.contract import LABEL_JOB, LABEL_ROLE, ROLE_ATTEMPT_LOG
from kubetrain.projection import METADATA, Shape

CONDITIONS: Shape = {"type": True, "status": True, "reason": True, "message": True, "lastTransitionTime": True}
CONTAINER_STATES: Shape = {"name": True, "state": True}


@dataclasses.dataclass(frozen=True)
class ChildKind:
    field: str  # plan.Children attribute and cache index name
    api_version: str
    kind: str
    plural: str
    keep: Shape = dataclasses.field(default_factory=dict)  # what the cache keeps beside metadata: what passes read
    watched: bool = True  # False: created and read back on conflict, never listed (a gang's PodGroup)
    selector: str = LABEL_JOB  # the label selector of its watch: the objects of a job

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    @property
    def shape(self) -> Shape:
        """The projection the cache stores: metadata, then `keep`."""
        return {"apiVersion": True, "kind": True, "metadata": METADATA, **self.keep}


POD = ChildKind("pods", "v1", "Pod", "pods", keep={
    "spec": {"nodeName": True, "schedulingGates": True},
    "status": {"phase": True, "reason": True, "message": True, "startTime": True, "podIP": True,
               "conditions": CONDITIONS, "containerStatuses": CONTAINER_STATES,
               "initContainerStatuses": CONTAINER_STATES},
})
COSCHEDULING_POD_GROUP = ChildKind("coschedulingpodgroups", "scheduling.x-k8s.io/v1alpha1", "PodGroup", "podgroups",
                                   watched=False)
VOLCANO_POD_GROUP = ChildKind("volcanopodgroups", "scheduling.volcano.sh/v1beta1", "PodGroup", "podgroups",
                              watched=False)

CHILD_KINDS: tuple[ChildKind, ...] = (
    POD,
    ChildKind("jobs", "batch/v1", "Job", "jobs", keep={"status": {"conditions": CONDITIONS}}),
    ChildKind("services", "v1", "Service", "services", keep={"spec": True}),  # drift is checked on spec
    # Not the copies of failed attempts' launcher logs (kubetrain.manifests.attempt_log): up to 5 of 512 KiB per job,
    # which a list of every job's ConfigMaps would carry whole; no pass reads them.
    ChildKind("configmaps", "v1", "ConfigMap", "configmaps", keep={"data": True},
              selector=f"{LABEL_JOB},{LABEL_ROLE}!={ROLE_ATTEMPT_LOG}"),
    # The key pair stays in the API server: the planner only needs to know the Secret exists.
    ChildKind("secrets", "v1", "Secret", "secrets"),
    # An elastic job's Ready workers, which the operator lists itself (kubetrain.manifests.service).
    ChildKind("endpointslices", "discovery.k8s.io/v1", "EndpointSlice", "endpointslices",
              keep={"endpoints": True, "ports": True}),
    COSCHEDULING_POD_GROUP,
    VOLCANO_POD_GROUP,
)
WATCHED_KINDS: tuple[ChildKind, ...] = tuple(child for child in CHILD_KINDS if child.watched)
BY_KIND = {(child.api_version, child.kind): child for child in CHILD_KINDS}
