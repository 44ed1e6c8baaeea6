"""The one registry of the kinds of object a DistributedTraining owns: what the API layer reads and writes, what
the cache watches and what the planner receives (`plan.Children` has one field per entry, in this order)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ChildKind:
    field: str  # plan.Children attribute and cache index name
    api_version: str
    kind: str
    plural: str
    drop: tuple[str, ...] = ()  # top-level keys the cache does not keep (nothing the planner reads)

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]


CHILD_KINDS: tuple[ChildKind, ...] = (
    ChildKind("pods", "v1", "Pod", "pods"),
    ChildKind("jobs", "batch/v1", "Job", "jobs"),
    ChildKind("services", "v1", "Service", "services"),
    ChildKind("configmaps", "v1", "ConfigMap", "configmaps"),
    # The key pair stays in the API server: the planner only needs to know the Secret exists.
    ChildKind("secrets", "v1", "Secret", "secrets", drop=("data", "stringData")),
    ChildKind("serviceaccounts", "v1", "ServiceAccount", "serviceaccounts"),
    ChildKind("roles", "rbac.authorization.k8s.io/v1", "Role", "roles"),
    ChildKind("rolebindings", "rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings"),
)
BY_KIND = {(child.api_version, child.kind): child for child in CHILD_KINDS}
