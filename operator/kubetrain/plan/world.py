"""Observe one job's world once per pass: the spec, the status so far, its children, and the current attempt's
workers, launcher Job and launcher pod picked out of them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kubetrain.api import Job
from kubetrain.contract import LABEL_INDEX, ROLE_LAUNCHER, ROLE_WORKER, worker_name
from kubetrain.kueue import group_name
from kubetrain.plan.model import Children, Obj, attempt_of, parse_time, role_of
from kubetrain.pod_state import is_ready, is_terminating


@dataclass(frozen=True)
class World:
    job: Job
    status: Mapping[str, Any]
    children: Children
    now: datetime
    attempt: int
    restarts: int
    started: datetime  # startTime, or now for a job that has not started
    workers: dict[int, Obj]  # the current attempt's worker pods by index, terminating ones included
    launcher: Obj | None  # the current attempt's launcher Job
    launcher_pod: Obj | None  # its newest pod
    departed: dict[int, Obj]  # the current attempt's workers deleted with a disruption mark (not in workers)
    workload: Obj | None = None  # Kueue's Workload of the current attempt's workers (a job with a queue)
    # Status times that are not RFC 3339, by field (status.startTime): left out of `status`, never decided on.
    unreadable: Mapping[str, str] = field(default_factory=dict)

    @property
    def live_workers(self) -> dict[int, Obj]:
        return {index: pod for index, pod in self.workers.items() if not is_terminating(pod)}

    @property
    def ready_count(self) -> int:
        """Ready workers the spec still wants (an elastic job's scaled-down ones are not counted)."""
        return sum(1 for index, pod in self.live_workers.items() if index < self.job.spec.workers and is_ready(pod))

    @property
    def own_workers(self) -> dict[int, Obj]:
        """The live workers under the names the operator gives them (index below spec.workers): a pod someone else
        creates with the job's labels and owner can take no such name while the operator's pod holds it."""
        return {index: pod for index, pod in self.live_workers.items()
                if index < self.job.spec.workers and pod["metadata"]["name"] == worker_name(self.job.name, index)}

    @property
    def reporter_uids(self) -> list[str]:
        """The uids of the pods rank 0 may run in: the attempt's own workers and its launcher's pod (status.podUIDs,
        which the chart's admission policy checks a progress report's token against). A launcher pod counts only when
        the current launcher Job owns it."""
        uids = [pod["metadata"].get("uid") for pod in self.own_workers.values()]
        launcher_uid = (self.launcher or {}).get("metadata", {}).get("uid")
        uids += [pod["metadata"].get("uid") for pod in self.children.pods
                 if launcher_uid and role_of(pod) == ROLE_LAUNCHER and not is_terminating(pod)
                 and any(ref.get("uid") == launcher_uid for ref in pod["metadata"].get("ownerReferences") or [])]
        return sorted(str(uid) for uid in uids if uid)


def observe(job: Job, status: Mapping[str, Any], children: Children, now: datetime) -> World:
    status, unreadable = readable_status(status)
    attempt = int(status.get("attempt", 0))
    workers = workers_by_index(children.pods, attempt, job.name)
    launcher = next((j for j in children.jobs if role_of(j) == ROLE_LAUNCHER), None)
    pods = sorted((p for p in children.pods if role_of(p) == ROLE_LAUNCHER and attempt_of(p) == attempt),
                  key=lambda p: p["metadata"].get("creationTimestamp") or "")
    return World(
        job=job,
        status=status,
        children=children,
        now=now,
        attempt=attempt,
        restarts=int(status.get("restarts", 0)),
        started=parse_time(status.get("startTime")) or now,
        workers=workers,
        launcher=launcher if launcher is not None and attempt_of(launcher) == attempt else None,
        launcher_pod=pods[-1] if pods else None,
        departed={index: pod for index, pod in workers_by_index(children.departed, attempt, job.name).items()
                  if index not in workers},
        workload=children.named(children.workloads, group_name(job.name, job.uid, attempt)) if job.queue else None,
        unreadable=unreadable,
    )


def readable_status(status: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """`status` without the times the operator cannot read, and those times by field. The operator wrote them, but
    anyone allowed to patch the status subresource may have rewritten them."""
    readable, unreadable = dict(status), {}
    for key in ("startTime", "completionTime"):
        if not _is_time(readable.get(key)):
            unreadable[f"status.{key}"] = str(readable.pop(key))
    conditions = []
    for condition in readable.get("conditions") or []:
        if not _is_time(condition.get("lastTransitionTime")):
            unreadable[f"status.conditions[{condition.get('type')}].lastTransitionTime"] = str(
                condition["lastTransitionTime"])
            condition = {key: value for key, value in condition.items() if key != "lastTransitionTime"}
        conditions.append(condition)
    if "conditions" in readable:
        readable["conditions"] = conditions
    return readable, unreadable


def _is_time(value: Any) -> bool:
    """Absent, or an RFC 3339 time."""
    try:
        parse_time(value)
    except ValueError:
        return False
    return True


def workers_by_index(pods: Iterable[Obj], attempt: int, job_name: str) -> dict[int, Obj]:
    """The worker pods of `attempt` among `pods`, by index. A pod whose name is not the worker name of its index
    label is not one: someone else made it with the job's labels, and it must not stand in for the real one."""
    found = {}
    for pod in pods:
        label = str(pod["metadata"]["labels"].get(LABEL_INDEX, "0"))
        if not label.isdigit() or role_of(pod) != ROLE_WORKER or attempt_of(pod) != attempt:
            continue
        if pod["metadata"]["name"] == worker_name(job_name, int(label)):
            found[int(label)] = pod
    return found
