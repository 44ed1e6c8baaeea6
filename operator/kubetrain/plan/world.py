"""Observe one job's world once per pass: the spec, the status so far, its children, and the current attempt's
workers, launcher Job and launcher pod picked out of them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
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

    @property
    def live_workers(self) -> dict[int, Obj]:
        return {index: pod for index, pod in self.workers.items() if not is_terminating(pod)}

    @property
    def ready_count(self) -> int:
        """Ready workers the spec still wants (an elastic job's scaled-down ones are not counted)."""
        return sum(1 for index, pod in self.live_workers.items() if index < self.job.spec.workers and is_ready(pod))

    @property
    def reporter_uids(self) -> list[str]:
        """The uids of the pods rank 0 may run in: the attempt's workers and its launcher's pod (status.podUIDs, which
        the chart's admission policy checks a progress report's token against).

        A worker counts only under a name the operator gives (index below spec.workers): a pod someone else creates
        with the job's labels and owner can take no such name while the operator's pod holds it. A launcher pod counts
        only when the current launcher Job owns it."""
        spec = self.job.spec
        uids = [pod["metadata"].get("uid") for index, pod in self.live_workers.items()
                if index < spec.workers and pod["metadata"]["name"] == worker_name(self.job.name, index)]
        launcher_uid = (self.launcher or {}).get("metadata", {}).get("uid")
        uids += [pod["metadata"].get("uid") for pod in self.children.pods
                 if launcher_uid and role_of(pod) == ROLE_LAUNCHER and not is_terminating(pod)
                 and any(ref.get("uid") == launcher_uid for ref in pod["metadata"].get("ownerReferences") or [])]
        return sorted(str(uid) for uid in uids if uid)


def observe(job: Job, status: Mapping[str, Any], children: Children, now: datetime) -> World:
    attempt = int(status.get("attempt", 0))
    workers = workers_by_index(children.pods, attempt)
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
        departed={index: pod for index, pod in workers_by_index(children.departed, attempt).items()
                  if index not in workers},
        workload=children.named(children.workloads, group_name(job.name, job.uid, attempt)) if job.queue else None,
    )


def workers_by_index(pods: Iterable[Obj], attempt: int) -> dict[int, Obj]:
    """The worker pods of `attempt` among `pods`, by index."""
    return {int(pod["metadata"]["labels"].get(LABEL_INDEX, "0")): pod for pod in pods
            if role_of(pod) == ROLE_WORKER and attempt_of(pod) == attempt}
