"""A job's events and its children's, oldest first, as one line each: what a failed test shows of what the operator
decided."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kubetrain.contract import job_of_worker, launcher_name


def job_events(events: Iterable[dict[str, Any]], job: str) -> str:
    """The events (Event objects, as `kubectl get events -o json` lists them) about `job`, oldest first."""
    mine = sorted((event for event in events if about(job, event["involvedObject"]["name"])), key=when)
    return "\n".join(f"{when(e)} {e.get('type')} {e.get('reason')} {e['involvedObject']['kind']}/"
                     f"{e['involvedObject']['name']}: {e.get('message')}" for e in mine) or "no events"


def about(job: str, object_name: str) -> bool:
    """Whether an event's object is the job, one of its workers, its launcher Job or a launcher pod."""
    launcher = launcher_name(job)
    return object_name in (job, launcher) or job_of_worker(object_name) == job or \
        object_name.rpartition("-")[0] == launcher


def when(event: dict[str, Any]) -> str:
    return str(event.get("lastTimestamp") or event.get("eventTime") or event["metadata"].get("creationTimestamp"))
