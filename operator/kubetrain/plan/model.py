"""What a reconcile decision is made of: the children it sees, the actions and events it asks for, the Plan."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kubetrain.contract import LABEL_ATTEMPT, LABEL_ROLE

Obj = Mapping[str, Any]
SAFETY_REQUEUE_SECONDS = 60.0
WAIT_REQUEUE_SECONDS = 2.0


@dataclass(frozen=True)
class Create:
    obj: dict[str, Any]


@dataclass(frozen=True)
class CreateSshSecret:
    """Create the job's Secret with a freshly generated key pair (the only non-deterministic child)."""


@dataclass(frozen=True)
class AddSshHostKey:
    """Add a host key to the job's Secret, which an older operator wrote without one (kubetrain.manifests.ssh)."""


@dataclass(frozen=True)
class Patch:
    """Bring an existing child back to the desired fields (drift correction)."""

    obj: dict[str, Any]


@dataclass(frozen=True)
class Delete:
    api_version: str
    kind: str
    name: str


@dataclass(frozen=True)
class DeleteTraining:
    """ttlSecondsAfterFinished elapsed: delete the DistributedTraining itself (children follow by ownership)."""


@dataclass(frozen=True)
class Event:
    type: str  # Normal | Warning
    reason: str
    message: str


Action = Create | CreateSshSecret | AddSshHostKey | Patch | Delete | DeleteTraining


@dataclass
class Children:
    """Everything the job owns, as plain dicts, grouped by kind (one field per watched kubetrain.children entry)."""

    pods: list[Obj] = field(default_factory=list)
    jobs: list[Obj] = field(default_factory=list)
    services: list[Obj] = field(default_factory=list)
    configmaps: list[Obj] = field(default_factory=list)
    secrets: list[Obj] = field(default_factory=list)
    endpointslices: list[Obj] = field(default_factory=list)
    departed: list[Obj] = field(default_factory=list)  # pods deleted with a disruption mark (kubetrain.cache.Departed)
    workloads: list[Obj] = field(default_factory=list)  # Kueue's Workloads of the job's pod groups (not owned)

    def named(self, kind_list: list[Obj], name: str) -> Obj | None:
        return next((o for o in kind_list if o["metadata"]["name"] == name), None)


@dataclass
class Plan:
    actions: list[Action] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    requeue_after: float | None = None


def attempt_of(obj: Obj) -> int:
    try:
        return int((obj.get("metadata") or {}).get("labels", {}).get(LABEL_ATTEMPT, "-1"))
    except ValueError:
        return -1


def role_of(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("labels", {}).get(LABEL_ROLE, ""))


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=None)
