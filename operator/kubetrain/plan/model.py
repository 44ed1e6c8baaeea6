"""What a reconcile decision is made of: the children it sees, the actions and events it asks for, the Plan."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
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
class Patch:
    """Bring an existing child back to the desired fields (drift correction)."""

    obj: dict[str, Any]


@dataclass(frozen=True)
class Delete:
    """Delete the object of that name, only while it is the one of `uid` (when given): a delete decided on one
    attempt's pod never removes the next attempt's pod of the same name."""

    api_version: str
    kind: str
    name: str
    uid: str | None = None


def delete_of(api_version: str, kind: str, obj: Obj) -> Delete:
    """The Delete of `obj` as the plan saw it: its name, and its uid as the precondition."""
    return Delete(api_version, kind, obj["metadata"]["name"], obj["metadata"].get("uid"))


@dataclass(frozen=True)
class ReleaseGang:
    """Every worker of a Coscheduling gang is gone: mark its PodGroup with `since` (see desired.release_gang)."""

    since: str


@dataclass(frozen=True)
class DeleteTraining:
    """ttlSecondsAfterFinished elapsed: delete the DistributedTraining itself (children follow by ownership)."""


# An event's message is cut to this many characters (kubetrain.kube): a longer one loses its end.
EVENT_MESSAGE_CHARS = 1024


@dataclass(frozen=True)
class SaveLog:
    """Copy the end of attempt `attempt`'s launcher output into its ConfigMap (kubetrain.log_copy) before
    the pods go; `pod` is the launcher pod to read (None: none is left, the copy says so)."""

    attempt: int
    pod: str | None


@dataclass(frozen=True)
class Event:
    type: str  # Normal | Warning
    reason: str
    message: str


Action = Create | CreateSshSecret | Patch | Delete | DeleteTraining | SaveLog | ReleaseGang


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


# RFC 3339's date-time: any fraction of a second, Z or a numeric offset (T and Z in either case, as it allows).
_RFC3339 = re.compile(r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})")


def parse_time(value: str | None) -> datetime | None:
    """An RFC 3339 time as a naive UTC datetime (the operator's clock); None for no value. Fractions beyond
    microseconds are cut. Raises ValueError for anything else, a leap second included (datetime has none)."""
    if not value:
        return None
    match = _RFC3339.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError(f"{value!r} is not an RFC 3339 time")
    year, month, day, hour, minute, second = (int(part) for part in match.groups()[:6])
    fraction, offset = match.group(7), match.group(8)
    zone = timezone.utc
    if offset.upper() != "Z":
        sign = -1 if offset[0] == "-" else 1
        zone = timezone(sign * timedelta(hours=int(offset[1:3]), minutes=int(offset[4:6])))
    micro = int(fraction[:6].ljust(6, "0")) if fraction else 0
    moment = datetime(year, month, day, hour, minute, second, micro, tzinfo=zone)
    return moment.astimezone(timezone.utc).replace(tzinfo=None)


def read_time(value: Any) -> datetime | None:
    """`parse_time` for a value nobody vouches for (rank 0's report): None when it cannot be read."""
    try:
        return parse_time(value) if isinstance(value, str) else None
    except ValueError:
        return None
